#!/usr/bin/env bash
# The GPU measurements quoted in the issues' closing notes, as stages that each fit one 10-minute device command.
#   bash benchmarks/archive/h100.sh STAGE [ARGS...]        results go under $RESULTS (default benchmarks/results/h100, each stage in its topic folder)
# Stages:
#   gputests                       the tests marked gpu (worker, monitor, MIG catalogue read-only, MPS daemon)
#   matrix SPECS MODELS BATCHES    collocation_matrix.py run (e.g. matrix single-job,naive-matrix resnet18 64,128)
#   workerbench                    the worker against a plain PyTorch loop, and the start skew of 7 jobs
#   monitor                        the monitor's plausibility check and its overhead
#   mps-oom                        an MPS memory limit makes one job fail out of memory while its neighbours finish
#   overhead                       a run's cost beyond its window (ResNet-50 bs128 bf16), with and without the zygote
#   overhead-vs DIR                the same, this checkout against an older one, interleaved (old new old new); DIR
#                                  holds the older colloc_kit: git archive REV colloc_kit | tar x -C DIR (carry DIR)
#   priming                        where the first training step's time goes (benchmarks/archive/priming.py)
# Every stage ends by showing that no MPS daemon is left (pgrep -a nvidia-cuda-mps prints nothing).
set -uo pipefail
stage=$1; shift
out=${RESULTS:-benchmarks/results/h100}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
echo "== $(date +%T) $stage $*"
case $stage in
  gputests)
    mkdir -p "$out/gpu-tests"
    python3 -m pytest -q -m gpu -rs tests/test_worker.py tests/test_monitor_gpu.py tests/test_mig_gpu.py \
      tests/test_mps_gpu.py tests/test_zygote.py 2>&1 | tee "$out/gpu-tests/gputests.txt" | tail -25 ;;
  matrix)
    python3 benchmarks/matrix/collocation_matrix.py run ${1//,/ } --models "$2" --batch-sizes "$3" --repeats 3 \
      --seconds "${SECONDS_PER_JOB:-4}" --out "$out/matrix" | tail -30 ;;
  workerbench)
    python3 benchmarks/archive/worker_vs_plain.py --rounds 2 --seconds 12 --out "$out/worker-vs-plain/worker_vs_plain.json" | tail -8
    python3 benchmarks/archive/start_skew.py --copies 7 --repeats 3 --out "$out/start-skew/start_skew.json" | tail -5 ;;
  monitor)
    python3 benchmarks/archive/monitor_check.py --out "$out/monitor-check" | tail -12
    python3 benchmarks/archive/monitor_overhead.py --out "$out/monitor-overhead" | tail -12 ;;
  mps-oom)
    python3 benchmarks/archive/mps_memory_limit.py --out "$out/mps-memory-limit" | tail -12 ;;
  overhead)
    mkdir -p "$out/run-overhead"
    for zygote in 1 0; do
      COLLOC_KIT_ZYGOTE=$zygote python3 benchmarks/archive/run_overhead.py --device cuda --model resnet50 --batch-size 128 \
        --amp bf16 --seconds 5 --repeats 3 --runs 3 --label "zygote=$zygote" \
        --out "$out/run-overhead/overhead_$([ $zygote = 1 ] && echo zygote || echo no_zygote).json" 2>&1 | tail -4
    done ;;
  overhead-vs)
    mkdir -p "$out/run-overhead"
    old=$(cd "$1" && pwd) n=0
    for checkout in "$old" "$PWD" "$old" "$PWD"; do
      n=$((n + 1)) label=$([ "$checkout" = "$PWD" ] && echo this || echo older)
      PYTHONPATH=$checkout${PYTHONPATH#$PWD} python3 benchmarks/archive/run_overhead.py --repeats 1 --runs 5 --label "$label" \
        --out "$out/run-overhead/overhead_${label}_$n.json" 2>&1 | tail -3
    done ;;
  priming)
    mkdir -p "$out/priming"
    python3 benchmarks/archive/priming.py --repeats 2 --out "$out/priming/priming.json" ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
esac
echo "== $(date +%T) MPS processes left: $(pgrep -a nvidia-cuda-mps || echo none)"
