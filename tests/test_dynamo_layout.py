#!/usr/bin/python3
"""Exports in the torch.export-based exporter's layout (torch.onnx.export's
default since torch 2.9): module calls in node metadata, parameters and
buffers in the graph signature (models/onnx/dynamo/, written by
tests/zoo/dynamo_layout.py from the TorchScript training exports in
models/onnx/variants/; same ops, same model).

usage: test_dynamo_layout.py MEMEST ROOT MODEL|crafted

For MODEL's file, against PyTorch's truth (golden/truth/memory/MODEL.json,
tests/oracle/measure_memory.py) and the TorchScript export of the same
model:
  - params equal PyTorch's count (sum of p.numel() over model.parameters()):
    the signature says which stored tensors are buffers, which a TorchScript
    export cannot (whisper_encoder's sinusoidal table);
  - every module row of the TorchScript export's table is in the same
    place with the same module name, where TorchScript names it in full
    (it names a module below an uncalled container by the last called one,
    "wte" for transformer.wte: those rows must instead be the full name);
  - every measured cell (no_grad, grad, SGD and Adam steps 1-2; batches 1
    and 8; --runtime cpu) is no further from PyTorch than the TorchScript
    export's prediction (0.05 % slack for rounding), and within 2 % where
    that one is;
  - no parameter_or_buffer note (the file says).
Exit 1 on any failure."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from truth_loss import memest_loss  # noqa: E402

MEMEST, ROOT, MODEL = sys.argv[1], sys.argv[2], sys.argv[3]
TORCHSCRIPT = {"llama_like": "llama_like__op14_train_dynamic.onnx"}.get(MODEL, MODEL + "__op13_train_dynamic.onnx")
MODES = {"infer_nograd": [], "infer_grad": ["--grad"], "train_sgd": ["--train", "--optimizer", "sgd"],
         "train_adam": ["--train", "--optimizer", "adam"]}
SLACK, TOL = 0.0005, 0.02
fails = []


def memest(path, extra):
    r = subprocess.run([MEMEST, path, "--runtime", "cpu", "--format", "json"] + extra, capture_output=True, text=True)
    if r.returncode:
        fails.append("%s %s: exit %d: %s" % (os.path.basename(path), " ".join(extra), r.returncode, r.stderr.strip()[-300:]))
        return None
    return json.loads(r.stdout)


def crafted():
    """A small file written here in the layout, stdlib only: x [B, 4, 16]
    through fc1 (MatMul), an added position table that the signature calls a
    BUFFER, act (Relu), fc2, act again (the module's second call), an Identity
    without metadata (a node the exporter's passes added) and a Relu whose
    stack has no root (an FX node without nn_module_stack). The rows must
    be fc1, act, fc2, act_1, then two ops of the root forward; the buffer no
    parameter and no parameter_or_buffer note."""
    import tempfile
    import onnx_craft as c

    def meta(n, scopes):
        return n + c.f_bytes(9, c.f_bytes(1, "pkg.torch.onnx.name_scopes") + c.f_bytes(2, repr(scopes)))
    nodes = [meta(c.node("MatMul", ["x", "fc1.weight"], ["mm"], "node_matmul"), ["", "fc1", "matmul"]),
             meta(c.node("Add", ["mm", "pos"], ["h"], "node_add"), ["", "add"]),
             meta(c.node("Relu", ["h"], ["r"], "node_relu"), ["", "act", "relu"]),
             meta(c.node("MatMul", ["r", "fc2.weight"], ["mm2"], "node_matmul_1"), ["", "fc2", "matmul_1"]),
             meta(c.node("Relu", ["mm2"], ["r2"], "node_relu_1"), ["", "act", "relu_1"]),
             c.node("Identity", ["r2"], ["i"], "node_Identity_7"),
             meta(c.node("Relu", ["i"], ["y"], "node_relu_2"), ["relu_2"])]
    inits = [c.tensor("fc1.weight", [16, 16], raw=bytes(1024)), c.tensor("fc2.weight", [16, 16], raw=bytes(1024)),
             c.tensor("pos", [4, 16], raw=bytes(256))]
    g = c.graph(nodes, [c.value_info("x", ["batch", 4, 16])], [c.value_info("y", ["batch", 4, 16])], inits)
    sig = "# inputs\np_fc1_weight: PARAMETER target='fc1.weight'\np_fc2_weight: PARAMETER target='fc2.weight'\n" \
          "b_pos: BUFFER target='pos' persistent=True\nx: USER_INPUT\n\n# outputs\nrelu_2: USER_OUTPUT\n"
    m = c.model(g) + c.f_bytes(14, c.f_bytes(1, "pkg.torch.export.ExportedProgram.graph_signature") + c.f_bytes(2, sig))
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "crafted.onnx")
        open(f, "wb").write(m)
        d = memest(f, ["--batch", "2"])
    if d:
        names = [r["name"] for r in d["layers"]]
        want = ["fc1", "/add", "act", "fc2", "act_1", "/node_Identity_7", "/relu_2"]
        if names != want:
            fails.append("rows %s, want %s" % (names, want))
        if d["totals"]["params"] != 512:
            fails.append("params %d, want 512 (the buffer is none)" % d["totals"]["params"])
        if any(n["code"] == "parameter_or_buffer" for n in d.get("notes", [])):
            fails.append("a parameter_or_buffer note for a listed buffer")
    for f in fails:
        print("FAIL crafted", f)
    print("dynamo layout crafted: %d failure(s)" % len(fails))
    sys.exit(1 if fails else 0)


if MODEL == "crafted":
    crafted()
dyn = os.path.join(ROOT, "models", "onnx", "dynamo", MODEL + ".onnx")
ts = os.path.join(ROOT, "models", "onnx", "variants", TORCHSCRIPT)
truth = json.load(open(os.path.join(ROOT, "golden", "truth", "memory", MODEL + ".json")))

d, t = memest(dyn, []), memest(ts, [])
if d and t:
    if d["totals"]["params"] != truth["params"]:
        fails.append("params %d, PyTorch %d" % (d["totals"]["params"], truth["params"]))
    codes = [n["code"] for n in d.get("notes", [])]
    if "parameter_or_buffer" in codes:
        fails.append("a parameter_or_buffer note, where the graph signature says which")
    if len(d["layers"]) != len(t["layers"]):
        fails.append("%d table rows, the TorchScript export %d" % (len(d["layers"]), len(t["layers"])))
    moved = 0
    for a, b in zip(t["layers"], d["layers"]):
        if a["name"].startswith("/"):
            continue  # an op of the model's own forward: named by its node
        if a["name"] != b["name"] and not b["name"].endswith("." + a["name"]):
            fails.append("row of %s (%s) is %s here" % (a["name"], a["op"], b["name"]))
            moved += 1
            if moved > 5:
                break

for b, cells in truth["batches"].items():
    for mode, extra in MODES.items():
        if mode not in cells:
            continue
        loss = ["--loss", memest_loss(truth.get("loss"))] if mode.startswith("train") else []
        args = ["--batch", b] + extra + loss
        d, t = memest(dyn, args), memest(ts, args)
        if not d or not t:
            continue
        meas = [cells[mode]["step1"]["peak"], cells[mode]["step2"]["peak"]] if mode.startswith("train") else [cells[mode]["peak"]]
        for k, m in enumerate(meas):
            ed = (d["memory"]["steps"][k]["peak"] - m) / m
            et = (t["memory"]["steps"][k]["peak"] - m) / m
            ok = abs(ed) <= abs(et) + SLACK and (abs(ed) <= TOL or abs(et) > TOL)
            print("%s b%s %s step %d: %+.2f %% (TorchScript export %+.2f %%)%s" % (MODEL, b, mode, k + 1, 100 * ed, 100 * et,
                                                                                  "" if ok else "  FAIL"))
            if not ok:
                fails.append("b%s %s step %d: %+.2f %% from PyTorch, the TorchScript export %+.2f %%" % (b, mode, k + 1, 100 * ed, 100 * et))

for f in fails:
    print("FAIL", MODEL, f)
print("dynamo layout %s: %d failure(s)" % (MODEL, len(fails)))
sys.exit(1 if fails else 0)
