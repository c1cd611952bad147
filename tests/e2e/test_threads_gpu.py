"""Many threads on one session with GPU chunks and CPU nodes: 16 threads x 100 runs, two input
shapes (two concrete plans), a split placement (uploads, readbacks, CPU units), all correct,
and never more run slots than allowed; driven by the scheduler (GPU waits on the waiter
thread) and sequentially on the calling threads."""

import numpy as np
import pytest

import vkml
from _models import mlp, node_names
from _threads import cpu_cases, hammer

THREADS, RUNS = 16, 100


@pytest.mark.parametrize("executor", ["parallel", "sequential"])
def test_threads_share_one_session(gpu, executor):
    model = mlp()
    names = node_names(model)
    sess = vkml.InferenceSession(model, devices=[gpu], placement={names[2]: "cpu"}, max_slots=3,
                                 executor=executor)
    rng = np.random.default_rng(0)
    cases = cpu_cases(model, [rng.standard_normal((3 if k % 2 else 5, 16)).astype(np.float32) for k in range(8)])
    errors = hammer(sess, cases, THREADS, RUNS)
    assert not errors, errors[:5]
    plans = list(sess._gpu._plans.values())
    assert len(plans) == 2 and all(1 <= p.pool.size <= 3 for p in plans)
    assert any(r["device"] == gpu for r in sess.placement())


def test_threads_with_waits_that_poll(gpu):
    """The same hammer with the GPU waits polling (VKML_WAIT_SPIN_US; lavapipe does not poll by
    default, so the other tests block at once): with a lone waiter polling up to 20 ms and the
    others at most 100 µs, every run is right and none hangs. In a fresh process, since a device
    reads the setting when it opens."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import vkml
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from _models import mlp
        from _threads import hammer
        model = mlp()
        sess = vkml.InferenceSession(model, devices=[{gpu!r}], max_slots=3)
        ref = vkml.InferenceSession(model, devices=["cpu"])
        rng = np.random.default_rng(1)
        cases = []
        for k in range(4):
            x = rng.standard_normal((2 + k, 16)).astype(np.float32)
            cases.append((x, ref.run(None, {{"x": x}})[0]))
        errors = hammer(sess, cases, 6, 40)
        assert not errors, errors[:5]
        np.testing.assert_allclose(sess.run(None, {{"x": cases[0][0]}})[0], cases[0][1], rtol=1e-5, atol=1e-5)
        print("POLLED-CLEAN")
    """)
    env = dict(os.environ, VKML_WAIT_SPIN_US="20000")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "POLLED-CLEAN" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
