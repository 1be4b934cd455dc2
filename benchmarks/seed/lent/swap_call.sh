#!/usr/bin/env bash
# Issue 50, one call on a two-GPU machine, from the checkout:
#   bash benchmarks/seed/lent/swap_call.sh RUN_S [runs.tgz]
# `colloc-kit run seed-33 --amp off --gpus all --warm-repeats --feed-swaps` with windows that end on precision
# (seed_run.sh), resuming /tmp/runs on a warm machine, else the folder packed in runs.tgz (a tracked archive such as
# benchmarks/results/h200/issue50/s32-seed33-fp32-runs.tar.xz, or a carried .carry/runs.tgz), until RUN_S seconds after
# this call's start. Once the experiment is complete (its plan: 0 cells left), the swap A/B's other arm for what is
# left of RUN_S: the same command without --feed-swaps on a copy of the folder (/tmp/fresh, or a carried
# .carry/fresh-runs.tgz), where only the GPU-only twins launched afresh are left to run (the study cells and lone
# baselines are complete there), packed as fresh-runs.tgz. Carry .whl: the wheels of setproctitle (the zygote's),
# lazy_loader and cloudpickle. MIN_S: a window's least seconds (default 5); FRESH_ARM=0: no fresh arm, the call ends
# once the experiment is complete; AMP: off (default) or bf16, as seed_run.sh takes it.
set -uo pipefail
run_s=${1:-540}; archive=${2:-.carry/runs.tgz}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
t0=$(date +%s)
# the carried wheels (.whl) of the packages this machine lacks, each named by its wheel's name up to its first '-'
lacking=$(python3 -c 'import importlib.util as u, pathlib as p
print(*(w for w in p.Path(".whl").glob("*.whl") if not u.find_spec(w.name.split("-")[0])))')
if [ -n "$lacking" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $lacking
  echo "installed from .whl: $lacking"; export PYTHONPATH=$PWD:/tmp/site
fi
python3 -c 'import platform, torch, timm, setproctitle, colloc_kit.cli.main; print("python", platform.python_version(),
  "torch", torch.__version__, "timm", timm.__version__, "cores", __import__("os").cpu_count())' || exit 1
python3 benchmarks/quit_left_mps.py
carried=""; [ ! -d /tmp/runs ] && [ -f "$archive" ] && carried=$archive
SEED_FLAGS="--warm-repeats --feed-swaps" bash benchmarks/seed/lent/seed_run.sh $(( run_s - ($(date +%s) - t0) )) $carried
python3 benchmarks/quit_left_mps.py
left=$(( run_s - ($(date +%s) - t0) ))
# the fresh arm only once the experiment is complete: seed_run.sh's plan of what is left says 0 cells
if [ "${FRESH_ARM:-1}" = 1 ] && [ $left -gt 60 ] && grep -q ": 0 cells (" $OUT/plan-after.txt; then
  F=/tmp/fresh
  if [ ! -d $F ]; then
    mkdir -p $F
    if [ -f .carry/fresh-runs.tgz ]; then tar xzf .carry/fresh-runs.tgz -C $F; else cp -a /tmp/runs/. $F/; fi
  fi
  t1=$(date +%s)
  timeout -s INT -k 60 $left python3 -m colloc_kit.cli run seed-33 --amp ${AMP:-off} --gpus all --warm-repeats \
    --until-ci 0.01 --min-seconds ${MIN_S:-5} --data-root /tmp/seed-data --out $F --quiet > $OUT/fresh.log 2>&1
  echo "fresh twins: rc $? in $(( $(date +%s) - t1 )) s"; tail -3 $OUT/fresh.log
  tar czf $OUT/fresh-runs.tgz -C $F .
  python3 benchmarks/quit_left_mps.py
fi
echo "call: $(( $(date +%s) - t0 )) s"
