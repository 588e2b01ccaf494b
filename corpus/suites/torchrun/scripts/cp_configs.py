"""Model configurations of the context-parallel attention script, by name, shared by every run of
it in one process (as TransformerEngine's run_attention_with_cp.py imports its test module's
table)."""

MODEL_CONFIGS = {
    "cp_1_0": {"heads": 2, "seq": 32, "dim": 8, "mask": "causal"},
    "cp_2_0": {"heads": 2, "seq": 32, "dim": 8, "mask": "causal"},
}
