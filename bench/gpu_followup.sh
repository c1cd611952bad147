#!/usr/bin/env bash
# A first GPU call for the next session (about 8 min; a device call may take 10): the shortcut
# and threads tests on NVIDIA (the shortcut, fast-run, run-gate and fork tests passed on an H200
# in the fourteenth session, after 0f12c87; the two threads files were not run there), then
# the CNN rows with torch in the same run and the threads probe (#12, #14), then the threaded
# family with its peers. Rows now carry the SM clock they ran at (sm_clock_mhz): NVIDIA's
# governor holds it low for seconds at a time (bench/results/checks/h200-2026-12-02-gemm-clocks.txt).
#   bash bench/gpu_followup.sh [OUTDIR]     (on the GPU machine, after the device prelude;
#                                            default OUTDIR bench/results; PYTHON=python3.12)
# The fifteenth session measured the CPU device's threads on the H200 host at c1cbf80 (its
# convolutions split over vkml's threads; since then chunks of 2^24 multiply-adds and the split
# only for convolution-heavy plans): the threaded family's CPU rows below are the first at the
# current code.
# Each bench writes its own folder under OUTDIR: two benches in one folder overwrite each
# other's <machine>-<date>.md/.jsonl.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
if ! $PY -c "import vkml.runtime._sched, vkml.vulkan._device" 2>/dev/null; then
    $PY setup.py build_ext --inplace -j 16 -q > /tmp/vkml_build.log 2>&1 || { tail -30 /tmp/vkml_build.log; exit 1; }
fi
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
status=0
VKML_TEST_DEVICE=0 timeout 150 $PY -m pytest -q -p no:cacheprovider -rs tests/e2e/test_run_shortcut.py \
    tests/e2e/test_fast_run.py tests/e2e/test_threads_gpu.py tests/e2e/test_threads_stateful.py \
    tests/e2e/test_gpu_run_gate.py tests/e2e/test_fork_gpu.py 2>&1 | tail -15 | tee "$OUT/shortcut-tests.txt" || status=1
mkdir -p "$OUT/cnn" "$OUT/threaded"
timeout 200 $PY -m vkml bench --only mnist,resnet18,mobilenet_v2,efficientnet_b0,resnet50 --device vulkan:0 --device cuda \
    --out "$OUT/cnn" --no-charts --time-limit 180 || status=1
timeout 90 $PY bench/probe_threads.py --models mnist,resnet18 --threads 1,2,4,8,16 --queues 4 --seconds 2 \
    --out "$OUT/probe_threads-followup.jsonl" || status=1
timeout 200 $PY -m vkml bench --only threaded --device vulkan:0 --device cuda --device cpu --out "$OUT/threaded" --no-charts \
    --time-limit 180 || status=1
# The fused squeeze-excitation pool since c6be664 (shared memory sized by the plane), against no fusion
timeout 120 $PY bench/probe_knobs.py --models tv:efficientnet_b0,tv:mobilenet_v3_large --variant "fused=" \
    --variant "nomean=compile.epilogue.FUSE_MEAN:False" --rounds 4 --runs 100 --profile-runs 20 \
    --out "$OUT/mean_fusion-followup.jsonl" || status=1
exit $status
