"""A suite's own process-group set-up inside a case (cprr.distributed.shim), recorded through
cprecord on cpu, pooled and fresh: init_process_group by env://, by a FileStore of the suite's or
with explicit arguments returns the case's default group; destroy_process_group() of it is nothing
to the next pooled case; torchrun's variables are set; a rank or world size that disagrees with
the case fails it, naming both; a backend the world's group is not (cprr.distributed.backends)
is the case's default group, made once per rank process and the world's again after the case,
and one torch cannot make fails the case with torch's error. Skips (cprr.api.skips:
unittest.SkipTest, pytest.skip, a SystemExit with a code of torch's TEST_SKIPS) are the status
`skip` in the JSON and JUnit, never a pass or a failure; a rank that skips alone fails the
execution, named. MASTER_PORT without a port cprecord claimed is torchrun's default, the number
the C++ side claims from (one definition, read through the compiled module)."""

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from conftest import record_python, tool_env

CASES = textwrap.dedent('''
    import os
    import sys
    import tempfile
    import types
    import unittest

    import torch
    import torch.distributed as dist

    import cprr


    def _sum_of_ranks(ctx):
        t = torch.ones(4, device=ctx.device) * dist.get_rank()
        dist.all_reduce(t)
        return t


    @cprr.case(name="suite/env_init", world_sizes=[2, 3])
    def env_init(ctx):
        # As a torchrun script starts: everything from the environment.
        assert int(os.environ["RANK"]) == ctx.rank
        assert int(os.environ["WORLD_SIZE"]) == ctx.world_size
        assert int(os.environ["LOCAL_RANK"]) == ctx.rank
        assert int(os.environ["LOCAL_WORLD_SIZE"]) == ctx.world_size
        assert os.environ["MASTER_ADDR"] == "127.0.0.1"
        # The port the run claimed for this job on the host, in every world of the job.
        assert os.environ["MASTER_PORT"] == os.environ["CPRR_MASTER_PORT"]
        dist.init_process_group("gloo", init_method="env://")
        ctx.output("sum", _sum_of_ranks(ctx))
        dist.destroy_process_group()  # the suite's tear-down


    @cprr.case(name="suite/store_init", world_sizes=[2])
    def store_init(ctx):
        # As MultiProcessTestCase's child does: a FileStore of its own, explicit rank and size.
        store = dist.FileStore(os.path.join(tempfile.gettempdir(), "cprr-shim-store"), 2)
        dist.init_process_group("gloo", store=store, rank=ctx.rank, world_size=2)
        assert dist.is_initialized() and dist.get_world_size() == 2
        ctx.output("sum", _sum_of_ranks(ctx))
        dist.destroy_process_group()
        dist.destroy_process_group(dist.group.WORLD)
        assert dist.is_initialized()  # the case's default group outlives the suite's tear-down
        ctx.output("after", _sum_of_ranks(ctx))


    @cprr.case(name="suite/after_teardown", world_sizes=[2])
    def after_teardown(ctx):
        # Pooled after the cases above: the default group they "destroyed" is still there.
        assert dist.is_initialized()
        ctx.output("sum", _sum_of_ranks(ctx))


    # A backend of the case's own asking: gloo under another name, counting the groups made.
    _probe_groups = []


    def _probe(store, rank, size, timeout):
        _probe_groups.append(rank)
        return dist.ProcessGroupGloo(store, rank, size, timeout)


    if not hasattr(dist.Backend, "CPRR_PROBE"):
        dist.Backend.register_backend("cprr_probe", _probe)


    def _probe_init(ctx):
        dist.init_process_group("cprr_probe", init_method="env://")
        assert dist.get_backend() == "cprr_probe", dist.get_backend()
        assert _probe_groups == [ctx.rank], _probe_groups  # made once per rank process
        ctx.output("sum", _sum_of_ranks(ctx))
        # A group the case makes takes the case's default backend, as torch gives it.
        assert dist.get_backend(dist.new_group([0, 1])) == "cprr_probe"
        _probe_groups.pop()  # that group's, ended with the case
        dist.destroy_process_group()


    @cprr.case(name="suite/other_backend", world_sizes=[2])
    def other_backend(ctx):
        _probe_init(ctx)


    @cprr.case(name="suite/other_backend_again", world_sizes=[2])
    def other_backend_again(ctx):
        assert dist.get_backend() == "gloo"  # the world's again after the case that asked
        _probe_init(ctx)


    @cprr.case(name="suite/world_backend_after", world_sizes=[2])
    def world_backend_after(ctx):
        dist.init_process_group("gloo", init_method="env://")
        assert dist.get_backend() == "gloo", dist.get_backend()
        ctx.output("sum", _sum_of_ranks(ctx))


    @cprr.case(name="suite/backend_torch_lacks", world_sizes=[2], expect="fail")
    def backend_torch_lacks(ctx):
        dist.init_process_group("mpi", init_method="env://")


    @cprr.case(name="suite/unittest_skip", world_sizes=[2])
    def unittest_skip(ctx):
        raise unittest.SkipTest("needs 8 GPUs")


    @cprr.case(name="suite/pytest_skip", world_sizes=[2])
    def pytest_skip(ctx):
        import pytest
        pytest.skip("not on this backend")


    @cprr.case(name="suite/test_skips_exit", world_sizes=[2])
    def test_skips_exit(ctx):
        # As a MultiProcessTestCase child exits; a stand-in for common_distributed where it
        # cannot import (torch 1.13's needs expecttest).
        try:
            from torch.testing._internal.common_distributed import TEST_SKIPS
        except Exception:
            TEST_SKIPS = {"multi-gpu-2": types.SimpleNamespace(
                exit_code=75, message="Need at least 2 CUDA devices")}
            sys.modules["torch.testing._internal.common_distributed"] = types.SimpleNamespace(
                TEST_SKIPS=TEST_SKIPS)
        sys.exit(TEST_SKIPS["multi-gpu-2"].exit_code)


    @cprr.case(name="suite/skips_alone", world_sizes=[2], expect="fail")
    def skips_alone(ctx):
        if ctx.rank == 1:
            raise unittest.SkipTest("rank 1 has no shard")
        dist.all_reduce(torch.ones(2, device=ctx.device))


    @cprr.case(name="suite/wrong_world_size", world_sizes=[2], expect="fail")
    def wrong_world_size(ctx):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:1", rank=ctx.rank,
                                world_size=4)
''')


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shim")
    (folder / "test_suite.py").write_text(CASES)
    junit = folder / "junit.xml"
    run = record_python(folder, "--db", folder / "run.db", "--json", "--mode", "both",
                        "--junit", junit)
    return run, {c["label"]: c for c in json.loads(run.stdout)["cases"]}, ET.parse(junit).getroot()


