#!/usr/bin/env bash
# Issue 50 with warm repeats, on a two-GPU machine. From the checkout:
#   bash benchmarks/issue50/warm_run.sh RUN_S [carried runs.tgz] [ab]
# Makes the stand-in data; with `ab`, first the interleaved A/B of benchmarks/issue50/ab.yaml (cold, warm, cold,
# warm: passes of three repeats each, the later passes as new repeats); then `colloc-kit run seed-33 --amp off --gpus
# all --warm-repeats` with windows that end on precision, its plan first, for at most RUN_S seconds (SIGINT; the
# folder resumes in a later call where it is carried); then the per-cell phases, everything packed under $OUT.
set -uo pipefail
run_s=${1:-480}; carried=${2:-}; ab=${3:-}
export PYTHONUNBUFFERED=1
D=/tmp/seed-data; R=/tmp/runs
flags=(seed-33 --amp off --gpus all --warm-repeats --until-ci 0.01 --min-seconds 5 --data-root $D --out $R)
nvidia-smi --query-gpu=index,name,memory.total --format=csv > $OUT/gpus.csv
t0=$(date +%s)
# an MPS daemon a call killed at its limit left behind (it runs in a session of its own): quit it first
for pid in $(pgrep -f nvidia-cuda-mps-control); do
  pipe=$(tr '\0' '\n' < /proc/$pid/environ | sed -n 's/^CUDA_MPS_PIPE_DIRECTORY=//p')
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipe timeout 20 nvidia-cuda-mps-control && echo "quit a left MPS daemon ($pipe)"
done
sleep 1; pkill -f nvidia-cuda-mps; pkill -f colloc_kit
[ -d $D/imagenet ] || for d in cifar10:50000 imagenet64:100000 imagenet:20000; do
  python3 -m colloc_kit.cli data make "${d%%:*}" --root $D --images "${d##*:}" --quiet > /dev/null
done
echo "data: $(( $(date +%s) - t0 )) s"
[ -d $R/warm-ab ] && tar czf $OUT/ab-runs.tgz -C /tmp runs/warm-ab
[ -n "$carried" ] && tar xzf "$carried" -C /tmp && echo "resuming $(ls $R/seed-33 | wc -l) entries"
if [ "$ab" = ab ]; then
  sed "s#DATA#$D#" benchmarks/issue50/ab.yaml > /tmp/ab.yaml
  ta=$(date +%s)
  for pass in cold warm cold-again warm-again; do
    extra=(); [[ $pass == warm* ]] && extra+=(--warm-repeats)
    # the later passes: three more repeats each (a folder's complete cells are reused, so --repeats 6 adds r3-r5)
    [[ $pass == *again ]] && extra+=(--repeats 6)
    t=$(date +%s)
    python3 -m colloc_kit.cli run /tmp/ab.yaml --gpus all --out $R --quiet "${extra[@]}" > $OUT/ab-$pass.log 2>&1
    echo "ab $pass: rc $? in $(( $(date +%s) - t )) s"
  done
  echo "ab: $(( $(date +%s) - ta )) s"
  python3 benchmarks/cell_phases.py $R/warm-ab > $OUT/ab-phases.md 2>&1; cat $OUT/ab-phases.md
  python3 -m colloc_kit.cli show $R/warm-ab --json > $OUT/ab-jobs.json 2>/dev/null
fi
python3 -m colloc_kit.cli run "${flags[@]}" --plan --budget-min 20 > $OUT/plan.txt 2>&1
tail -3 $OUT/plan.txt
t1=$(date +%s)
left=$(( run_s - (t1 - t0) ))  # RUN_S counts from the call's start
timeout -s INT -k 60 "$left" python3 -m colloc_kit.cli run "${flags[@]}" --quiet > $OUT/run.log 2>&1
echo "run: rc $? in $(( $(date +%s) - t1 )) s (from $t1 to $(date +%s))"
tail -5 $OUT/run.log
python3 -m colloc_kit.cli run "${flags[@]}" --plan --budget-min 20 2>&1 | tail -3 > $OUT/plan-after.txt
cat $OUT/plan-after.txt
python3 benchmarks/cell_phases.py $R/seed-33 > $OUT/phases.md 2>&1
cat $OUT/phases.md
tar czf $OUT/runs.tgz -C /tmp runs
echo "total $(( $(date +%s) - t0 )) s"
