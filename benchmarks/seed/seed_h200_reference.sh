#!/usr/bin/env bash
# Export experiment 33 in fp32 (issue 50, session 32) and in bf16 (issue 52, sessions 35 and 37), each with its three
# baselines, run on two H200s, and experiment 37 in fp32 with its mixes' baselines (issue 52, sessions 36 to 38, on
# one H200), as the shipped reference set h200-141gb; and draw docs/findings.md (its figures in docs/img/findings/:
# Playwright and Debian's Chromium) from it.
#   bash benchmarks/seed/seed_h200_reference.sh /tmp/h200-ref
set -euo pipefail
work=$1
results=benchmarks/results/h200/issue50
bf16=benchmarks/results/h200/issue52/s37-seed33-bf16-runs.tar.xz
mixes=benchmarks/results/h200/issue52/s38-seed37-fp32-runs.tar.xz
mkdir -p "$work/fp32" "$work/bf16" "$work/mixes"
tar xJf $results/s32-seed33-fp32-runs.tar.xz -C "$work/fp32"
tar xJf $bf16 -C "$work/bf16"
tar xJf $mixes -C "$work/mixes"
colloc-kit reference export "$work"/fp32/runs/seed-33 "$work"/bf16/runs/seed-33 "$work"/mixes/runs/seed-37 \
  --name h200-141gb \
  --fact "Commands=bash benchmarks/seed/lent/through_calls.sh 570 (session 32, two calls on one nvidia-h200-x2 \
machine: two NVIDIA H200, 32 cores) = colloc-kit run seed-33 --amp off --gpus all --warm-repeats --feed-swaps \
--until-ci 0.01 --min-seconds 3 --data-root /tmp/seed-data --out /tmp/runs, one command through both calls, 1,055 s \
by the kit's clock (commands.json)" \
  --fact "Commands=then the same command on that folder on another such machine (MIN_S=3 FRESH_ARM=0 bash \
benchmarks/seed/lent/swap_call.sh 420 runs.tgz), with the collocated cells' precision repeats: 3 runs, 58 s" \
  --fact "Commands=bf16: AMP=bf16 bash benchmarks/seed/lent/through_calls.sh 560 (session 35, three calls on one \
nvidia-h200-x2 machine) = colloc-kit run seed-33 --amp bf16 --gpus all and the same flags, one command through the \
three calls, precision repeats included: 300 runs, 1,295 s by the kit's clock (commands.json)" \
  --fact "Commands=bf16, session 37: that folder resumed on another such machine with a tighter spec for its three \
ResNet-26 pairs short of their GPU's part's target (RESUME=... AMP=bf16 FOLDER=seed-33 \
EXPERIMENT=benchmarks/seed/lent/seed33-bf16-tighter.yaml STOP=1 bash benchmarks/seed/lent/through_calls.sh 430): \
28 runs, 219 s by the kit's clock" \
  --fact "Commands=experiment 37: EXPERIMENT=seed-37 bash benchmarks/seed/lent/through_calls.sh 555 (session 36, \
three calls on one nvidia-h200 machine: one NVIDIA H200, 16 cores, the last with STOP=1), resumed in session 37 \
(RESUME=its folder, two calls and a third to its end on another such machine) = colloc-kit run seed-37 --amp off \
--gpus all and the same flags: 331 complete cells, 1,616 s then 1,087 s by the kit's clock (commands.json)" \
  --fact "Commands=experiment 37, session 38: that folder resumed on another such machine with a tighter spec for \
ResNet-152 bs32's lone baselines (RESUME=... FOLDER=seed-37 EXPERIMENT=benchmarks/seed/lent/seed37-tighter.yaml \
bash benchmarks/seed/lent/through_calls.sh 555, three calls, the last with STOP=1): 108 cells, 1,283 s; then again on \
another such machine once a mix's precision rule held each workload to it (one call, STOP=1 after 310 s): 22 cells, \
257 s by the kit's clock (commands.json)" \
  --fact "Commands=stand-in data: colloc-kit data make cifar10 --images 50000, imagenet64 --images 100000, imagenet \
--images 20000 (random pixels in the real formats; every job's dataset_label says so)" \
  --fact "Commands=this set: bash benchmarks/seed/seed_h200_reference.sh WORK (it unpacks \
$results/s32-seed33-fp32-runs.tar.xz, $bf16 and $mixes into WORK)" \
  --fact "Notes=experiment 33 in fp32, as the study ran its jobs (unpinned), and in bf16 (the same jobs, --amp bf16), \
each with its three lone baselines (as configured, host-matched, GPU-only); 3 repeats of every cell that fits, a \
lone baseline repeated up to 16 times and a \
collocated cell up to 8 while short of its precision target (configured +-9 %, host-matched and GPU-only +-5 %, a \
cell +-4 %; in bf16, since session 37, host-matched +-3 % with up to 24 runs and a cell up to 20 repeats; in \
experiment 37, since session 38, configured +-6 % and host-matched +-3 % with up to 48 runs, a cell up to 20 repeats, \
a mix's cell +-4 % in each workload's rate); windows end once the rate is known to +-1 % (at least 3 s, at most 10 s)" \
  --fact "Notes=warm repeats: a cell's repeats on one launch of its jobs; feed swaps: a GPU-only twin measured on its \
cell's launch, its loader swapped for the synthetic feed (each run's manifest says which)" \
  --fact "Notes=experiment 37: the study's mixes of ResNet-26, ResNet-50 and ResNet-152 (naive, MPS, MPS \
partitions), unpinned; a mix's lone baselines are one cell per distinct job (configured, host-matched to the mix's \
loader workers, GPU-only), shared by every mix with that job and workers; on one H200 of 16 cores, so its \
host-matched baselines are not experiment 33's (32 cores)" \
  --fact "Notes=not run: ResNet-152 x7 in fp32 (naive, MPS, 1g partitions), predicted not to fit an H200's memory \
by the lone runs' steady footprints (not_run table); in bf16 every cell ran"
python -m papermill notebooks/08_seed_reproduction.ipynb /tmp/08_seed_reproduction.out.ipynb -p DATA h200-141gb \
  -p FINDINGS_FILE "$PWD/docs/findings.md" -p FINDINGS_IMAGES "$PWD/docs/img/findings" --log-level WARNING
