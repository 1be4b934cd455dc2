#!/usr/bin/env bash
# Issue 50 with warm repeats, on a two-GPU machine. From the checkout:
#   bash benchmarks/seed/lent/warm_run.sh RUN_S [carried runs.tgz] [ab]
# Quits an MPS daemon a call killed at its limit left behind; with `ab`, first the interleaved A/B of
# benchmarks/seed/lent/ab.yaml (cold, warm, cold, warm: passes of three repeats each, the later passes as new repeats);
# then seed_run.sh with --warm-repeats (`colloc-kit run seed-33 --amp off --gpus all --warm-repeats` with windows that
# end on precision) for what is left of RUN_S seconds, counted from this call's start.
set -uo pipefail
run_s=${1:-480}; carried=${2:-}; ab=${3:-}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
D=/tmp/seed-data; R=/tmp/runs
t0=$(date +%s)
# an MPS daemon a call killed at its limit left behind (it runs in a session of its own): quit it first
python3 benchmarks/quit_left_mps.py  # an MPS daemon an earlier call left at its limit
if [ "$ab" = ab ]; then
  python3 -m colloc_kit.cli data make cifar10 --root $D --images 50000 --quiet > /dev/null
  sed "s#DATA#$D#" benchmarks/seed/lent/ab.yaml > /tmp/ab.yaml
  for pass in cold warm cold-again warm-again; do
    extra=(); [[ $pass == warm* ]] && extra+=(--warm-repeats)
    # the later passes: three more repeats each (a folder's complete cells are reused, so --repeats 6 adds r3-r5)
    [[ $pass == *again ]] && extra+=(--repeats 6)
    t=$(date +%s)
    python3 -m colloc_kit.cli run /tmp/ab.yaml --gpus all --out $R --quiet "${extra[@]}" > $OUT/ab-$pass.log 2>&1
    echo "ab $pass: rc $? in $(( $(date +%s) - t )) s"
  done
  python3 benchmarks/scaling/cell_phases.py $R/warm-ab > $OUT/ab-phases.md 2>&1; cat $OUT/ab-phases.md
  tar czf $OUT/ab-runs.tgz -C /tmp runs/warm-ab
fi
SEED_FLAGS=--warm-repeats bash benchmarks/seed/lent/seed_run.sh $(( run_s - ($(date +%s) - t0) )) $carried
