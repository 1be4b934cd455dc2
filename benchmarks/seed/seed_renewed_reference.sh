#!/usr/bin/env bash
# Export the reference set renewed with the study's placement, h100-80gb-renewed: experiments 33, 35 and 36 as the
# seed specs now run them (unpinned), beside experiments 34 and 37 of h100-80gb (pinned, not renewed); and draw
# docs/findings-h100.md (and its figures, docs/img/findings-h100/: Playwright and Debian's Chromium) from it.
#   bash benchmarks/seed/seed_renewed_reference.sh /tmp/renewed
# The runs came from `bash benchmarks/seed/seed_h100.sh start|wait|stop` on nvidia-h100-x1 machines (sessions 9 to 12).
set -euo pipefail
work=$1
results=benchmarks/results/h100
mkdir -p "$work/unpinned" "$work/pinned"
tar xJf $results/seed-unpinned/seed-unpinned-runs.tar.xz -C "$work/unpinned"
tar xzf $results/seed/seed-runs.tgz -C "$work/pinned"
colloc-kit reference export "$work"/unpinned/runs/seed-3{3,5,6} "$work"/pinned/runs/seed-3{4,7} --name h100-80gb-renewed \
  --fact "Commands=bash benchmarks/seed/seed_h100.sh start /tmp/seed-data /tmp/runs \"seed-33 --amp off\" \"seed-33 --amp \
bf16\" (sessions 9 to 11), then \"seed-35 --repeats 1\" \"seed-36 --repeats 1\" (sessions 11 and 12), with wait and \
stop calls, on nvidia-h100-x1 machines, each resuming the previous folder" \
  --fact "Commands=stand-in data: colloc-kit data make cifar10 --images 50000, imagenet64 --images 100000, imagenet \
--images 20000 (random pixels in the real formats; every job's dataset_label says so)" \
  --fact "Commands=this set: bash benchmarks/seed/seed_renewed_reference.sh WORK (it unpacks \
$results/seed-unpinned/seed-unpinned-runs.tar.xz and $results/seed/seed-runs.tgz into WORK)" \
  --fact "Notes=placement: experiments 33, 35 and 36 ran unpinned, as the study ran its jobs (no core affinity; \
loader workers where the OS puts them); experiments 34 and 37 are the pinned runs of h100-80gb, not renewed. The runs \
table's placement column says which, per run" \
  --fact "Notes=experiment 33: 3 repeats of every cell that fits, fp32 and bf16, 10-s windows; experiments 35 and 36: \
one repeat per cell (CIs of one run are within-run, 1 s intervals)" \
  --fact "Notes=the first 61 runs of experiment 33 (session 9) ran before the fix to the common window; their events \
are whole, so their figures are computed with the fixed window" \
  --fact "Notes=runs cut short when a machine's hold ended are kept, marked interrupted; their cells ran again on \
the next machine"
python -m papermill notebooks/08_seed_reproduction.ipynb /tmp/08_seed_reproduction.out.ipynb -p DATA h100-80gb-renewed \
  -p FINDINGS_FILE "$PWD/docs/findings-h100.md" -p FINDINGS_IMAGES "$PWD/docs/img/findings-h100" --log-level WARNING
