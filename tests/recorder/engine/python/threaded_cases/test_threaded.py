"""A case file that starts a thread when imported: a template process holding it must refuse to
fork (a lock the thread holds would stay held in every rank), and say how to run it instead."""

import threading
import time

import cprr

threading.Thread(target=time.sleep, args=(3600,), name="import-time sleeper", daemon=True).start()


@cprr.case(name="threaded/noop", world_sizes=[1])
def noop(ctx):
    pass
