#!/usr/bin/env bash
# call 2: as a seed launch (zygote, disk data with 4 loader workers, warm repeat with a feed swap to synthetic, then
# close): variant A (main's worker), then B (settle_gpu before os._exit)
set -uo pipefail
A_S=${1:-280}; B_S=${2:-200}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD SWAP=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=$PWD:/tmp/site
python3 benchmarks/quit_left_mps.py
t0=$(date +%s); python3 -m colloc_kit.cli data make cifar10 --root /tmp/seed-data --images 5000 --quiet > /dev/null; echo "data: $(( $(date +%s) - t0 )) s"
if [ "$A_S" != 0 ]; then python3 .mpsrepro/repro.py A2 "$A_S" $OUT 2>&1 | tee $OUT/console-A2.txt | grep -o '"cycle": [0-9]*\|"first_exit": [^]]*\]\|"fatal": [^]]*\]\|"statuses": [^]]*\]\|"cycle_s": [0-9.]*\|SUMMARY.*' | paste -sd' ' | sed 's/"cycle": /\n/g'; fi
python3 benchmarks/quit_left_mps.py
cp .mpsrepro/train_fixed.py colloc_kit/worker/train.py
if [ "$B_S" != 0 ]; then python3 .mpsrepro/repro.py B2 "$B_S" $OUT 2>&1 | tee $OUT/console-B2.txt | grep -o '"cycle": [0-9]*\|"fatal": [^]]*\]\|"settle_ms": [^}]*}\|"cycle_s": [0-9.]*\|SUMMARY.*' | paste -sd' ' | sed 's/"cycle": /\n/g'; fi
git checkout colloc_kit/worker/train.py 2>/dev/null
python3 benchmarks/quit_left_mps.py
