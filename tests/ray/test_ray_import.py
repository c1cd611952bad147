"""vkml.ray is optional: `import vkml` never imports Ray, and without Ray `import vkml.ray`
says how to get it. (These run whether or not Ray is installed.)"""
from __future__ import annotations

import subprocess
import sys


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_vkml_does_not_import_ray():
    r = _python("import sys, vkml; vkml.InferenceSession; "
                "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_without_ray_the_import_error_says_what_to_install():
    r = _python("import sys; sys.modules['ray'] = None\n"
                "try:\n    import vkml.ray\nexcept ImportError as e:\n    print('ImportError:', e)\n")
    assert r.returncode == 0, r.stderr
    assert "ImportError: vkml.ray needs Ray" in r.stdout and "pip install 'vkml[ray]'" in r.stdout, r.stdout


def test_ray_examples_and_bench_compile():
    """At least this much without Ray: the scripts parse (they run in test_ray_examples.py)."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for rel in ("examples/ray_batch_inference.py", "examples/ray_serve.py", "bench/ray_scaling.py"):
        with open(os.path.join(root, rel)) as f:
            compile(f.read(), rel, "exec")
