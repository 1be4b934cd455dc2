#!/usr/bin/env bash
# Issues 50 and 52: one uninterrupted `colloc-kit run seed-33` (or EXPERIMENT) through several calls on a two-GPU
# machine, timed by the kit (out/EXPERIMENT/commands.json). A call's processes end when it returns, but one in a
# process session of its own runs on while the machine is held (the device's README), so the first call starts the kit
# with setsid and every call watches it until WATCH_S seconds after the call's start or its end, then packs the folder
# under $OUT (runs.tgz); the next call, made within the machine's 30 s of warmth, finds the kit still running. Once it
# has ended: its closing lines, the plan of what is left, the per-cell phases and commands.json. Lost between calls (a
# machine given back), the last runs.tgz, carried as RESUME, resumes the experiment with the same command.
#   bash benchmarks/seed/lent/through_calls.sh WATCH_S          (run from the checkout, in every call)
# Carry .whl: the wheels of setproctitle (the zygote's), lazy_loader and cloudpickle. MIN_S: a window's least seconds
# (default 3); AMP: off (default) or bf16; EXPERIMENT: seed-33 (default), seed-37 or a seed spec's file, with FOLDER
# its experiment's folder (default EXPERIMENT; a file's: seed-NN); RESUME: a runs.tgz packed by an
# earlier call (on a machine given back since; or its .tar.xz), unpacked before the first call starts the kit, which
# resumes it; STOP=1: once WATCH_S has passed, the kit stopped (SIGTERM, as Ctrl-C would), for a session's last call.
set -uo pipefail
watch_s=${1:-560}
t0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
D=/tmp/seed-data; R=/tmp/runs; K=/tmp/through  # the data, the run folder, the kit's log and exit code
experiment=${EXPERIMENT:-seed-33}
folder=${FOLDER:-$experiment}
flags=($experiment --amp ${AMP:-off} --gpus all --warm-repeats --feed-swaps --until-ci 0.01 --min-seconds ${MIN_S:-3}
       --data-root $D --out $R)
# the carried wheels (.whl) of the packages this machine lacks, each named by its wheel's name up to its first '-'
lacking=$(python3 -c 'import importlib.util as u, pathlib as p
print(*(w for w in p.Path(".whl").glob("*.whl") if not u.find_spec(w.name.split("-")[0])))')
if [ -n "$lacking" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $lacking
  echo "installed from .whl: $lacking"
fi
[ -d /tmp/site ] && export PYTHONPATH=$PWD:/tmp/site
if [ ! -d $K ]; then  # the first call: data, plan, and the kit started in a session of its own
  python3 -c 'import platform, torch, timm, setproctitle, colloc_kit.cli.main; print("python",
    platform.python_version(), "torch", torch.__version__, "timm", timm.__version__, "cores", __import__("os").cpu_count())' \
    || exit 1
  python3 benchmarks/quit_left_mps.py
  nvidia-smi --query-gpu=index,name,memory.total --format=csv > $OUT/gpus.csv
  for d in cifar10:50000 imagenet64:100000 imagenet:20000; do
    python3 -m colloc_kit.cli data make "${d%%:*}" --root $D --images "${d##*:}" --quiet > /dev/null
  done
  echo "data: $(( $(date +%s) - t0 )) s"
  if [ -n "${RESUME:-}" ]; then tar xf "$RESUME" -C /tmp && echo "resuming $(ls $R/$folder | wc -l) entries"; fi
  python3 -m colloc_kit.cli run "${flags[@]}" --plan --budget-min 20 > $OUT/plan.txt 2>&1
  tail -3 $OUT/plan.txt
  mkdir -p $K
  setsid bash -c "python3 -m colloc_kit.cli run ${flags[*]} --quiet > $K/run.log 2>&1; echo \$? > $K/rc" \
    < /dev/null > /dev/null 2>&1 &
  echo "kit started at $(date +%s)"
fi
while [ ! -f $K/rc ] && [ $(( $(date +%s) - t0 )) -lt "$watch_s" ]; do sleep 2; done
# the session's last call: the kit stopped by SIGTERM and its close awaited (cells in flight marked, MPS
# daemons quit, the command's time kept), so that RESUME picks up a clean folder
if [ ! -f $K/rc ] && [ -n "${STOP:-}" ]; then
  pkill -TERM -f "^python3 -m colloc_kit.cli run $experiment"  # SIGINT: ignored, as in any job started with &
  for _ in $(seq 60); do [ -f $K/rc ] && break; sleep 1; done
fi
tar czf $OUT/runs.tgz -C /tmp runs 2> /dev/null  # a folder still written to: a file may change while packed
cp $K/run.log $OUT/run.log
if [ -f $K/rc ]; then
  echo "kit ended: rc $(cat $K/rc)"; grep "^colloc-kit: $folder" $K/run.log
  cp $R/$folder/commands.json $OUT/commands.json; cat $OUT/commands.json
  python3 benchmarks/quit_left_mps.py
  python3 -m colloc_kit.cli run "${flags[@]}" --plan --budget-min 20 2>&1 | tail -3 > $OUT/plan-after.txt
  cat $OUT/plan-after.txt
  python3 benchmarks/scaling/cell_phases.py $R/$folder > $OUT/phases.md 2>&1
  cat $OUT/phases.md
else
  echo "kit running: $(ls $R/$folder | wc -l) entries in its folder"
fi
echo "call: $(( $(date +%s) - t0 )) s"
