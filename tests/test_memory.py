#!/usr/bin/env python3
"""Predicted peak memory against PyTorch's measured peak (golden/truth/memory,
made by tests/oracle/measure_memory.py on this CPU with Debian's torch).

usage: test_memory.py MEMEST SOURCE_ROOT MODEL [--table] [--modes MODE,...] [--dropped N]

Each (batch, mode) must be within 3 % or 1 MiB, whichever is larger (a
held-out, strided or backward toy: 0.5 % or 4 KiB); the
runtime profile is 'cpu' because the truth was measured on a CPU. A mode of
the truth file this driver does not know is an error, not a skip, and memest
must report one step per measured step (two for training, one otherwise;
--grad reports two calls, the first is the measured one).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth_loss import memest_cpu_isa, memest_loss  # noqa: E402

MEMEST, ROOT, MODEL = sys.argv[1], sys.argv[2], sys.argv[3]
TABLE = "--table" in sys.argv
# --modes: only these oracle modes (a model whose other modes are open)
ONLY = set(sys.argv[sys.argv.index("--modes") + 1].split(",")) if "--modes" in sys.argv else None
# --dropped N: the module holds N fp32 parameters the file lacks (a layer
# whose result nothing reads, which torch.onnx leaves out of the graph)
DROPPED = 4 * int(sys.argv[sys.argv.index("--dropped") + 1]) if "--dropped" in sys.argv else 0
TOL, FLOOR = 0.03, 1 << 20

# model -> (graph file, loss); graph files keep BatchNorm (training export)
GRAPHS = {
    "seed_seq": ("models/seed_sequential.json", "mean"),
    "resmlp100": ("models/resmlp100.json", "cross-entropy"),
}
# oracle mode -> (optimizer, extra memest options)
TRAIN_MODES = {
    "train_sgd": ("sgd", []),
    "train_sgd_momentum": ("momentum", []),
    "train_adam": ("adam", []),
    "train_sgd_inputgrad": ("sgd", ["--input-grad"]),
    # torch.utils.checkpoint.checkpoint_sequential(blocks, segments=10)
    "train_sgd_ckpt10": ("sgd", ["--input-grad", "--checkpoint", "10"]),
    # torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss
    "train_sgd_amp_bf16": ("sgd", ["--amp", "bf16"]),
    "train_adam_amp_bf16": ("adam", ["--amp", "bf16"]),
}
# oracle mode -> (memest's memory.mode, extra options)
INFER_MODES = {"infer_nograd": ("infer", []), "infer_grad": ("infer_grad", ["--grad"])}
# entries of a batch that are facts about the model, not a measured mode
NOT_MODES = {"saved_for_backward"}
# train_*_freeze: the oracle's FREEZE (tests/oracle/measure_memory.py) as
# memest --freeze patterns over module names
FREEZE = {
    "resnet18": ["conv1", "bn1", "layer1", "layer2"],
    "resmlp100": ["[0-9].*", "[1-4][0-9].*"],  # blocks 0..49
}
for _m, _opt in (("train_sgd_freeze", "sgd"), ("train_adam_freeze", "adam")):
    TRAIN_MODES[_m] = (_opt, [a for pat in FREEZE.get(MODEL, []) for a in ("--freeze", pat)])


def graph_for(model, truth):
    if model in GRAPHS:
        return GRAPHS[model]
    if model.startswith("ho"):  # a held-out export, checked since it was seen (tests/heldout)
        return os.path.join("models", "onnx", "heldout", model + ".onnx"), None
    if model.startswith("sg_"):  # tests/oracle/measure_strided_grad.py
        return os.path.join("models", "onnx", "strided", model + ".onnx"), None
    if model.startswith("bw_"):  # tests/oracle/measure_split.py
        return os.path.join("models", "onnx", "backward", model + ".onnx"), None
    f = os.path.join("models", "onnx", "zoo", model + ".onnx")
    return f, None


def run(f, spec, batch, extra):
    """memest's memory report: (memory.mode, each step's peak)."""
    args = [MEMEST, os.path.join(ROOT, f), *spec, "--batch", str(batch), "--runtime", "cpu", "--format", "json", *extra]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode:
        raise SystemExit(f"memest failed: {p.stderr}")
    mem = json.loads(p.stdout)["memory"]
    return mem["mode"], [s["peak"] for s in mem["steps"]]


def main():
    global TOL, FLOOR
    where = ("heldout" if MODEL.startswith("ho") else "strided" if MODEL.startswith("sg_")
             else "backward" if MODEL.startswith("bw_") else "memory")
    if where != "memory":  # small models: 0.5 %, no 1 MiB floor
        TOL, FLOOR = 0.005, 1 << 12
    truth = json.load(open(os.path.join(ROOT, "golden", "truth", where, MODEL + ".json")))
    f, loss = graph_for(MODEL, truth)
    spec = memest_cpu_isa(truth)
    for i in truth.get("inputs", []):
        if f.endswith(".onnx"):
            spec += ["--input", "%s=%s:%s" % (i["name"], "x".join(str(s) for s in i["shape"]), i.get("dtype", "float32"))]
    fails = 0
    rows = []
    n_modes = 0
    for b, modes in sorted(truth["batches"].items(), key=lambda kv: int(kv[0])):
        for mode, r in modes.items():
            if not isinstance(r, dict) or mode in NOT_MODES or (ONLY and mode not in ONLY):
                continue
            if mode in TRAIN_MODES:
                opt, extra = TRAIN_MODES[mode]
                l = loss or memest_loss(truth.get("loss"))
                want_mode, extra = "train", ["--train", "--optimizer", opt, "--loss", l, *extra]
                meas = [r["step1"]["peak"], r["step2"]["peak"]]
                labels = [mode + "/step1", mode + "/step2"]
            elif mode in INFER_MODES:
                want_mode, extra = INFER_MODES[mode]
                meas = [r["peak"]]
                labels = [mode]
            else:
                raise SystemExit(f"{MODEL}: batch {b}: mode '{mode}' of the truth file is unknown to test_memory.py")
            n_modes += 1
            got_mode, pred = run(f, spec, b, extra)
            if mode == "infer_grad":
                pred = pred[:1]  # the first call; the second, the loop's steady state, is test_issue10_bind.py's
            if got_mode != want_mode or len(pred) != len(meas):
                fails += 1
                print(f"{MODEL} b{b} {mode}: memest simulated mode '{got_mode}' with {len(pred)} step(s), "
                      f"expected '{want_mode}' with {len(meas)}: FAIL")
                continue
            for lab, p, m in zip(labels, pred, meas):
                err = (p - m) / m
                ok = abs(p - m) <= max(TOL * m, FLOOR)
                fails += not ok
                rows.append((MODEL, b, lab, m, p, err, ok))
    if not n_modes:
        fails += 1
        print(f"{MODEL}: the truth file has no measured mode: FAIL")
    # what the model holds before a step: PyTorch's parameters and buffers
    # (within 0.5 %: BatchNorm's int64 num_batches_tracked and Swin's int64
    # index tables are not in the file's data)
    if "params_bytes" in truth and "buffers_bytes" in truth and f.endswith(".onnx"):
        args = [MEMEST, os.path.join(ROOT, f), *spec, "--runtime", "cpu", "--format", "json"]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        w = json.loads(p.stdout)["memory"]["steps"][0]["at_peak"]["weights"] if p.returncode == 0 else -1
        want = truth["params_bytes"] + truth["buffers_bytes"] - DROPPED
        ok = abs(w - want) <= 0.005 * want
        fails += not ok
        print(f"{MODEL}: weights and buffers {w} B, PyTorch's parameters and buffers {want} B: {'ok' if ok else 'FAIL'}")
    for r in rows:
        print("%-14s b%-3s %-26s measured %9.2f MiB  predicted %9.2f MiB  %+6.2f%%  %s" %
              (r[0], r[1], r[2], r[3] / 2**20, r[4] / 2**20, 100 * r[5], "ok" if r[6] else "FAIL"))
    print(f"{MODEL}: {fails} failure(s)")
    sys.exit(1 if fails else 0)


main()
