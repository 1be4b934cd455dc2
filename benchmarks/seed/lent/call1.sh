#!/usr/bin/env bash
# Issue 50, device call 1 (two GPUs): where a cell's lane time goes in a slice of `colloc-kit run seed-33 --amp off
# --gpus all --repeats 1`, and why the lone 4-worker job swings (benchmarks/peer/lone_swing.py, interleaved variants).
#   bash benchmarks/seed/lent/call1.sh SLICE_S ROUNDS      (run from the checkout; results under $OUT)
set -uo pipefail
slice_s=${1:-150}; rounds=${2:-3}
export PYTHONUNBUFFERED=1
D=/tmp/seed-data; R=/tmp/runs
nvidia-smi --query-gpu=index,name,memory.total --format=csv > $OUT/gpus.csv; nproc >> $OUT/gpus.csv
lscpu > $OUT/lscpu.txt
t0=$(date +%s)
for d in cifar10:50000 imagenet64:100000 imagenet:20000; do
  python3 -m colloc_kit.cli data make "${d%%:*}" --root $D --images "${d##*:}" --quiet
done
echo "data: $(( $(date +%s) - t0 )) s"
t1=$(date +%s)
timeout -s INT -k 60 "$slice_s" python3 -m colloc_kit.cli run seed-33 --amp off --gpus all --repeats 1 \
  --data-root $D --out $R --quiet > $OUT/slice.log 2>&1
echo "slice: rc $? in $(( $(date +%s) - t1 )) s (from $t1)"
python3 benchmarks/scaling/cell_phases.py $R/seed-33 > $OUT/phases.md 2>&1
python3 - "$R/seed-33" "$t1" "$(date +%s)" > $OUT/lanes.json <<'PY'
import json, sys
sys.path.insert(0, "benchmarks/scaling")
from pathlib import Path
from cell_phases import cell_phases, lane_phases
exp = Path(sys.argv[1])
print(json.dumps({"lanes": lane_phases([exp], float(sys.argv[2]), float(sys.argv[3])),
                  "cells": cell_phases(exp)}, indent=1, default=str))
PY
tar czf $OUT/slice-runs.tgz -C /tmp runs
timeout -k 20 330 python3 benchmarks/peer/lone_swing.py --job seed --data-root $D/cifar10 --seconds 10 \
  --variants kit,pinned,workers-12,neighbour --repeats "$rounds" --out /tmp/swing > $OUT/swing.log 2>&1
echo "swing: rc $?"
cp /tmp/swing/*.csv $OUT/ 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s"
