#!/usr/bin/env bash
# The full benchmark suite on a GPU machine (written for the H100 box: Python 3.12, torch with
# CUDA, onnxruntime CPU, no internet), in about 8 minutes, into bench/results/.
#   bench/run_gpu.sh                 PYTHON=python3.12 to pick the interpreter
#   TIME_LIMIT=420 bench/run_gpu.sh  seconds after which no new case starts (default 420)
# Expects the extensions built in place (python3 setup.py build_ext --inplace); builds them if not.
# Writes bench/results/<gpu>-<date>.jsonl/.md (+ .png charts when matplotlib is importable) and
# bench/results/<gpu>-<date>.log (the console output).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LIMIT=${TIME_LIMIT:-420}

if ! $PY -c "import vkml.runtime._sched, vkml.vulkan._device" 2>/dev/null; then
    echo "== building extensions"
    $PY setup.py build_ext --inplace -q > /tmp/vkml_build.log 2>&1 || { tail -30 /tmp/vkml_build.log; exit 1; }
fi

echo "== environment"
$PY - <<'PY'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("numpy", "onnx", "onnxruntime", "torch", "torchvision", "matplotlib", "ncnn"):
    try:
        mod = importlib.import_module(m)
        extra = ""
        if m == "torch":
            extra = f" cuda={mod.version.cuda} available={mod.cuda.is_available()}"
            if mod.cuda.is_available():
                extra += f" ({mod.cuda.get_device_name(0)})"
        print(f"{m:12s} {getattr(mod, '__version__', '?')}{extra}")
    except Exception as e:
        print(f"{m:12s} missing ({type(e).__name__}: {str(e)[:80]})")
PY
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -m vkml info || true

mkdir -p bench/results
LOG=bench/results/run-gpu-$(date +%Y-%m-%d-%H%M%S).log
echo "== suite (time limit ${LIMIT} s for starting cases; log: $LOG)"
# The outer timeout is a backstop: records are appended as they complete, so even a killed run
# leaves its JSONL; `python -m vkml.benchmarks.report FILE.jsonl` then rebuilds the table and charts.
timeout $((LIMIT + 60)) $PY -m vkml bench --out bench/results --time-limit "$LIMIT" "$@" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
if [ "$status" = 124 ]; then
    echo "suite hit the outer timeout; rebuilding the report from the JSONL"
    latest=$(ls -t bench/results/*.jsonl | head -1)
    $PY -m vkml.benchmarks.report "$latest"
fi
exit "$status"
