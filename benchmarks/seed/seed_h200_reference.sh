#!/usr/bin/env bash
# Export experiment 33 fp32 with its three baselines, run on two H200s (issue 50, sessions 28 and 29), as the shipped
# reference set h200-141gb; and draw docs/findings.md (its figures in docs/img/findings/: Playwright and Debian's
# Chromium) from it.
#   bash benchmarks/seed/seed_h200_reference.sh /tmp/h200-ref
set -euo pipefail
work=$1
results=benchmarks/results/h200/issue50
mkdir -p "$work"
tar xzf $results/s29-seed33-fp32-runs.tgz -C "$work"
colloc-kit reference export "$work"/runs/seed-33 --name h200-141gb \
  --fact "Commands=bash benchmarks/seed/lent/swap_call.sh 540, 545, 475 (session 28, one machine) and 555 (session \
29, another), each = colloc-kit run seed-33 --amp off --gpus all --warm-repeats --feed-swaps --until-ci 0.01 \
--min-seconds 5 --data-root /tmp/seed-data --out /tmp/runs, resuming the folder of the call before, on \
nvidia-h200-x2 machines (two NVIDIA H200, 32 cores)" \
  --fact "Commands=stand-in data: colloc-kit data make cifar10 --images 50000, imagenet64 --images 100000, imagenet \
--images 20000 (random pixels in the real formats; every job's dataset_label says so)" \
  --fact "Commands=this set: bash benchmarks/seed/seed_h200_reference.sh WORK (it unpacks \
$results/s29-seed33-fp32-runs.tgz into WORK)" \
  --fact "Notes=experiment 33 in fp32, as the study ran its jobs (unpinned), with its three lone baselines (as \
configured, host-matched, GPU-only); 3 repeats of every cell that fits, configured lone runs repeated up to 6 times \
while short of their precision target; windows end once the rate is known to +-1 % (at least 5 s, at most 10 s)" \
  --fact "Notes=warm repeats: a cell's repeats on one launch of its jobs; feed swaps: a GPU-only twin measured on its \
cell's launch, its loader swapped for the synthetic feed (each run's manifest says which)" \
  --fact "Notes=not run: ResNet-152 x7 (naive, MPS, 1g partitions), predicted not to fit an H200's memory by the \
lone runs' steady footprints (not_run table)" \
  --fact "Notes=runs cut short when a call ended are kept, marked interrupted; their cells ran again in the next call"
python -m papermill notebooks/08_seed_reproduction.ipynb /tmp/08_seed_reproduction.out.ipynb -p DATA h200-141gb \
  -p FINDINGS_FILE "$PWD/docs/findings.md" -p FINDINGS_IMAGES "$PWD/docs/img/findings" --log-level WARNING
