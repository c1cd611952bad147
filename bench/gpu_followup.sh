#!/usr/bin/env bash
# What the 2026-11-28 session changed without a GPU, measured in one device call (about 8 min):
# the depthwise-convolution route A/B (bench/probe_conv_routes.py), Ifs on data and Loop bodies
# on the GPU against NumPy (probe_control_flow.py), plans for new input shapes
# (probe_planning.py), and the CNN rows the route change is for, peers in the same run.
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
timeout 150 $PY bench/probe_conv_routes.py --out "$OUT/conv_routes.jsonl" || status=1
timeout 120 $PY bench/probe_control_flow.py --out "$OUT/control_flow.jsonl" || status=1
timeout 60 $PY bench/probe_planning.py --out "$OUT/planning.jsonl" || status=1
timeout 260 $PY -m vkml bench --only mnist,resnet18,mobilenet_v2,efficientnet_b0 --device vulkan:0 --device cuda \
    --out "$OUT" --no-charts --time-limit 200 || status=1
exit $status
