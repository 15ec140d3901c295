#!/usr/bin/python3
"""F.scaled_dot_product_attention as torch >= 2.0 exports it, and the
torch a file says it was written by (src/canon/sdpa.c, memest_model_torch).

Two files of one attention layer are written here (stdlib only,
tests/onnx_craft.py): x [B, 128, 64] through q, k, v projections, viewed
to 4 heads [B, 4, 128, 16]; then
  sdpa   the spelling of torch/onnx/symbolic_opset14.py's
         scaled_dot_product_attention (torch 2.x):
         scale = 1 / sqrt(Shape(q)[-1]), Mul(q, Sqrt(scale)),
         Mul(Transpose(k), Sqrt(scale)), MatMul, Softmax, MatMul with v;
  torchlib  the torch.export-based exporter's (onnxscript's torch_lib
         nn.py): k^T by Reshape [-1, S, E], Transpose and Reshape back,
         Sqrt(scale) through CastLike, and with a bool mask a
         Where(IsNaN(w), 0, w) after the softmax;
  eager  the same layer written out by hand (q @ k^T * scale, softmax, @ v),
         as torch 1.13 exports a forward that does so;
sdpa and torchlib also with a bool mask [B, 1, T, T] (Where to a float
mask, added to the scores); onnx23 the call as ONNX's Attention node
(opset 23, what torch.onnx writes there without dropout);
then the heads merged and an output projection.

Checked (each fails on a memest without the rule):
  call     the sdpa file carries the "sdpa" note, runs as torch 2 without
           --torch (memory.torch "2"), and with --torch 1.13 exits 2
           naming the call's module: 1.13 has no such function;
  scores   the one kernel makes no [B, H, T, T] scores: under no_grad
           (--runtime cpu, batch 8) its peak is at least the scores' 2 MiB
           below the eager file's, and with autograd on (--grad) the
           scores' softmax is not kept: 4 MiB below (the eager timeline
           keeps the softmax's output and the scaled scores' input);
  torchlib each torchlib file, and the onnx23 file, gives the peaks of
           the sdpa file with the same mask (no_grad, --grad, Adam; CPU and
           CUDA) within 4 KiB (the spelled-out scale is a few one-element
           tensors, 512 B blocks on CUDA);
  version  the eager file with producer_version 2.4.0 carries the
           "torch_version" note and gives exactly what --torch 2 gives
           (Adam on CUDA: torch 2's default foreach path), and --torch
           1.13 still gives 1.13's; with 1.13.0 as producer, nothing
           changes.
Exit 1 on any failure."""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as c  # noqa: E402

MEMEST = sys.argv[1]
B, T, E, H = 8, 128, 64, 4
HD = E // H
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
        print("FAIL:", msg)


def f32(v):
    return struct.pack("<f", v)


