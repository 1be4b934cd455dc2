#!/usr/bin/env bash
# Issue 55, one call on a four-GPU machine. From the checkout:
#   bash benchmarks/seed/lent/x4_call.sh RUN_S [carried runs.tgz] [scaling]
# With `scaling`: first the four-GPU pass of benchmarks/scaling/scaling.py (3-s windows; the one- and two-GPU passes can run
# on any machine with this card, carrying passes.tgz), its tables and pass folder under $OUT at once; then
# benchmarks/seed/lent/warm_run.sh (`colloc-kit run seed-33 --amp off --gpus all --warm-repeats`, windows that end on
# precision, resuming a carried run folder) for what is left of RUN_S seconds, counted from this call's start.
set -uo pipefail
run_s=${1:-530}; carried=${2:-}; scaling=${3:-}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,memory.total --format=csv; nproc
if [ "$scaling" = scaling ]; then
  S=/tmp/scaling; mkdir -p $S
  [ -f .carry/passes.tgz ] && tar xzf .carry/passes.tgz -C $S
  timeout -k 10 220 python3 benchmarks/scaling/scaling.py run --out $S --seconds 3 --passes 4 --budget-s 210 \
    > $OUT/scaling.log 2>&1
  echo "scaling: rc $? in $(( $(date +%s) - t0 )) s"; tail -25 $OUT/scaling.log
  cp $S/*.csv $S/*.md $OUT/ 2>/dev/null; tar czf $OUT/passes.tgz -C $S $(cd $S && echo gpus-*)
fi
bash benchmarks/seed/lent/warm_run.sh $(( run_s - ($(date +%s) - t0) )) $carried
echo "call: $(( $(date +%s) - t0 )) s"
