"""docs/api.md is generated from the code (tools/api_reference.py): it must be what the tool
writes now, and every public name it documents must have a docstring of its own."""
from __future__ import annotations

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "api_reference.py")
API_MD = os.path.join(ROOT, "docs", "api.md")


def _tool():
    spec = importlib.util.spec_from_file_location("api_reference", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_api_md_is_current():
    want = _tool().render()
    with open(API_MD, encoding="utf-8") as f:
        have = f.read()
    assert have == want, ("docs/api.md is not what tools/api_reference.py generates from the code now: "
                          "run `.venv/bin/python tools/api_reference.py` and commit docs/api.md")


def test_every_public_name_has_a_docstring():
    tool = _tool()
    _, items = tool.collect()
    documented = {it.name for it in tool.walk(items)}
    # What the reference covers: every name of vkml.__all__, the session's and the tensor's
    # methods, the onnxruntime option classes and the onnx.backend entry points.
    import vkml

    for name in vkml.__all__:
        assert f"vkml.{name}" in documented, name
    for name in ("vkml.InferenceSession.run", "vkml.InferenceSession.run_batch", "vkml.InferenceSession.placement",
                 "vkml.Tensor.from_numpy", "vkml.Tensor.numpy", "vkml.SessionOptions", "vkml.RunOptions",
                 "vkml.backend.prepare", "vkml.backend.run_model", "vkml.backend.supports_device"):
        assert name in documented, name
    missing = [it.name for it in tool.walk(items) if not it.doc.strip()]
    assert not missing, f"public names without a docstring (say what each is for, then run the tool): {missing}"
