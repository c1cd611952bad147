"""fork() after a GPU session ran (issue #17): in the child, the parent's session raises a clear
RuntimeError at once (GPU state does not survive fork; touching the parent's devices hung), a
session made in the child opens the devices afresh and answers like the parent, and
multiprocessing's fork pool does the same in its workers. Each scenario runs in a subprocess
whose timeout is the hang detector."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import glob, os, sys
import numpy as np
import vkml
MODEL = glob.glob(os.path.join({root!r}, "vkml", "data", "*.onnx"))[0]
def session():
    s = vkml.InferenceSession(MODEL, devices=[{gpu!r}])
    name = s.get_inputs()[0].name
    x = np.linspace(0, 1, 64, dtype=np.float32).reshape(1, 1, 8, 8)
    return s, {{name: x}}
"""


def _run(gpu: str, body: str, tmp_path) -> str:
    script = tmp_path / "scenario.py"  # (a file: 'spawn' workers import the main module)
    script.write_text(textwrap.dedent(PRELUDE.format(root=ROOT, gpu=gpu)) + textwrap.dedent(body))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_forked_child_gets_an_error_then_a_fresh_session_works(gpu, tmp_path):
    out = _run(gpu, """
        s, feed = session()
        want = s.run(None, feed)[0]
        s.run(None, feed)  # (a repeated signature: later runs take the C shortcut, which must fail too)
        print("SHORTCUT", s._gpu.shortcut is not None and s.run(None, feed) is not None, flush=True)
        pid = os.fork()
        if pid == 0:
            try:
                s.run(None, feed)
                print("OLD RAN")
            except RuntimeError as e:
                print("OLD ERROR", "fork" in str(e) and "spawn" in str(e))
            s2, feed2 = session()
            print("NEW EQUAL", bool(np.array_equal(s2.run(None, feed2)[0], want)), flush=True)
            os._exit(0)  # as multiprocessing's children do (lavapipe's own exit handler joins the
                         # parent's threads and crashes in a child that exits through atexit)
        _, status = os.waitpid(pid, 0)
        print("CHILD STATUS", status)
        print("PARENT EQUAL", bool(np.array_equal(s.run(None, feed)[0], want)))
    """, tmp_path)
    assert "OLD ERROR True" in out, out
    assert "SHORTCUT True" in out, out
    assert "NEW EQUAL True" in out, out
    assert "CHILD STATUS 0" in out, out
    assert "PARENT EQUAL True" in out, out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() here")
def test_multiprocessing_fork_pool(gpu, tmp_path):
    out = _run(gpu, """
        import multiprocessing as mp
        s, feed = session()
        want = s.run(None, feed)[0]

        def old(_):
            try:
                s.run(None, feed)
                return "ran"
            except RuntimeError:
                return "error"

        def new(_):
            s2, feed2 = session()
            return bool(np.array_equal(s2.run(None, feed2)[0], want))

        with mp.get_context("fork").Pool(2) as pool:
            print("OLD", sorted(set(pool.map(old, range(4)))))
            print("NEW", all(pool.map(new, range(4))))
        print("PARENT", bool(np.array_equal(s.run(None, feed)[0], want)))
    """, tmp_path)
    assert "OLD ['error']" in out and "NEW True" in out and "PARENT True" in out, out


def test_a_session_travels_to_a_spawned_worker(gpu, tmp_path):
    """The documented multiprocessing recipe: 'spawn' workers, the session pickled as its
    model and options, rebuilt (its own devices) in the worker."""
    out = _run(gpu, """
        import multiprocessing as mp

        def work(args):
            sess, feed = args
            return sess.run(None, feed)[0], sess.devices

        if __name__ == "__main__":
            s, feed = session()
            want = s.run(None, feed)[0]
            with mp.get_context("spawn").Pool(1) as pool:
                got, devices = pool.apply(work, ((s, feed),))
            print("SPAWN EQUAL", bool(np.array_equal(got, want)), devices)
    """, tmp_path)
    assert "SPAWN EQUAL True" in out, out
