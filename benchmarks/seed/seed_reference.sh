#!/usr/bin/env bash
# Export the seed study's H100 runs as the shipped reference set h100-80gb, and draw docs/findings.md (and its
# figures, docs/img/findings/: Playwright and Debian's Chromium) from it.
#   mkdir -p /tmp/seed && tar xzf benchmarks/results/h100/seed/seed-runs.tgz -C /tmp/seed
#   bash benchmarks/seed/seed_reference.sh /tmp/seed/runs
# The runs came from `bash benchmarks/seed/seed_h100.sh start|wait|stop` on nvidia-h100-x1 machines over three sessions.
set -euo pipefail
runs=$1
experiments=()
for e in seed-33 seed-34 seed-35 seed-36 seed-37; do [ -d "$runs/$e" ] && experiments+=("$runs/$e"); done
colloc-kit reference export "${experiments[@]}" --name h100-80gb \
  --fact "Commands=bash benchmarks/seed/seed_h100.sh start /tmp/seed-data /tmp/runs \"seed-33 --amp off\" \"seed-37 --amp off\" \
\"seed-35 --amp off\" (session 5), then \"seed-33 --amp bf16\" \"seed-34 --amp off\" \"seed-36 --amp off\" \"seed-35 --amp off\" \
(session 6), with wait and stop calls, on seven nvidia-h100-x1 machines over three sessions, each resuming the previous \
folder: each cell is colloc-kit run seed-NN --amp off|bf16 --repeats 1 --data-root /tmp/seed-data --out /tmp/runs" \
  --fact "Commands=stand-in data: colloc-kit data make cifar10 --images 50000, imagenet64 --images 100000, imagenet \
--images 20000 (random pixels in the real formats; every job's dataset_label says so)" \
  --fact "Commands=this set: bash benchmarks/seed/seed_reference.sh RUNS, RUNS unpacked from \
benchmarks/results/h100/seed/seed-runs.tgz" \
  --fact "Notes=8 runs (ResNet-50, 20261122-2312xx) failed at once: the runner stopped in the call before still held \
its MPS daemon when the next runner started (its workers exited with code 2, 'oneMKL FATAL ERROR: Cannot load \
libtorch_cpu.so'); their cells ran again on the next machine, complete. They are kept, marked failed." \
  --fact "Notes=the collocated fp32 seed-33 cells of ResNet-50 ran twice, complete, on two machines (2026-11-22 \
23:14-23:20 and 2026-11-23 01:04-01:11 UTC): both runs are kept, as two repeats" \
  --fact "Notes=runs cut short when the runner was stopped at the end of a machine are kept, marked interrupted; their \
cells ran again on the next machine where there was one" \
  --fact "Notes=one repeat per cell (two for those ResNet-50 cells): CIs of one run are within-run (1 s intervals)" \
  --fact "Notes=the not-run lists of seed-35 and seed-36 were written before not-run names gave the data; their entries \
were all written while the CIFAR-10 cells ran, and now name it ('... off on cifar10 ...')" \
  --fact "Notes=each job is pinned to at most 4 cores (launcher.GPU_JOB_CORES); the study ran its jobs unpinned. bash \
pinning_seed.sh (since removed from benchmarks, in the history) /tmp/seed-data /tmp/pin (one repeat each): a lone ResNet-26 trained 1,392 img/s pinned and \
1,533 unpinned; 3 and 7 copies under MPS within 2 % of each other (benchmarks/results/h100/seed/pinning.txt)" \
  --fact "Left out=experiment 35 past its first cells (CaiT on CIFAR-10: the lone cells and naive x2), experiment 36 \
past EfficientNetV2-S on CIFAR-10 and the lone cells on ImageNet-64, and both on ImageNet: device time ran out; cells \
not run for memory are listed below with the reason"
python -m papermill notebooks/08_seed_reproduction.ipynb /tmp/08_seed_reproduction.out.ipynb \
  -p FINDINGS_FILE "$PWD/docs/findings.md" -p FINDINGS_IMAGES "$PWD/docs/img/findings" --log-level WARNING
