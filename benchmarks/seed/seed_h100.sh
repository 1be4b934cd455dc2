#!/usr/bin/env bash
# The seed study on a lent GPU, across several device calls: stand-in data, then the experiments in a background
# runner (its own session, so it outlives one call), polled, stopped cleanly. Resumable: run `start` again into the
# same RUNS folder and only missing or failed cells run.
#   bash benchmarks/seed/seed_h100.sh start DATA RUNS "seed-33 --amp off" "seed-37 --repeats 1" ...   # data, then the runner
#   bash benchmarks/seed/seed_h100.sh wait RUNS SECONDS       # progress every minute for SECONDS or until the runner ends
#   bash benchmarks/seed/seed_h100.sh stop RUNS               # interrupt the runner (SIGTERM; its MPS daemons quit), wait
# Each experiment runs `colloc-kit run <args> --data-root DATA --out RUNS --quiet` from a private copy
# of the kit (/tmp/kit), so later calls that change the working tree do not change the running code.
set -u
what=$1
case $what in
start)
  data=$2 runs=$3; shift 3
  # two runners would share the GPU and /tmp/kit (last session's 8 failed cells)
  if [ -e "$runs.pid" ] && kill -0 "$(cat "$runs.pid")" 2>/dev/null; then
    echo "a runner ($(cat "$runs.pid")) still runs into $runs: stop it first (bash $0 stop $runs)" >&2
    exit 2
  fi
  rm -rf /tmp/kit && cp -r "$PWD" /tmp/kit && export PYTHONPATH=/tmp/kit${PYTHONPATH:+:$PYTHONPATH}  # + e.g. wheels
  for d in ${SEED_IMAGES:-cifar10:50000 imagenet64:100000 imagenet:20000}; do  # dataset:images
    set -- ${d%%:*} ${d##*:} "$@"
    start=$(date +%s)
    python3 -m colloc_kit.cli data make "$1" --root "$data" --images "$2" --quiet
    echo "stand-in $1: $2 images in $(( $(date +%s) - start )) s"
    shift 2
  done
  mkdir -p "$runs"
  rm -f "$runs.stop"
  runner="cd /tmp/kit; for e in $(printf '%q ' "$@"); do [ -e $runs.stop ] && break; start=\$(date +%s);
    python3 -m colloc_kit.cli run \$e --data-root $data --out $runs --quiet;
    echo \"== \$e: exit \$? after \$(( \$(date +%s) - start )) s\"; done"
  setsid nohup bash -c "$runner" > "$runs.log" 2>&1 < /dev/null &
  echo $! > "$runs.pid"
  echo "runner $(cat "$runs.pid") started: $*"
  ;;
wait)
  runs=$2 until=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -lt "$until" ] && kill -0 "$(cat "$runs.pid")" 2>/dev/null; do
    sleep 60
    for exp in "$runs"/*/; do echo "$(date +%T) $(basename "$exp"): $(PYTHONPATH=/tmp/kit python3 -m colloc_kit.cli \
      status "$exp" 2>/dev/null | tail -1)"; done
  done
  tail -5 "$runs.log"
  ;;
stop)
  runs=$2
  touch "$runs.stop"
  kill -TERM -- -"$(cat "$runs.pid")" 2>/dev/null  # the kit takes SIGTERM as an interrupt; a job started with &
                                                   # by a non-interactive shell ignores SIGINT
  for _ in $(seq 120); do pgrep -s "$(cat "$runs.pid")" > /dev/null || break; sleep 1; done  # the kit too, not bash
  tail -5 "$runs.log"
  echo "MPS processes left: $(pgrep -a nvidia-cuda-mps || echo none)"
  ;;
esac
