#!/usr/bin/env bash
# Issue #5's checks on a GPU machine (one H100, or two H200s): build in place, list the Vulkan
# devices, run tests/e2e (models, threads, random placements, torch exports compared with
# onnxruntime, and with two or more GPUs the split by memory caps), the mixed multi-GPU workload
# over every real GPU, and tests/vulkan. Usage: tools/gpu_e2e.sh (PYTHON=python3.12 to pick).
# Each step has its own time limit so one stuck step still leaves the others' results.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
status=0
step() { echo "== $1"; shift; timeout "$@" || { echo "-- step failed (exit $?)"; status=1; }; }

echo "== environment"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import sys, numpy, onnx, onnxruntime as o; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'onnx', onnx.__version__, 'onnxruntime', o.__version__)"
$PY -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)" || true
if ! $PY -c "import vkml.runtime._sched, vkml.vulkan._device" 2>/dev/null; then
    $PY setup.py build_ext --inplace -q > /tmp/vkml_build.log 2>&1 || { tail -30 /tmp/vkml_build.log; exit 1; }
fi
$PY -m vkml info | head -40
NGPU=$($PY -c "import vkml.vulkan as vk; print(sum(d.usable and d.device_type == 'discrete' for d in vk.list_devices()))")
DEV=$($PY -c "import vkml.vulkan as vk; print(vk.preferred_index())")
echo "discrete GPUs: $NGPU; tests on vulkan:$DEV first"
export VKML_TEST_DEVICE=$DEV

step "tests/e2e" 300 $PY -m pytest -q -p no:cacheprovider -rs tests/e2e
if [ "$NGPU" -ge 2 ]; then
    step "mixed workload over $NGPU GPUs" 240 env PYTHONPATH=. E2E_EXPECT_GPUS=$NGPU $PY tests/e2e/_workload.py
fi
step "tests/vulkan" 300 $PY -m pytest -q -p no:cacheprovider tests/vulkan \
    --deselect tests/vulkan/test_pipeline.py::test_committed_spirv_is_up_to_date
echo "== done (status $status)"
exit $status
