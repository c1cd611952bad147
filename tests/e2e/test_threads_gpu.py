"""Many threads on one session with GPU chunks and CPU nodes: 16 threads x 100 runs, two input
shapes (two concrete plans), a split placement (uploads, readbacks, CPU units), all correct,
and never more run slots than allowed; driven by the scheduler (GPU waits on the waiter
thread) and sequentially on the calling threads."""
import threading

import numpy as np
import pytest

import vkml
from _models import mlp, node_names

THREADS, RUNS = 16, 100


@pytest.mark.parametrize("executor", ["parallel", "sequential"])
def test_threads_share_one_session(gpu, executor):
    model = mlp()
    names = node_names(model)
    sess = vkml.InferenceSession(model, devices=[gpu], placement={names[2]: "cpu"}, max_slots=3,
                                 executor=executor)
    ref = vkml.InferenceSession(model)
    rng = np.random.default_rng(0)
    cases = []
    for k in range(8):
        x = rng.standard_normal((3 if k % 2 else 5, 16)).astype(np.float32)
        cases.append((x, ref.run(None, {"x": x})[0]))
    errors: list[str] = []
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        start.wait()
        for i in range(RUNS):
            x, want = cases[(t + i) % len(cases)]
            try:
                got = sess.run(None, {"x": x})[0]
                if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                    errors.append(f"thread {t} run {i}: max error {np.abs(got - want).max()}")
            except Exception as e:  # pragma: no cover - reported below
                errors.append(f"thread {t} run {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads), "runs hung"
    assert not errors, errors[:5]
    plans = list(sess._gpu._plans.values())
    assert len(plans) == 2 and all(1 <= p.pool.size <= 3 for p in plans)
    assert any(r["device"] == gpu for r in sess.placement())
