"""The feed fuzzer (tests/unit/test_feed_fuzz.py) on a GPU: the same mutated feeds through a
session on the Vulkan device and the CPU, compared with a CPU-only reference (within float
tolerance: GPU kernels round differently), or a ValueError/TypeError naming the input."""
import importlib.util
import os

FUZZ = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit", "test_feed_fuzz.py")
SECONDS = 6.0  # of the CI budget for both devices (~15 s with the children's start-up)


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("feed_fuzz", FUZZ)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mutated_feeds_on_gpu_run_right_or_raise_naming_the_input(gpu):
    fuzz = _fuzz_module()
    fuzz.check(fuzz.run_child(gpu, SECONDS))
