#!/usr/bin/env bash
# one device call: variant A (the worker as on main: os._exit with GPU work queued), then B (settle_gpu before exit)
set -uo pipefail
A_S=${1:-240}; B_S=${2:-240}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=$PWD:/tmp/site
python3 -c 'import platform, torch, timm; print("python", platform.python_version(), "torch", torch.__version__, "timm", timm.__version__)'
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee $OUT/gpus.csv
python3 benchmarks/quit_left_mps.py
if [ "$A_S" != 0 ]; then python3 .mpsrepro/repro.py A "$A_S" $OUT 2>&1 | tee $OUT/console-A.txt; fi
python3 benchmarks/quit_left_mps.py
cp .mpsrepro/train_fixed.py colloc_kit/worker/train.py
if [ "$B_S" != 0 ]; then python3 .mpsrepro/repro.py B "$B_S" $OUT 2>&1 | tee $OUT/console-B.txt; fi
git checkout colloc_kit/worker/train.py 2>/dev/null
python3 benchmarks/quit_left_mps.py
