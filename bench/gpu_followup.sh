#!/usr/bin/env bash
# The CNN rows with torch in the same run and the threads probe (#12, #14), in one device call
# (about 6 min). The twelfth session changed the native runs' hand-offs (README, Threads, twelfth
# session) and measured the threaded family with its peers only at 90e2b19, before the final
# gate: the next session should run this first, for the threaded family at 950884c or later.
#   bash bench/gpu_followup.sh [OUTDIR]     (on the GPU machine, after the device prelude;
#                                            default OUTDIR bench/results; PYTHON=python3.12)
set -u
cd "$(dirname "$0")/.."
OUT=${1:-bench/results}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
if ! $PY -c "import vkml.runtime._sched, vkml.vulkan._device" 2>/dev/null; then
    $PY setup.py build_ext --inplace -j 16 -q > /tmp/vkml_build.log 2>&1 || { tail -30 /tmp/vkml_build.log; exit 1; }
fi
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
status=0
timeout 200 $PY -m vkml bench --only mnist,resnet18,mobilenet_v2,efficientnet_b0,resnet50 --device vulkan:0 --device cuda \
    --out "$OUT" --no-charts --time-limit 180 || status=1
timeout 90 $PY bench/probe_threads.py --models mnist,resnet18 --threads 1,2,4,8,16 --queues 4 --seconds 2 \
    --out "$OUT/probe_threads-followup.jsonl" || status=1
timeout 200 $PY -m vkml bench --only threaded --device vulkan:0 --device cuda --device cpu --out "$OUT" --no-charts \
    --time-limit 180 || status=1
# The fused squeeze-excitation pool since c6be664 (shared memory sized by the plane), against no fusion
timeout 120 $PY bench/probe_knobs.py --models tv:efficientnet_b0,tv:mobilenet_v3_large --variant "fused=" \
    --variant "nomean=compile.epilogue.FUSE_MEAN:False" --rounds 4 --runs 100 --profile-runs 20 \
    --out "$OUT/mean_fusion-followup.jsonl" || status=1
exit $status
