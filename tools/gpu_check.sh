#!/usr/bin/env bash
# Check vkml's Vulkan runtime on a GPU machine (no shader compiler or internet needed):
#   1. build the extensions in place (the committed SPIR-V in vkml/spv is used as is),
#   2. print the Vulkan devices,
#   3. run tests/vulkan on the first discrete GPU,
#   4. print a few measurements (tools/vulkan_probe.py).
# Usage: tools/gpu_check.sh            (PYTHON=python3.12 to pick the interpreter)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
status=0

echo "== environment"
uname -srm
$PY -c "import sys, numpy, Cython; print('python', sys.version.split()[0], '| numpy', numpy.__version__, '| Cython', Cython.__version__)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null | tr '\n' ' '; echo
command -v glslangValidator glslc || echo "(no shader compiler: using the committed SPIR-V)"

echo "== build"
if ! $PY setup.py build_ext --inplace -q > /tmp/vkml_build.log 2>&1; then
    tail -40 /tmp/vkml_build.log
    echo "BUILD FAILED"
    exit 1
fi
grep -iE "warning: .*SPIR-V|compiled .* shader" /tmp/vkml_build.log || true
echo "build ok"

echo "== devices"
$PY -c "
import vkml.vulkan as vk
reason = vk.unavailable_reason()
if reason:
    print('Vulkan unavailable:', reason)
else:
    print(vk.format_table(vk.list_devices()))
" || status=1

# The device under test: the first usable discrete GPU (else device 0).
DEV=$($PY -c "import vkml.vulkan as vk; print(vk.preferred_index())" 2>/dev/null || echo 0)
export VKML_TEST_DEVICE=$DEV
echo "== tests (VKML_TEST_DEVICE=$DEV)"
$PY -m pytest tests/vulkan -x -q || status=1

echo "== measurements"
$PY tools/vulkan_probe.py "$DEV" || status=1

echo "== done (status $status)"
exit $status
