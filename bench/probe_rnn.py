"""LSTM and GRU recurrences on a Vulkan device (issue #15, the Silero-style VAD target): one-node
sessions (W, R, B initializers; X fed) over a grid of sequence lengths, batch sizes and hidden
sizes, timed per run (median host wall time of session.run) and, where the session profile
works, per dispatch on the GPU (timestamps around each dispatch: the projection GEMM, the R
transposition, the recurrence), so the recurrence's cost per time step reads directly.

    python bench/probe_rnn.py [--device vulkan:0] [--ops LSTM,GRU] [--seq 50,100] [--batch 1,8]
                              [--hidden 64,128,256] [--input 0] [--dtypes float32]
                              [--direction forward] [--runs 30] [--no-profile]
                              [--out bench/results/probe_rnn-<date>.jsonl]

One JSON line per (op, dtype, seq, batch, hidden) on stdout and in --out: median_s / min_s of a
run, us_per_step (median_s / seq), and, with the profile, gpu_s per dispatch label (summed per
run) and recurrence_us_per_step (the dispatch whose label starts with the op's shader name).
Each line also names the pipelines the session chose (shader, specialization constants: for
lstm_f32/f16, workgroup size, HMAX, k slices, partial sums, loop shape). --input 0 (the default)
makes the input size equal to the hidden size; --lstm-k-per-slice tunes vkml.kernels.lstm's
K_PER_SLICE (1073741824: one slice).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

GATES = {"LSTM": 4, "GRU": 3}


def _ints(s: str) -> list[int]:
    return [int(v) for v in s.split(",") if v]


def model(op: str, dtype, seq: int, batch: int, n_in: int, hidden: int, direction: str, seed: int = 0):
    """(ModelProto bytes, feed) of one op node: W, R, B initializers, X fed; outputs Y and Y_h."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    g = GATES[op]
    dirs = 2 if direction == "bidirectional" else 1
    scale = 1.0 / np.sqrt(hidden)

    def t(*shape):
        return (rng.uniform(-1, 1, shape) * scale).astype(dtype)

    x = rng.uniform(-1, 1, (seq, batch, n_in)).astype(dtype)
    inits = [numpy_helper.from_array(t(dirs, g * hidden, n_in), "W"),
             numpy_helper.from_array(t(dirs, g * hidden, hidden), "R"),
             numpy_helper.from_array(t(dirs, 2 * g * hidden), "B")]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node(op, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=hidden, direction=direction)
    graph = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("X", elem, x.shape)],
                              [helper.make_value_info("Y", onnx.TypeProto()),
                               helper.make_value_info("Y_h", onnx.TypeProto())], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=10)
    return m.SerializeToString(), {"X": x}


def probe_one(op: str, dtype: str, seq: int, batch: int, n_in: int, hidden: int, direction: str,
              device: str, runs: int, profile: bool) -> dict:
    import numpy as np

    import vkml

    from vkml.benchmarks import timing
    from vkml.kernels import lstm

    proto, feed = model(op, np.dtype(dtype).type, seq, batch, n_in, hidden, direction)
    row = {"probe": "rnn", "op": op, "dtype": dtype, "seq": seq, "batch": batch, "input": n_in,
           "hidden": hidden, "direction": direction, "device": device,
           **({"lstm_k_per_slice": getattr(lstm, "K_PER_SLICE", None)} if op == "LSTM" else {})}
    sess = vkml.InferenceSession(proto, devices=[device])
    placed = {r["device"] for r in sess.placement()}
    row["placement"] = sorted(placed)
    row["pipelines"] = [[p.get("shader"), p.get("spec")] for r in sess.placement() for p in r.get("pipelines") or ()]
    if placed != {device}:
        row["note"] = "not entirely on the device: " + json.dumps(sess.placement(), default=str)[:300]
    t = timing.measure(lambda s=sess: s.run(None, feed), runs + 3, 3, float("inf"), warm_s=0.0)
    med = t["median"]
    row.update(runs=runs, median_s=med, min_s=t["min"], us_per_step=med / seq * 1e6)
    del sess
    if profile:
        try:
            from vkml.benchmarks.profile import gpu_session_profile

            prof = gpu_session_profile(proto, feed, device, runs)
            disp = {k: s for k, (_, s) in prof["dispatch"].items()}
            row["gpu_s"] = disp
            rec = sum(s for k, s in disp.items() if k.split()[-1].startswith(f"{op.lower()}_")
                      and "prep" not in k)
            if rec:
                row["recurrence_us_per_step"] = rec / seq * 1e6
        except Exception as e:  # the profile is an extra: the timings above stand without it
            row["profile_error"] = f"{type(e).__name__}: {e}"[:300]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="vulkan:N (default: the preferred Vulkan device)")
    ap.add_argument("--ops", default="LSTM,GRU")
    ap.add_argument("--seq", default="50,100")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--hidden", default="64,128,256")
    ap.add_argument("--input", type=int, default=0, help="input size (0: the hidden size)")
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--direction", default="forward")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--no-profile", action="store_true", help="skip the per-dispatch GPU timestamps")
    ap.add_argument("--out", default=None)
    ap.add_argument("--lstm-k-per-slice", type=int, default=None,
                    help="tuning: override vkml.kernels.lstm.K_PER_SLICE (a huge value: one slice)")
    a = ap.parse_args(argv)
    if a.lstm_k_per_slice:
        from vkml.kernels import lstm

        lstm.K_PER_SLICE = a.lstm_k_per_slice

    device = a.device
    if device is None:
        import vkml.vulkan as vk

        device = f"vulkan:{vk.preferred_index()}"
    out = a.out or os.path.join(HERE, "results", f"probe_rnn-{datetime.date.today().isoformat()}.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "a") as f:
        for op in a.ops.split(","):
            for dtype in a.dtypes.split(","):
                for seq in _ints(a.seq):
                    for batch in _ints(a.batch):
                        for hidden in _ints(a.hidden):
                            row = probe_one(op.upper(), dtype, seq, batch, a.input or hidden, hidden, a.direction,
                                            device, a.runs, not a.no_profile)
                            line = json.dumps(row, default=str)
                            print(line, flush=True)
                            f.write(line + "\n")
                            f.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
