"""Many threads on one session with GPU chunks and CPU nodes: 16 threads x 100 runs, two input
shapes (two concrete plans), a split placement (uploads, readbacks, CPU units), all correct,
and never more run slots than allowed; driven by the scheduler (GPU waits on the waiter
thread) and sequentially on the calling threads."""

import numpy as np
import pytest

import vkml
from _models import mlp, node_names
from _threads import hammer

THREADS, RUNS = 16, 100


@pytest.mark.parametrize("executor", ["parallel", "sequential"])
def test_threads_share_one_session(gpu, executor):
    model = mlp()
    names = node_names(model)
    sess = vkml.InferenceSession(model, devices=[gpu], placement={names[2]: "cpu"}, max_slots=3,
                                 executor=executor)
    ref = vkml.InferenceSession(model, devices=["cpu"])
    rng = np.random.default_rng(0)
    cases = []
    for k in range(8):
        x = rng.standard_normal((3 if k % 2 else 5, 16)).astype(np.float32)
        cases.append((x, ref.run(None, {"x": x})[0]))
    errors = hammer(sess, cases, THREADS, RUNS)
    assert not errors, errors[:5]
    plans = list(sess._gpu._plans.values())
    assert len(plans) == 2 and all(1 <= p.pool.size <= 3 for p in plans)
    assert any(r["device"] == gpu for r in sess.placement())
