"""suites_bench's torchrun suite as cprr cases: bench_step.py over 20 command lines at W=2."""

import cprr

cprr.script("bench_step.py", name="bench_step", world_sizes=[2],
            argv=[["--step", str(i)] for i in range(20)])
