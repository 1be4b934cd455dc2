"""Make the CPU runs behind the test reference set `tests/reference/cpu-seed/` (a stand-in for the H100 set, with
the seed study's shape: experiments `seed-33` and `seed-37`, workloads alone, then copies and mixes together).

    python tests/make_reference_runs.py /tmp/refruns          # a few minutes on 2 cores
    colloc-kit reference export /tmp/refruns/seed-33 /tmp/refruns/seed-37 --name cpu-seed --to tests/reference \\
        --fact "machine=CI-like CPU, 2 cores" --fact "what=a stand-in: tiny CPU models, not GPU data"

Only what runs without a GPU: exclusive and naive (MPS and its partitions need one). One naive cell of `seed-33` has a
fault injected (out of memory at step 12) so that the set holds a cell that "did not fit", and `seed-33/not-run.json`
names one cell as not run, as `experiments.seed_run.run` names cells that cannot fit (a STAND-IN reason, labelled so).
"""

import json
import sys
from pathlib import Path

import colloc_kit

SMALL = {"model": "smallcnn", "batch_size": 16}
MEDIUM = {"model": "mobilenet_v3_small", "batch_size": 8}
COMMON = {"device": "cpu", "dataset": "synthetic", "image_size": 32, "synthetic_samples": 128, "steps": 24,
          "warmup_steps": 4, "workers": 0, "interval_s": 0.25}


def main(out: str) -> None:
    for workload in (SMALL, MEDIUM):
        job = {**COMMON, **workload}
        colloc_kit.run([job], mode="exclusive", copies=1, repeats=2, out=out, name="seed-33", progress=False)
        colloc_kit.run([job], mode="naive", copies=[2, 3], repeats=2, out=out, name="seed-33", progress=False)
    oom = {**COMMON, **SMALL, "fail_at_step": 12, "fail_kind": "out_of_memory"}  # a cell that "did not fit"
    colloc_kit.run([oom], mode="naive", copies=7, out=out, name="seed-33", progress=False)
    small, medium = {**COMMON, **SMALL}, {**COMMON, **MEDIUM}
    colloc_kit.run([small], mode="exclusive", repeats=2, out=out, name="seed-37", progress=False)
    colloc_kit.run([medium], mode="exclusive", repeats=2, out=out, name="seed-37", progress=False)
    for mix in ([small, medium], [small, small, medium], [small, medium, medium]):
        colloc_kit.run(mix, mode="naive", repeats=2, out=out, name="seed-37", progress=False)
    (Path(out) / "seed-33" / "not-run.json").write_text(json.dumps(
        {"mobilenet_v3_small naive x7": "STAND-IN reason written by tests/make_reference_runs.py"}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
