#!/usr/bin/env bash
# The peer check (benchmarks/peer/peer_train_py.py) on a lent GPU across several device calls: stand-in data, then the
# benchmark in a background runner (its own session, so it outlives one call), polled.
#   bash benchmarks/peer/peer_h100.sh start DATA OUT TIMM [peer_train_py.py run flags]   # data, then the runner; returns
#   bash benchmarks/peer/peer_h100.sh wait OUT SECONDS      # poll for SECONDS or until the runner ends; then the table
#   bash benchmarks/peer/peer_h100.sh stop OUT              # interrupt the runner and its cell (SIGTERM; MPS quits), wait
set -u
case $1 in
start)
  data=$2 out=$3 timm=$4; shift 4
  for d in cifar10:50000 imagenet64:100000; do
    python3 -m colloc_kit.cli data make "${d%%:*}" --root "$data" --images "${d##*:}" --quiet
  done
  mkdir -p "$out"
  setsid nohup python3 benchmarks/peer/peer_train_py.py run --timm "$timm" --data "$data" --out "$out" "$@" \
    > "$out.log" 2>&1 < /dev/null &
  echo $! > "$out.pid"
  ;;
wait)
  out=$2 until=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -lt "$until" ] && kill -0 "$(cat "$out.pid")" 2>/dev/null; do sleep 20; done
  wc -l < "$out/results.jsonl"
  python3 benchmarks/peer/peer_train_py.py compare "$out" > /dev/null 2>&1; cat "$out/table.md"
  kill -0 "$(cat "$out.pid")" 2>/dev/null && echo "still running" || { tail -3 "$out.log"; echo "done"; }
  echo "MPS processes left: $(pgrep -a nvidia-cuda-mps || echo none)"
  ;;
stop)
  out=$2
  kill -TERM -- -"$(cat "$out.pid")" 2>/dev/null  # the runner's whole session: it, the kit or train.py copies
  for _ in $(seq 120); do pgrep -s "$(cat "$out.pid")" > /dev/null || break; sleep 1; done
  tail -3 "$out.log"
  echo "MPS processes left: $(pgrep -a nvidia-cuda-mps || echo none)"
  ;;
esac
