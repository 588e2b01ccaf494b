"""A case file that starts a thread when imported: a template process must not hold it (a lock
the thread holds would stay held in every rank forked from it), so the template leaves the file to
its ranks, each of which imports it after the fork (cprr.rank.import_probe)."""

import threading
import time

import cprr

threading.Thread(target=time.sleep, args=(3600,),  # why: a thread the import leaves running
                 name="import-time sleeper", daemon=True).start()


@cprr.case(name="threaded/noop", world_sizes=[1])
def noop(ctx):
    # This rank imported the file itself: its thread runs here.
    assert any(t.name == "import-time sleeper" for t in threading.enumerate())
