#!/usr/bin/env bash
# Issue 50, device calls 2 and 3 (two GPUs): `colloc-kit run seed-33 --amp off --gpus all` with windows that end on
# precision, its plan and budget said first, run until RUN_S seconds after this script's start (stopped by SIGINT,
# resumable), resuming the run folder of an earlier call where one is carried; then the folder packed under $OUT at
# once, the plan of what is left and the per-cell phases after it.
#   bash benchmarks/seed/lent/seed_run.sh RUN_S [carried runs.tgz]      (run from the checkout)
# SEED_FLAGS: more flags for the run (warm_run.sh gives --warm-repeats); MIN_S: a window's least seconds (default 5);
# AMP: the precision, off (the study's fp32, default) or bf16 (issue 52)
set -uo pipefail
run_s=${1:-480}; carried=${2:-}
export PYTHONUNBUFFERED=1
D=/tmp/seed-data; R=/tmp/runs
flags=(seed-33 --amp ${AMP:-off} --gpus all ${SEED_FLAGS:-} --until-ci 0.01 --min-seconds ${MIN_S:-5} --data-root $D --out $R)
nvidia-smi --query-gpu=index,name,memory.total --format=csv > $OUT/gpus.csv
t0=$(date +%s)
for d in cifar10:50000 imagenet64:100000 imagenet:20000; do
  python3 -m colloc_kit.cli data make "${d%%:*}" --root $D --images "${d##*:}" --quiet > /dev/null
done
echo "data: $(( $(date +%s) - t0 )) s"
[ -n "$carried" ] && mkdir -p /tmp && tar xf "$carried" -C /tmp && echo "resuming $(ls $R/seed-33 | wc -l) entries"
python3 -m colloc_kit.cli run "${flags[@]}" --plan --budget-min 20 > $OUT/plan.txt 2>&1
tail -3 $OUT/plan.txt
t1=$(date +%s)
# RUN_S counts from this script's start: the data and the plan came out of it
timeout -s INT -k 60 "$(( run_s - (t1 - t0) ))" python3 -m colloc_kit.cli run "${flags[@]}" --quiet > $OUT/run.log 2>&1
echo "run: rc $? in $(( $(date +%s) - t1 )) s (from $t1 to $(date +%s))"
tar czf $OUT/runs.tgz -C /tmp runs  # packed first: what follows may meet the call's limit
tail -5 $OUT/run.log
python3 -m colloc_kit.cli run "${flags[@]}" --plan --budget-min 20 2>&1 | tail -3 > $OUT/plan-after.txt
cat $OUT/plan-after.txt
python3 benchmarks/scaling/cell_phases.py $R/seed-33 > $OUT/phases.md 2>&1
cat $OUT/phases.md
echo "total $(( $(date +%s) - t0 )) s"