def layer(spelling, producer=None, mask=False):
    w = lambda n: c.tensor(n, [E, E], raw=bytes(4 * E * E))  # noqa: E731
    inits = [w("attn.q.weight"), w("attn.k.weight"), w("attn.v.weight"), w("attn.o.weight"),
             c.tensor("heads", [4], c.INT64, raw=c.int64_raw([0, T, H, HD])),
             c.tensor("merged", [3], c.INT64, raw=c.int64_raw([0, T, E])),
             c.tensor("one", [], raw=f32(1.0)), c.tensor("scale_c", [], raw=f32(HD ** -0.5)),
             c.tensor("last_s", [1], c.INT64, raw=c.int64_raw([-1])),
             c.tensor("last_e", [1], c.INT64, raw=c.int64_raw([2 ** 62])),
             c.tensor("zero", [], raw=f32(0.0)), c.tensor("ninf", [], raw=f32(-3.4e38)),
             c.tensor("k3", [3], c.INT64, raw=c.int64_raw([-1, T, HD])),
             c.tensor("k4", [4], c.INT64, raw=c.int64_raw([-1, H, HD, T]))]
    n = c.node
    nodes = []
    for p in "qkv":
        nodes += [n("MatMul", ["x", "attn.%s.weight" % p], [p + "_p"], "/attn/%s/MatMul" % p),
                  n("Reshape", [p + "_p", "heads"], [p + "_r"], "/attn/Reshape_" + p),
                  n("Transpose", [p + "_r"], [p + "h"], "/attn/Transpose_" + p, [c.attr_ints("perm", [0, 2, 1, 3])])]
    if spelling == "torchlib":
        # nn.py _aten_scaled_dot_product_attention_*_onnx: kᵀ through [-1, S, E],
        # k's Sqrt(scale) through CastLike, a bool mask's NaN guard after the softmax
        nodes += [n("Reshape", ["kh", "k3"], ["k3d"], "/attn/Reshape_k3"),
                  n("Transpose", ["k3d"], ["k3t"], "/attn/Transpose_k3", [c.attr_ints("perm", [0, 2, 1])]),
                  n("Reshape", ["k3t", "k4"], ["kt"], "/attn/Reshape_k4")]
    elif spelling != "onnx23":
        nodes.append(n("Transpose", ["kh"], ["kt"], "/attn/Transpose_kt", [c.attr_ints("perm", [0, 1, 3, 2])]))
    if spelling == "onnx23":  # ONNX's Attention (opset 23), which torch.onnx writes for SDPA at opset 23
        nodes.append(n("Attention", ["qh", "kh", "vh", "mask"] if mask else ["qh", "kh", "vh"], ["ctx"], "/attn/Attention"))
    if spelling in ("sdpa", "torchlib"):
        # scale = 1 / sqrt(q's last dim) (_attention_scale: a Slice and a Cast in
        # symbolic_opset14.py, a Gather and a CastLike in torchlib), then q and kᵀ
        # each times Sqrt(scale) (torchlib casts k's like kᵀ)
        lib = spelling == "torchlib"
        nodes += [n("Shape", ["qh"], ["qs"], "/attn/Shape"),
                  n("Gather", ["qs", "last_s"], ["ql"], "/attn/Gather") if lib else
                  n("Slice", ["qs", "last_s", "last_e"], ["ql"], "/attn/Slice"),
                  n("CastLike", ["ql", "qh"], ["qf"], "/attn/CastLike") if lib else
                  n("Cast", ["ql"], ["qf"], "/attn/Cast", [c.attr_int("to", c.FLOAT)]),
                  n("Sqrt", ["qf"], ["qsq"], "/attn/Sqrt"),
                  n("Div", ["one", "qsq"], ["scale"], "/attn/Div"),
                  n("Sqrt", ["scale"], ["s1"], "/attn/Sqrt_1"),
                  n("Mul", ["qh", "s1"], ["q_s"], "/attn/Mul"),
                  n("Sqrt", ["scale"], ["s2r" if lib else "s2"], "/attn/Sqrt_2")]
        if lib:
            nodes.append(n("CastLike", ["s2r", "kt"], ["s2"], "/attn/CastLike_1"))
        nodes += [n("Mul", ["kt", "s2"], ["k_s"], "/attn/Mul_1"),
                  n("MatMul", ["q_s", "k_s"], ["scores"], "/attn/MatMul")]
    elif spelling == "eager":
        nodes += [n("MatMul", ["qh", "kt"], ["qk"], "/attn/MatMul"),
                  n("Mul", ["qk", "scale_c"], ["scores"], "/attn/Mul")]
    sm_in, probs = "scores", "probs"
    if spelling == "onnx23":
        pass
    elif mask:  # a bool mask made a float one (Where), added to the scores
        nodes += [n("Where", ["mask", "zero", "ninf"], ["fmask"], "/attn/Where_mask"),
                  n("Add", ["scores", "fmask"], ["masked"], "/attn/Add")]
        sm_in = "masked"
    if spelling != "onnx23":
        nodes.append(n("Softmax", [sm_in], ["probs0" if mask and spelling == "torchlib" else probs], "/attn/Softmax",
                       [c.attr_int("axis", -1)]))
    if mask and spelling == "torchlib":
        nodes += [n("IsNaN", ["probs0"], ["nan"], "/attn/IsNaN"),
                  n("Where", ["nan", "zero", "probs0"], [probs], "/attn/Where_nan")]
    if spelling != "onnx23":
        nodes.append(n("MatMul", [probs, "vh"], ["ctx"], "/attn/MatMul_1"))
    nodes += [
              n("Transpose", ["ctx"], ["ctx_t"], "/attn/Transpose_o", [c.attr_ints("perm", [0, 2, 1, 3])]),
              n("Reshape", ["ctx_t", "merged"], ["ctx_m"], "/attn/Reshape_o"),
              n("MatMul", ["ctx_m", "attn.o.weight"], ["y"], "/attn/o/MatMul")]
    ins = [c.value_info("x", ["batch", T, E])] + ([c.value_info("mask", ["batch", 1, T, T], 9)] if mask else [])
    g = c.graph(nodes, ins, [c.value_info("y", ["batch", T, E])], inits)
    m = c.model(g, {"torchlib": 18, "onnx23": 23}.get(spelling, 14))
    if producer:
        m += c.f_bytes(2, "pytorch") + c.f_bytes(3, producer)
    return m


def run(path, extra):
    r = subprocess.run([MEMEST, path, "--format", "json", "--batch", str(B)] + extra, capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else None), r.stderr


def peak(d):
    return d["memory"]["steps"][0]["peak"]


