"""The Ray examples, the README's Ray section and the Ray benchmark run as a user would run
them: each in a fresh process (with a local Ray cluster of its own), from a directory outside
the checkout, on lavapipe or the CPU device. Each must exit 0 and print what says it did its job.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import socket
import subprocess
import sys

import pytest

from _ray_support import CI, need_ray, pick_device

need_ray()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICE = pick_device()


def run_script(tmp_path, path: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, path, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"{path} {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-5000:]}"
    return r.stdout


def test_batch_inference_example(tmp_path):
    out = run_script(tmp_path, os.path.join(ROOT, "examples", "ray_batch_inference.py"), "--device", DEVICE)
    m = re.search(r"pool: 45 batches on 2 actors \(runs per actor \[(\d+), (\d+)\]\).*, (\d+) of 360 right", out)
    assert m and int(m[1]) + int(m[2]) == 45 and int(m[3]) >= 350, out  # the model gets 98.9% right
    assert "map_batches: 360 rows, in order: True, columns ['images', 'label', 'probs']" in out, out
    assert "the pool and map_batches agree on every image" in out, out


def test_serve_example(tmp_path):
    try:
        importlib.import_module("ray.serve")
    except ImportError as e:
        if CI:
            pytest.fail(f"CI=true but Ray Serve is not importable ({e}); the test extra installs ray[serve]")
        pytest.skip(f"Ray Serve is not installed ({e})")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = run_script(tmp_path, os.path.join(ROOT, "examples", "ray_serve.py"), "--device", DEVICE,
                     "--requests", "96", "--port", str(port))
    m = re.search(r"served 96 requests: (\d+) right", out)
    assert m and int(m[1]) >= 92, out
    m = re.search(r"ran (\d+) batches, the largest of (\d+) images", out)
    assert m and int(m[1]) < 96, out  # dynamic batching put several requests in one run
    assert re.search(r"HTTP: \{'digit': \d\} \(label \d\)", out), out


def test_readme_ray_section_runs_as_written(tmp_path):
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("\n## Ray\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)[1]
    script = tmp_path / "readme_ray.py"
    script.write_text(code)
    lines = run_script(tmp_path, str(script)).strip().splitlines()
    assert lines[0].startswith("45 ["), lines  # 45 batches; the actor's devices
    assert re.fullmatch(r"\d", lines[1]), lines  # a digit


def test_ray_scaling_bench_writes_its_rows(tmp_path):
    out_file = tmp_path / "ray.jsonl"
    run_script(tmp_path, os.path.join(ROOT, "bench", "ray_scaling.py"), "--quick", "--devices", f"{DEVICE},{DEVICE}",
               "--runs", "2", "--warmup", "1", "--batches", "2", "--out", str(out_file))
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [r["path"] for r in rows] == ["machine", "loop", "run_batch", "ray", "ray"], rows
    assert [r.get("actors") for r in rows[3:]] == [1, 2] and all(r["same_as_loop"] for r in rows[3:]), rows
    assert all(r["runs"] == 2 and r["warmup"] == 1 and r["images_per_s"] > 0 for r in rows[1:]), rows
    assert rows[0]["machine"]["versions"]["ray"]
