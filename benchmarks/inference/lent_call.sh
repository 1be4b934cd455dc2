#!/usr/bin/env bash
# Issue 51, one call on a lent GPU machine, from the checkout: the inference benchmark with the given arguments,
# its folder under $OUT (the runs packed), the log beside it, and any MPS daemon left behind quit.
#   LIMIT=550 bash benchmarks/inference/lent_call.sh NAME ARGS...   # e.g. r50 --served resnet50 --seconds 6
#   SEED="p12-r50 launches-r50" LIMIT=550 bash benchmarks/inference/lent_call.sh NAME ... --repeats 4   # a 4th launch
# LIMIT (default 550 s), its 10-s kill grace and the archives must fit the call's 600 s, or nothing but the log returns
set -uo pipefail
name=$1; shift
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
# the zygote needs setproctitle (without it every job starts a fresh Python: 9-10 s of imports on an H200 host);
# carry its wheel: carry [".whl/setproctitle-1.3.8-cp312-cp312-manylinux1_x86_64.manylinux_2_28_x86_64.manylinux_2_5_x86_64.whl"]
if ls .whl/setproctitle-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/setproctitle-*.whl
  export PYTHONPATH=$PWD:/tmp/site
fi
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv > $OUT/$name-gpu.txt; nproc >> $OUT/$name-gpu.txt
D=/tmp/inference-$name
# a folder from an earlier call resumes (its cost rounds, kit and peer cells read, not run again): on a warm machine
# it is still in /tmp; else carry NAME-folder.tgz from that call's $OUT as .carry/NAME-folder.tgz
if [ ! -d $D ] && [ -f .carry/$name-folder.tgz ]; then mkdir -p $D && tar xzf .carry/$name-folder.tgz -C $D; fi
# or SEED="FOLDER ...": folders of results/h200/ whose runs.tgz and peer.tgz, already in the checkout, make the
# folder (more launches of their settings: --repeats past theirs runs only the launches missing, a peer beside each)
for seed in ${SEED:-}; do
  mkdir -p $D && for archive in benchmarks/inference/results/h200/$seed/{runs,peer}.tgz; do
    if [ -f $archive ]; then tar xzf $archive -C $D; fi; done
done
timeout -k 10 ${LIMIT:-550} python3 benchmarks/inference/inference.py --out $D "$@" 2>&1 | tee $OUT/$name.log
echo "rc ${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s" | tee -a $OUT/$name.log
# a daemon left behind (the kit's watchdog quits one whose kit was killed; this says so if one is still there): quit,
# else kill, each found by the kit's own detection (its pipe dir read from the process, as the kit's refusal names it)
python3 benchmarks/quit_left_mps.py 2>&1 | tee -a $OUT/$name.log
tar czf $OUT/$name-results.tgz -C $D --exclude runs . && tar czf $OUT/$name-runs.tgz -C $D runs
tar czf $OUT/$name-folder.tgz -C $D .   # the whole folder, to carry into the next call
