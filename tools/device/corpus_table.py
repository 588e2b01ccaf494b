#!/usr/bin/env python3
"""Puts two `cprecord --mode both --json` documents side by side (cpu vs cuda), one row per case:
status, verdict, whether fresh and pooled differed, and whether both met the case's expectation.
Ends with a count of rows where the backends' verdicts disagree, and of passing cases whose output
hashes are the same on both backends (kernels agree bit for bit; a float all-reduce need not,
since NCCL and Gloo sum in different orders).

    corpus_table.py corpus_cpu.json corpus_cuda.json
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: not a cprecord --json document ({e})")
    return {c["label"]: c for c in doc["cases"]}


def cell(c):
    if c is None:
        return "-"
    mark = "" if c["as_expected"] else " (!)"
    diff = " differs" if c["fresh_vs_pool"] is not None else ""
    return f'{c["status"]}/{c["verdict"] or "-"}{diff}{mark}'


def output_hashes(case):
    """(mode, rank, output name, hash) of every execution, or None unless every execution passed."""
    if any(e["status"] != "pass" for e in case["executions"]):
        return None
    return sorted((e["mode"], r["rank"], o["name"], o["hash"])
                  for e in case["executions"] for r in e["ranks"] for o in r.get("outputs", []))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
    labels = list(cuda) + [l for l in cpu if l not in cuda]
    print(f'{"case":48} {"cpu":28} {"cuda":28}')
    disagree = 0
    for label in labels:
        a, b = cpu.get(label), cuda.get(label)
        same = a is not None and b is not None and a["status"] == b["status"] and \
            a["verdict"] == b["verdict"] and (a["fresh_vs_pool"] is None) == (b["fresh_vs_pool"] is None)
        disagree += 0 if same else 1
        print(f'{label:48} {cell(a):28} {cell(b):28}{"" if same else "  <- differs"}')
    comparable = [l for l in labels if l in cpu and l in cuda and output_hashes(cpu[l]) is not None
                  and output_hashes(cuda[l]) is not None]
    same_bits = [l for l in comparable if output_hashes(cpu[l]) == output_hashes(cuda[l])]
    unexpected = sum(1 for c in cuda.values() if not c["as_expected"])
    for l in comparable:
        if l not in same_bits:
            print(f"output hashes differ across backends: {l}")
    print(f"{len(labels)} cases; cuda: {unexpected} not as expected")
    print(f"cpu vs cuda: {disagree} case(s) with a different status, verdict or fresh-vs-pool flag; "
          f"{len(same_bits)} of {len(comparable)} passing cases with identical output hashes")


if __name__ == "__main__":
    main()
