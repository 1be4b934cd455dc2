#!/usr/bin/env bash
# Issue 50's feed-swap A/B on a lent GPU machine (one GPU or more), from the checkout:
#   bash benchmarks/seed/lent/feed_ab.sh RUN_S        # carry .carry/feed-ab-runs.tgz from an earlier call to resume
# Passes interleaved, each into a folder of its own under /tmp/feed-ab: 1-warm, 2-swap, 3-warm, 4-swap (a warm pass's
# twins launched afresh; a swap pass's on their cell's launch, --feed-swaps), each pass `feed_ab.yaml` as exclusive x1
# and as MPS x3 with their GPU-only twins; a pass whose cells are complete is read, not run again. The folder is
# packed under $OUT after every pass, the comparison (feed_ab.py) written at the end; stopped by SIGINT at RUN_S
# seconds from this script's start.
set -uo pipefail
run_s=${1:-540}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
D=/tmp/seed-data; R=/tmp/feed-ab
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > $OUT/gpus.csv; nproc >> $OUT/gpus.csv
python3 benchmarks/quit_left_mps.py  # an MPS daemon an earlier call left at its limit
[ ! -d $R ] && [ -f .carry/feed-ab-runs.tgz ] && mkdir -p $R && tar xzf .carry/feed-ab-runs.tgz -C $R
python3 -m colloc_kit.cli data make cifar10 --root $D --images 50000 --quiet > /dev/null
sed "s#DATA#$D#" benchmarks/seed/lent/feed_ab.yaml > /tmp/feed-ab.yaml
echo "ready: $(( $(date +%s) - t0 )) s"
for pass in 1-warm 2-swap 3-warm 4-swap; do
  for cell in "exclusive 1" "mps 3"; do
    set -- $cell
    extra=(); [[ $pass == *swap ]] && extra+=(--feed-swaps)
    left=$(( run_s - ($(date +%s) - t0) )); [ $left -le 10 ] && break 2
    t=$(date +%s)
    timeout -s INT -k 30 $left python3 -m colloc_kit.cli run /tmp/feed-ab.yaml --mode $1 --copies $2 \
      --name feed-ab-$1-x$2 --gpus all --out $R/$pass --quiet "${extra[@]}" > $OUT/$pass-$1-x$2.log 2>&1
    echo "$pass $1 x$2: rc $? in $(( $(date +%s) - t )) s"
  done
  tar czf $OUT/feed-ab-runs.tgz -C $R .
done
python3 benchmarks/seed/lent/feed_ab.py $R > $OUT/feed-ab.md 2>&1; cat $OUT/feed-ab.md
echo "total $(( $(date +%s) - t0 )) s"
