"""onnx's backend conformance suites run over vkml: node, simple, pytorch-converted,
pytorch-operator (onnx 1.23.2 generates the node cases in memory). The skip list with one reason
per entry lives in skips.py; conftest.py prints the tally and enforces the node-suite bar."""
import onnx.backend.test

from vkml import backend

from .skips import SKIPS

_bt = onnx.backend.test.BackendTest(backend, __name__)
for _pattern in SKIPS:
    _bt.exclude(_pattern)
globals().update(_bt.test_cases)