def test_every_case_is_as_expected_pooled_and_fresh(recorded):
    run, cases, _ = recorded
    assert run.returncode == 0, run.stderr
    assert sorted(cases) == ["suite/after_teardown@2", "suite/backend_torch_lacks@2",
                             "suite/env_init@2", "suite/env_init@3", "suite/other_backend@2",
                             "suite/other_backend_again@2", "suite/pytest_skip@2",
                             "suite/skips_alone@2", "suite/store_init@2",
                             "suite/test_skips_exit@2", "suite/unittest_skip@2",
                             "suite/world_backend_after@2", "suite/wrong_world_size@2"]
    for label, case in cases.items():
        assert case["as_expected"], case
        modes = sorted(e["mode"] for e in case["executions"])
        assert modes == ["fresh", "pool"], case


def test_the_suites_init_gives_the_cases_group_and_its_sum(recorded):
    _, cases, _ = recorded
    for label in ("suite/env_init@2", "suite/store_init@2", "suite/after_teardown@2",
                  "suite/other_backend@2", "suite/other_backend_again@2",
                  "suite/world_backend_after@2"):
        assert cases[label]["status"] == "pass", cases[label]
        hashes = {o["hash"] for e in cases[label]["executions"] for r in e["ranks"]
                  for o in r["outputs"]}
        assert len(hashes) == 1, (label, hashes)  # every rank and mode summed the same


def test_a_world_size_the_case_does_not_have_fails_it_naming_both(recorded):
    _, cases, _ = recorded
    case = cases["suite/wrong_world_size@2"]
    assert case["status"] == "fail", case
    summary = case["executions"][0]["summary"]
    assert "init_process_group(rank=0, world_size=4) in a cprr case that runs as rank 0 of 2" \
        in summary or "init_process_group(rank=1, world_size=4) in a cprr case that runs as " \
        "rank 1 of 2" in summary, summary


def test_a_backend_torch_cannot_make_fails_the_case_with_torchs_error(recorded):
    _, cases, _ = recorded
    case = cases["suite/backend_torch_lacks@2"]
    assert case["status"] == "fail", case
    for e in case["executions"]:
        assert "doesn't have MPI built in" in e["summary"], e["summary"]


SKIPS = {"suite/unittest_skip@2": "needs 8 GPUs", "suite/pytest_skip@2": "not on this backend",
         "suite/test_skips_exit@2": "Need at least 2 CUDA devices"}


def test_a_skip_on_every_rank_is_a_skip_with_its_reason(recorded):
    _, cases, _ = recorded
    for label, reason in SKIPS.items():
        case = cases[label]
        assert (case["status"], case["verdict"], case["as_expected"]) == ("skip", None, True), case
        for e in case["executions"]:
            assert e["status"] == "skip" and e["summary"] == f"skipped: {reason}", e
            assert [r["outcome"] for r in e["ranks"]] == ["skip", "skip"], e


def test_junit_marks_the_skips_skipped(recorded):
    suite = recorded[2].find("testsuite")
    assert suite.get("skipped") == str(2 * len(SKIPS)), suite.attrib  # pooled and fresh
    skipped = {case.get("name").split(" ")[0]: case.find("skipped").get("message")
               for case in suite.iter("testcase") if case.find("skipped") is not None}
    assert skipped == {label: f"skipped: {reason}" for label, reason in SKIPS.items()}, skipped


def test_a_rank_that_skips_alone_fails_the_execution_named(recorded):
    _, cases, _ = recorded
    case = cases["suite/skips_alone@2"]
    assert case["status"] == "fail" and case["as_expected"], case
    for e in case["executions"]:
        assert e["summary"] == "rank 1 skipped the case (rank 1 has no shard) while rank 0 ran it", e


def _master_port(**env):
    """MASTER_PORT as the shim sets it, and the compiled module's default, in a fresh Python with
    `env` and neither port variable of this process."""
    made = {k: v for k, v in tool_env().items() if k not in ("CPRR_MASTER_PORT", "MASTER_PORT")}
    done = subprocess.run(
        [sys.executable, "-c", "from cprr import _cprr\nfrom cprr.distributed import shim\n"
         "print(shim.environment(0, 2)['MASTER_PORT'], _cprr.DEFAULT_MASTER_PORT)"],
        env=dict(made, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=120)
    assert done.returncode == 0, done.stdout
    return done.stdout.split()


def test_master_port_is_the_claimed_one_else_torchruns_default_from_the_cpp_side():
    assert _master_port() == ["29500", "29500"]  # torchrun's default, as port_claim.h has it
    assert _master_port(CPRR_MASTER_PORT="31234") == ["31234", "29500"]
