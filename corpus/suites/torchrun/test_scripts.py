"""torchrun scripts declared as cprr cases without touching them (cprr.script): the
context-parallel attention script of scripts/, over a grid of command lines, as a pytest
function would launch ``torchrun --nproc-per-node 2 run_context_parallel.py ...`` once per case.

The thd command line rewrites a config shared by every later run in the process: pooled, the
bshd line after it fails (a state leak); fresh, it passes. The twin copies the config first.
"""

import cprr

cprr.script("scripts/run_context_parallel.py", name="cp_attention", world_sizes=[2],
            argv=[["--format", "thd", "--config", "cp_1_0"],
                  ["--format", "bshd", "--config", "cp_1_0"]])

cprr.script("scripts/run_context_parallel.py", name="cp_attention_fixed", world_sizes=[2],
            argv=[["--format", "thd", "--config", "cp_2_0", "--copy-config"],
                  ["--format", "bshd", "--config", "cp_2_0", "--copy-config"]])
