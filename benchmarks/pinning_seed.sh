#!/usr/bin/env bash
# Does the kit's pinning hold back the seed recipe's input pipeline? The kit gives each GPU job a block of at most
# GPU_JOB_CORES (4) cores (launcher.host_shares); the study's jobs ran unpinned. Timm's ResNet-26 on CIFAR-10
# stand-in files, the seed recipe (224 px, fp32, 4 loader workers), MPS with 1, 3 and 7 copies, once pinned (the
# kit) and once with every job on every core (host_shares patched), interleaved per repeat.
#   bash benchmarks/pinning_seed.sh DATA OUT [REPEATS]      DATA holds cifar10/ (colloc-kit data make cifar10)
set -u
data=$1 out=$2 repeats=${3:-1}
job=(--model timm.resnet26 --dataset imagefolder --data-root "$data/cifar10" --recipe seed --amp off --batch-size 128
     --seconds 15 --warmup-steps 10 --mode mps --copies 1,3,7 --repeats 1 --quiet --out "$out")
unpinned='import os, sys
from colloc_kit import launcher
launcher.host_shares = lambda n, device: [sorted(os.sched_getaffinity(0))] * n
from colloc_kit.cli import main
sys.exit(main(sys.argv[1:]))'
for r in $(seq "$repeats"); do
  python3 -m colloc_kit.cli run "${job[@]}" --name "pinned-r$r"
  python3 -c "$unpinned" run "${job[@]}" --name "unpinned-r$r"
done
for exp in "$out"/*/; do echo "== $(basename "$exp")"; python3 -m colloc_kit.cli show "$exp" | tail -6; done
