"""The benchmark suite (vkml.benchmarks, behind `vkml bench`) runs end to end at its smallest
sizes and writes what it promises.

No timing is asserted (CI never gates on wall-clock): only that every family produced records,
that vkml's CPU numbers are real measurements, and that absent peers are reported, not faked.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from vkml.benchmarks import suite


def test_suite_smoke(tmp_path):
    args = suite.build_parser().parse_args(
        ["--smoke", "--out", str(tmp_path), "--machine", "smoke", "--device", "cpu", "-q", "--no-charts",
         "--only", "chain_add,mnist,matmul,mlp,resnet18,threaded"])
    res = suite.run(args)
    with open(res["jsonl"]) as f:
        recs = [json.loads(l) for l in f]
    assert recs == json.loads(json.dumps(res["records"]))
    benches = {r["benchmark"] for r in recs}
    assert {"chain_add", "chain_add_fit", "mnist", "matmul", "mlp", "resnet18", "threaded"} <= benches
    for r in recs:
        assert r["status"] in ("ok", "missing", "unsupported", "error", "skipped")
        assert r["machine"]["cores"] == os.cpu_count()
        if r["status"] != "ok":
            assert r["reason"], r
    vk = [r for r in recs if r["runtime"] == "vkml/cpu" and r["benchmark"] == "chain_add"]
    assert [r["status"] for r in vk] == ["ok"] * 3
    for r in vk:
        assert 0 < r["p05"] <= r["median"] <= r["p95"]
        assert r["runs"] == 10 and r["dropped"] >= 2 and r["warmup_s"] > 0
    fit = [r for r in recs if r["benchmark"] == "chain_add_fit" and r["runtime"] == "vkml/cpu"]
    assert len(fit) == 1 and fit[0]["points"] == 3
    thr = [r for r in recs if r["benchmark"] == "threaded" and r["runtime"] == "vkml/cpu"]
    assert [r["params"].get("threads") for r in thr] == [1, 2, 1, 2, None] and all(r["throughput"] > 0 for r in thr)
    dyn = [r for r in thr if "dynamic batching" in r["config"]]
    assert len(dyn) == 2 and all(r["params"]["max_batch_size"] == 32 and r["mean_rows_per_run"] >= 1 for r in dyn)
    assert thr[-1]["params"]["batch"] == 64 and thr[-1]["runs"] >= 3 * 64 and "p99" in thr[-1]
    md = open(res["md"]).read()
    assert "| config | mode |" in md and "vkml/cpu" in md
    # peers that are not importable here appear as missing with a reason, never with numbers
    for r in recs:
        if r["benchmark"] == "runtimes":
            assert r["status"] == "missing" and "median" not in r
    pytest.importorskip("matplotlib")
    from vkml.benchmarks import report

    paths, note = report.charts([r for r in recs if r["benchmark"] == "chain_add"], str(tmp_path / "c"))
    assert len(paths) == 1 and os.path.getsize(paths[0]) > 1000, note


def test_linear_fit_and_stats():
    from vkml.benchmarks import timing

    slope, icpt = timing.linear_fit([1, 10, 100], [3.0, 21.0, 201.0])
    assert slope == pytest.approx(2.0) and icpt == pytest.approx(1.0)
    s = timing.stats(list(np.arange(1, 101, dtype=float)))
    assert s["median"] == pytest.approx(50.5) and s["p05"] < s["median"] < s["p95"]


def test_models_match_onnxruntime():
    """The builders produce valid graphs that vkml and onnxruntime agree on."""
    ort = pytest.importorskip("onnxruntime")
    import vkml
    from vkml.benchmarks import models as M

    for bm in (M.mnist(1), M.resnet18(1, 32), M.mobilenet_v2(1, 32), M.chain_add(5)):
        want = ort.InferenceSession(bm.bytes(), providers=["CPUExecutionProvider"]).run(None, bm.feed)[0]
        got = vkml.InferenceSession(bm.bytes(), devices=["cpu"]).run(None, bm.feed)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_profile_cli(capsys):
    from vkml.api.cli import main

    assert main(["bench", "--profile", "mnist", "--runs", "2", "--gpu", "none"]) == 0
    out = capsys.readouterr().out
    assert "session.run" in out and "Conv" in out and "GPU: skipped" in out
    assert main(["bench", "--profile", "no-such-model"]) == 1


def test_first_run_family_smoke(tmp_path):
    """vkml cold and warm and onnxruntime, each a fresh process, as `vkml bench --only first_run`."""
    args = suite.build_parser().parse_args(
        ["--smoke", "--out", str(tmp_path), "--machine", "smoke", "--device", "cpu", "-q", "--no-charts",
         "--only", "first_run"])
    recs = [r for r in suite.run(args)["records"] if r["benchmark"] == "first_run"]
    got = {(r["runtime"], r["mode"]): r for r in recs}
    assert {("vkml/cpu", "cold"), ("vkml/cpu", "warm")} <= set(got), recs
    for r in recs:
        assert r["status"] == "ok", r
        assert 0 < r["first_result_s"] < 60 and r["steady_runs"] >= 30


def test_gpu_clock_sampling_and_the_low_clock_note(tmp_path, monkeypatch):
    """GpuBusy reads nvidia-smi's utilization and SM clock (a stand-in script on PATH here), and
    the report notes rows timed well below the run's highest clock."""
    import time

    from vkml.benchmarks import report
    from vkml.benchmarks.gpu_busy import GpuBusy, parse_sample

    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nfor c in 1980 735 1980 705 1980; do echo \"50, $c\"; done\necho '[N/A], [N/A]'\n"
                    "sleep 5\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    with GpuBusy() as busy:
        time.sleep(0.5)
    assert (busy.sm_clock, busy.sm_clock_min) == (1980.0, 705.0)
    assert parse_sample("87, 1410\n") == (87.0, 1410.0) and parse_sample("[N/A], [N/A]") is None
    assert parse_sample("warning: something") is None
    base = {"benchmark": "resnet18", "mode": "host", "status": "ok", "median": 1e-3, "p05": 1e-3, "p95": 1e-3}
    recs = [dict(base, config="b1", runtime="vkml/vulkan:0", sm_clock_mhz=1980.0, sm_clock_min_mhz=1965.0),
            dict(base, config="b1", runtime="torch-cudagraph/cuda", sm_clock_mhz=735.0, sm_clock_min_mhz=675.0)]
    machine = {"cpu": "x", "cores": 2, "host": "vm", "os": "linux", "gpus": [], "versions": {}}
    md = report.markdown([dict(r, machine=machine) for r in recs], "t")
    assert "torch-cudagraph/cuda b1 host: timed at an SM clock of 735 MHz (median; min 675)" in md
    assert "vkml/vulkan:0 b1 host: timed at" not in md