with tempfile.TemporaryDirectory() as tmp:
    files = {}
    for name, spelling, producer, mask in (("sdpa", "sdpa", None, False), ("eager", "eager", None, False),
                                           ("eager2", "eager", "2.4.0", False), ("eager113", "eager", "1.13.0", False),
                                           ("torchlib", "torchlib", None, False), ("sdpa_mask", "sdpa", None, True),
                                           ("torchlib_mask", "torchlib", None, True), ("onnx23", "onnx23", "2.9.0", False)):
        files[name] = os.path.join(tmp, name + ".onnx")
        open(files[name], "wb").write(layer(spelling, producer, mask))

    # call
    rc, d, err = run(files["sdpa"], ["--runtime", "cpu"])
    check(rc == 0, "sdpa file: exit %d: %s" % (rc, err[-300:]))
    if d:
        check(any(x["code"] == "sdpa" for x in d.get("notes", [])), "sdpa file: no sdpa note")
        check(d["memory"].get("torch") == "2", "sdpa file: memory.torch %r, want '2'" % d["memory"].get("torch"))
    check("scaled_dot_product_attention" in err, "sdpa file: stderr does not name the call")
    rc, _, err = run(files["sdpa"], ["--runtime", "cpu", "--torch", "1.13"])
    check(rc == 2 and "'attn'" in err and "torch 1.13" in err,
          "--torch 1.13 on the sdpa file: exit %d, stderr %r (want 2 naming the call's module)" % (rc, err[-300:]))

    # scores
    scores = B * H * T * T * 4
    for mode, extra, want in (("no_grad", [], scores), ("grad", ["--grad"], 2 * scores)):
        rc1, s, _ = run(files["sdpa"], ["--runtime", "cpu"] + extra)
        rc2, e, _ = run(files["eager"], ["--runtime", "cpu"] + extra)
        if s and e:
            gap = peak(e) - peak(s)
            print("%s: eager %.2f MiB, sdpa %.2f MiB, gap %.2f MiB (scores %.2f MiB)" %
                  (mode, peak(e) / 2 ** 20, peak(s) / 2 ** 20, gap / 2 ** 20, scores / 2 ** 20))
            check(gap >= want, "%s: the sdpa file is %d B below the eager one, want >= %d" % (mode, gap, want))
        else:
            check(False, "%s: exit %d / %d" % (mode, rc1, rc2))

    # torchlib: the same call, the same figures, with and without a mask
    for a_, b_ in (("sdpa", "torchlib"), ("sdpa_mask", "torchlib_mask"), ("sdpa", "onnx23")):
        for extra in ([], ["--grad"], ["--train", "--optimizer", "adam", "--loss", "mse"]):
            for rt in ("cpu", "cuda"):
                rc1, x, e1 = run(files[a_], ["--runtime", rt] + extra)
                rc2, y, e2 = run(files[b_], ["--runtime", rt] + extra)
                check(rc1 == 0 and rc2 == 0, "%s/%s %s: exit %d/%d %s" % (a_, b_, extra, rc1, rc2, (e1 + e2)[-300:]))
                if x and y:
                    px, py = [s["peak"] for s in x["memory"]["steps"]], [s["peak"] for s in y["memory"]["steps"]]
                    check(len(px) == len(py) and all(abs(u - w) <= 4096 for u, w in zip(px, py)) and
                          (b_ == "onnx23" or any(z["code"] == "sdpa" for z in y.get("notes", []))),
                          "%s vs %s %s %s: peaks %s and %s" % (a_, b_, rt, " ".join(extra), px, py))

    # version
    adam = ["--runtime", "cuda", "--train", "--optimizer", "adam", "--loss", "mse"]
    rc, a, err = run(files["eager2"], adam)
    rc2, b2, _ = run(files["eager"], adam + ["--torch", "2"])
    rc3, b1, _ = run(files["eager2"], adam + ["--torch", "1.13"])
    rc4, o, _ = run(files["eager113"], adam)
    rc5, p, _ = run(files["eager"], adam)
    check(rc == rc2 == rc3 == rc4 == rc5 == 0, "version: exits %d %d %d %d %d" % (rc, rc2, rc3, rc4, rc5))
    if a and b2 and b1 and o and p:
        check(any(x["code"] == "torch_version" for x in a.get("notes", [])), "producer 2.4.0: no torch_version note")
        check("2.4.0" in err, "producer 2.4.0: stderr does not name it")
        check(a["memory"] == b2["memory"], "producer 2.4.0 without --torch differs from --torch 2")
        check(a["memory"].get("torch") == "2" and b1["memory"].get("torch") is None,
              "torch: %r with the producer, %r with --torch 1.13" % (a["memory"].get("torch"), b1["memory"].get("torch")))
        check(b1["memory"] == p["memory"], "producer 2.4.0 with --torch 1.13 differs from a file with no producer")
        check(o["memory"] == p["memory"] and not any(x["code"] == "torch_version" for x in o.get("notes", [])),
              "producer 1.13.0 changed something")
        check(a["memory"].get("optimizer_impl") == "foreach" and b1["memory"].get("optimizer_impl") is None,
              "Adam on CUDA: update path %r with the producer, %r with --torch 1.13 (want foreach, 1.13's single)" %
              (a["memory"].get("optimizer_impl"), b1["memory"].get("optimizer_impl")))

print("sdpa export: %d failure(s)" % len(fails))
sys.exit(1 if fails else 0)
