#!/usr/bin/env bash
# The reference set h200-inference from this folder's eight 12-s runs.tgz, from the checkout's root:
#   bash benchmarks/inference/results/h200/export-set.sh
# (they hold disjoint runs under runs/: each setting's first launch r0 in the first four, r1 and r2 in the launches-*
# folders; the run the first p12r50 call's time limit interrupted is left out)
set -euo pipefail
R=benchmarks/inference/results/h200
D=$(mktemp -d)
for folder in p12-r50 p12-vit rest-vit rest-r50 launches-r50 launches-vit launches-vitrest launches-r50rest; do tar xzf $R/$folder/runs.tgz -C "$D"; done
rm -r "$D"/runs/serve-resnet50-beside-resnet50x2/20261129-035717-mps-x2-r0
colloc-kit reference export "$D"/runs/serve-*x[12] --name h200-inference --to colloc_kit/reference \
 --fact "Machine=the device tool's nvidia-h200, lent for sessions 23 to 26 (one NVIDIA H200, 143,771 MiB, driver 580.159.04, 16 cores; $R/*/gpu.txt); every batch size from 1 to max_batch primed before the window (worker.serve.prime_batches), so no p99 holds a first batch ($R/*/first-batches.md)" \
 --fact "Commands=session 24, p12-r50/ (ResNet-50 beside one and beside two ResNet-50 trainers, 10 settings): LIMIT=585 bash benchmarks/inference/lent_call.sh p12r50 --seconds 12 --rate resnet50=38.5 vit_b_16=42.6 --served resnet50 --mixes resnet50x1 resnet50x2 --no-capacity (cut at 595 s in the third of those settings' cells, then the same command resumed the folder on the warm machine)" \
 --fact "Commands=session 24, p12-vit/ (ViT-B/16 beside one ResNet-50 trainer, 7 settings): LIMIT=545 bash benchmarks/inference/lent_call.sh p12vit --seconds 12 --rate resnet50=38.5 vit_b_16=42.6 --served vit_b_16 --mixes resnet50x1 --no-capacity" \
 --fact "Commands=session 23, rest-vit/ (ViT-B/16 beside two ResNet-50 trainers and beside one ViT-B/16 trainer, 6 settings): LIMIT=548 bash benchmarks/inference/lent_call.sh vitrest --seconds 12 --rate resnet50=38.5 vit_b_16=42.6 --served vit_b_16 --mixes resnet50x2 vit_b_16x1" \
 --fact "Commands=session 23, rest-r50/ (ResNet-50 beside one ViT-B/16 trainer, 3 settings): LIMIT=400 bash benchmarks/inference/lent_call.sh r50vit --seconds 12 --rate resnet50=38.5 vit_b_16=42.6 --served resnet50 --mixes vit_b_16x1" \
 --fact "Commands=sessions 25 and 26, launches-*/ (each setting launched twice more, r1 and r2; r0 is the run above): LIMIT=390 bash benchmarks/inference/lent_call.sh p12r50 --seconds 12 --rate resnet50=38.5 vit_b_16=42.6 --served resnet50 --mixes resnet50x1 --no-capacity --no-peer --repeats 3 --budget-s 5000 (session 25, launches-r50/), then in session 26 the same with --served vit_b_16 --mixes resnet50x1 (launches-vit/), --served vit_b_16 --mixes resnet50x2 vit_b_16x1 (launches-vitrest/) and --served resnet50 --mixes resnet50x2 vit_b_16x1 (launches-r50rest/), each call carrying the earlier folder so that only the missing launches ran" \
 --fact "Commands=this set: bash $R/export-set.sh (the eight runs.tgz unpacked into a temporary folder, the interrupted run below removed, then colloc-kit reference export of the six serve-* experiments: 26 settings, three launches each, 78 runs)" \
 --fact "Notes=launches: each setting's three runs are its launches (repeat 0, 1, 2); serve_advise.frontier pools them: the p99 as their geometric mean, its 95 % CI over the launches and the range one more launch falls in (serve_advise.by_setting). r0 ran in sessions 23 and 24, r1 and r2 in sessions 25 and 26, on lent H200s that were not always the same card (gpu_uuid in each manifest): the ViT-B/16 trainer did 1,096-1,434 images/s beside a served job in session 23 and 809-973 in session 26" \
 --fact "Raw runs=$R/p12-r50/runs.tgz, $R/p12-vit/runs.tgz, $R/rest-vit/runs.tgz, $R/rest-r50/runs.tgz (the peer's cells: peer.tgz beside each; their tables: summary.md, frontier.csv, kit_vs_peer.csv)" \
 --fact "Notes=rates offered: ResNet-50 (4 images a request) 38.5 requests/s, ViT-B/16 (1 image) 42.6 requests/s, both from session 22's cost rounds (30 % of the kit's rate alone, one request at a time); SLO 25 ms" \
 --fact "Notes=\"exclusive\" (the first mix only, beside one ResNet-50 trainer): the serve job and the training job one after another, each alone on the whole GPU: each job's lone baseline; the other mixes ran naive, MPS and MPS with the training at 50 %" \
 --fact "Notes=windows: 12 s in every run (439-501 requests a run, more than the 400 a p99's upper 95 % bound needs): every p99 has both bounds of its CI" \
 --fact "Left out=the closed-loop capacity cells (capacity-*: each setting's capacity_per_s; for the 17 settings rerun in session 24 in $R/primed/frontier.csv and $R/primed-x2/frontier.csv, session 22's, measured with 6-s windows; for the other 9 in rest-vit/ and rest-r50/), the cost rounds ($R/cost-a, cost-b, cost-c) and the --confirm 3 repeats ($R/primed/confirm.md): left out so that every row of the set is one setting of the question at its rate" \
 --fact "Left out=serve-resnet50-beside-resnet50x2's first MPS run (20261129-035717-mps-x2-r0, status running): the call's time limit killed the benchmark in its window, and the resumed folder ran that cell again (20261129-040024-mps-x2-r0, in the set); it stays in $R/p12-r50/runs.tgz" \
 --fact "Left out=session 22's 6-s runs of the same 17 settings ($R/primed/, $R/primed-x2/: too few requests for a p99's upper bound), replaced by session 24's 12-s ones" \
 --fact "Left out=the raw monitor series (.samples, .host_samples): monitor.parquet summarises them per run, and each job's row keeps its window's figures"
rm -r "$D"
