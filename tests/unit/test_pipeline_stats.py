"""vkml/vulkan/pipeline_stats.py: pipeline statistics as one line and as JSON rows (no device)."""
from __future__ import annotations

import json
from types import SimpleNamespace

from vkml.vulkan import pipeline_stats as ps

ONE = [{"name": "Compute Shader", "description": "", "subgroup_size": 32,
        "stats": {"Register Count": 40, "Local Memory Size (bytes)": 0, "Occupancy": 0.625, "Spills": False}}]


def test_stat_key():
    assert ps.stat_key("Register Count") == "register_count"
    assert ps.stat_key("Local Memory Size (bytes)") == "local_memory_size_bytes"
    assert ps.stat_key("SGPRs") == "sgprs" and ps.stat_key("  ") == "?"


def test_format_value():
    assert [ps.format_value(v) for v in (True, False, 7, -3, 0.625, 1234567.0)] == [
        "yes", "no", "7", "-3", "0.625", "1.235e+06"]


def test_compact():
    assert ps.compact(ONE) == "register_count=40 local_memory_size_bytes=0 occupancy=0.625 spills=no"
    two = ONE + [{"name": "Fragment", "description": "", "subgroup_size": 32, "stats": {}}]
    assert ps.compact(two) == ("Compute Shader: register_count=40 local_memory_size_bytes=0 occupancy=0.625 "
                               "spills=no | Fragment: -")
    assert ps.compact([]) == "-"


def test_rows_keep_the_prefix_and_are_json():
    pipes = [SimpleNamespace(shader="matmul_f32", spec=(256, 1), statistics=lambda: ONE),
             SimpleNamespace(shader="relu_f32", spec=(), statistics=lambda: [])]
    rows = ps.rows(pipes, prefix="matmul")
    assert rows == [{"shader": "matmul_f32", "spec": [256, 1], "executables": ONE}]
    assert json.loads(json.dumps(rows)) == rows
    assert len(ps.rows(pipes)) == 2
