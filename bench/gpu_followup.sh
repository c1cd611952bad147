#!/usr/bin/env bash
# What the 2026-11-28 sessions left unmeasured, in one device call (about 8 min): the 32x64 blocks
# for padded M in their final form (convolutions excluded) against the rule off, on ViT-B/16 and
# the CNNs it must not slow down (bench/probe_knobs.py), then the CNN, transformer, MatMul and MLP
# rows with torch in the same run (the ninth session's lone-waiter poll, activation epilogues and
# ALIGNED cooperative-matrix GEMMs were timed only in probes).
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
timeout 150 $PY bench/probe_knobs.py --models tt:vit_b_16,mobilenet_v2,tv:efficientnet_b0,resnet18 --rounds 5 --runs 60 \
    --profile-runs 0 --out "$OUT/narrow_final.jsonl" --variant base= --variant "nonarrow=matmul.NARROW_MIN_SAVING:2.0" || status=1
timeout 320 $PY -m vkml bench --only mnist,resnet18,mobilenet_v2,efficientnet_b0,resnet50,matmul,mlp,transformers --device vulkan:0 --device cuda \
    --out "$OUT" --no-charts --time-limit 290 || status=1
exit $status
