"""Issue 10 (helper whisper): what a module's forward keeps bound in Python.
torch.onnx (1.13) names a scope for each module call only, so a ModuleList
its parent iterates (`for blk in self.h: x = blk(x)`) shows as "/h.0/..."
with no "/h/" of its own, where a called nn.Sequential shows
"/h/h.0/...". Two CPython facts follow (doc/memory.md, "Python holds"):
the loop's argument is re-bound when each block returns (x before block 0
dies after block 0, not after the whole list), and after the loop the name
still holds the last block's output until the iterating frame returns
(`return self.lm_head(self.ln_f(x))` keeps x through lm_head).

usage: test_issue10_whisper.py MEMEST SOURCE_ROOT CASE
  loop      crafted: the loop's result is held to the end of the frame that
            iterates the list; a called Sequential's result is not
  iter      crafted: the input of the first iteration dies when it returns
  stored    crafted: a value the frame reads after the next iteration ran
            (the UNet's skips list) lives until the frame returns
  truth     the zoo's exports against PyTorch's CPU peaks
            (golden/truth/memory, tests/oracle/measure_memory.py) within
            issue 10's 2 %: gpt2_tanh, llama_like, llama_tied
  attn_timm vit_timm_p8 (timm's Attention, a model the rule was not made
            from): no_grad within 0.5 % of PyTorch's CPU peaks
  unnamed   whisper_encoder: memest equals PyTorch's peak of the model as
            written, every name kept (golden/truth/whisper/unnamed.json's
            named_infer_nograd, tests/oracle/measure_whisper_unnamed.py):
            the attention's names q, k, v and w are held (canon/attn.c),
            and h, which the layer's q_proj, k_proj and v_proj each read,
            is a name (memory.c twice_read); the variant that deletes h
            after its last reader is what memest predicted before
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run_json  # noqa: E402
import onnx_craft as oc  # noqa: E402

N, BATCH = 16384, 4
UNIT = BATCH * N * 4  # one [BATCH, N] float tensor


def relu_chain(names):
    """x -> Relu -> ... -> out, node i named names[i] (torch.onnx's scoped
    names); returns the file's path."""
    nodes, cur = [], "x"
    for i, nm in enumerate(names):
        out = "out" if i == len(names) - 1 else "v%d" % i
        nodes.append(oc.node("Relu", [cur], [out], name=nm))
        cur = out
    return write(nodes)


def write(nodes):
    g = oc.graph(nodes, [oc.value_info("x", ["batch", N])], [oc.value_info("out", [])])
    fd, p = tempfile.mkstemp(suffix=".onnx")
    with os.fdopen(fd, "wb") as f:
        f.write(oc.model(g, 17))
    return p


def peak_units(names, make=relu_chain):
    """memest's no_grad peak above the baseline, in UNITs."""
    rep, st = first_step(make(names))
    return None if rep is None else (st["peak"] - st["baseline"]) / UNIT


def first_step(p):
    """memest's no_grad report on file p (deleted after) and its first
    step; (None, None) when memest failed"""
    try:
        rep = run_json(p, "--batch", str(BATCH), "--runtime", "cpu")
    finally:
        os.unlink(p)
    return (None, None) if rep is None else (rep, rep["memory"]["steps"][0])


def case_loop():
    # ModuleList h iterated by the outermost forward, then ln_f and lm_head
    # called on the loop's x: at lm_head x (h.1's output), ln_f's output
    # (lm_head's argument) and lm_head's output are alive: 3
    got = peak_units(["/h.0/Relu", "/h.1/Relu", "/ln_f/Relu", "/lm_head/Relu"])
    check(got == 3, "ModuleList's result held through lm_head: peak %s tensors, want 3" % got)
    # a called Sequential returns its result; the caller's binding is not
    # shown: h's output dies after ln_f, its last reader: 2
    got = peak_units(["/h/h.0/Relu", "/h/h.1/Relu", "/ln_f/Relu", "/lm_head/Relu"])
    check(got == 2, "Sequential's result freed after its last reader: peak %s tensors, want 2" % got)


def case_iter():
    # `e = self.embed(x); for blk in self.h: e = blk(e)`: e is re-bound when
    # h.0 returns, so no block runs beside more than its argument and its
    # output: 2
    got = peak_units(["/embed/Relu", "/h.0/Relu", "/h.1/Relu", "/h.2/Relu"])
    check(got == 2, "ModuleList iteration: peak %s tensors, want 2 (embed's output dies with h.0)" % got)
    # a called Sequential holds its argument until it returns: at h/h.1 the
    # embed output, h.0's output (h.1's argument) and h.1's output: 3
    got = peak_units(["/embed/Relu", "/h/h.0/Relu", "/h/h.1/Relu", "/h/h.2/Relu"])
    check(got == 3, "Sequential call: peak %s tensors, want 3 (embed's output held by the call)" % got)


def kept(names):
    """`for blk in self.d: x = blk(x); keep.append(x)`, then
    `s = keep[0] + x` and `self.head(torch.cat([self.tail(s)] * 2))`:
    names are d.0, d.1, the Add, tail, head."""
    nodes = [oc.node("Relu", ["x"], ["a0"], name=names[0]),
             oc.node("Relu", ["a0"], ["a1"], name=names[1]),
             oc.node("Add", ["a1", "a0"], ["s"], name=names[2]),
             oc.node("Relu", ["s"], ["t"], name=names[3]),
             oc.node("Concat", ["t", "t"], ["out"], name=names[4], attrs=[oc.attr_int("axis", 1)])]
    return write(nodes)


def case_stored():
    # d.0's output is read by the frame after d.1 ran: the frame stored it
    # (a list), so it lives to the end: at head a0, t (head's argument) and
    # head's two-wide output: 4
    got = peak_units(["/d.0/Relu", "/d.1/Relu", "/Add", "/tail/Relu", "/head/Concat"], kept)
    check(got == 4, "a value kept across iterations of a ModuleList: peak %s tensors, want 4" % got)
    # the same ops in a called Sequential: no loop in the frame, a0 dies
    # at the Add: 3 (at the Add: a0, a1, s; at head: t and the output)
    got = peak_units(["/d/d.0/Relu", "/d/d.1/Relu", "/Add", "/tail/Relu", "/head/Concat"], kept)
    check(got == 3, "the same values inside a called Sequential: peak %s tensors, want 3" % got)


INFER = {"infer_nograd": [], "infer_grad": ["--grad"], "named_infer_nograd": []}


def against_truth(model, modes, truth_file=None, tol=0.02):
    truth = json.load(open(truth_file or path("golden", "truth", "memory", model + ".json")))
    spec = []
    for i in truth["inputs"]:
        spec += ["--input", "%s=%s:%s" % (i["name"], "x".join(map(str, i["shape"])), i.get("dtype", "float32"))]
    for b, cells in sorted(truth["batches"].items()):
        for mode in modes:
            if mode not in cells:
                check(False, "%s b%s: the truth has no %s" % (model, b, mode))
                continue
            rep = run_json(path("models", "onnx", "zoo", model + ".onnx"), *spec, "--batch", b,
                           "--runtime", "cpu", *INFER[mode])
            if rep is None:
                continue
            pred, meas = rep["memory"]["steps"][0]["peak"], cells[mode]["peak"]
            err = (pred - meas) / meas
            print("%-16s b%-2s %-13s measured %10d predicted %10d %+6.2f%%" % (model, b, mode, meas, pred, 100 * err))
            check(abs(err) <= tol, "%s b%s %s: %+.2f%% of PyTorch's peak, bound %.1f%%" % (model, b, mode, 100 * err, 100 * tol))


def case_truth():
    # each returns self.lm_head(self.norm(x)) after `for layer in
    # self.layers: x = layer(x)`: x is alive through the head
    for m in ("gpt2_tanh", "llama_like", "llama_tied"):
        against_truth(m, ["infer_nograd", "infer_grad"])


def case_attn_timm():
    # timm's Attention as written (tests/zoo/models.py TimmAttention), added
    # after the rule and measured before memest ran on it: qkv, q (scaled)
    # and attn are names until it returns, through the context's reshape
    # and proj; the weights [B, 3, 785, 785] set the no_grad peak: exact
    # (the head before canon/attn.c: -1.90 % and -2.85 %; with autograd on
    # the matmuls save them anyway)
    against_truth("vit_timm_p8", ["infer_nograd"], tol=0.005)


def case_odd_heads():
    # a held-out nn.TransformerEncoder of 5 heads (tests/heldout, ho6): odd
    # heads keep torch._transformer_encoder_layer_fwd from running ("num_head
    # is odd", transformer.py v1.13); memest reads the heads from the
    # attention's [T, B * H, E / H] views and runs the layers as their ops:
    # exact (the fused op simulated instead: -2.95 %)
    truth = json.load(open(path("golden", "truth", "heldout", "ho6_tenc_post.json")))
    rep = run_json(path("models", "onnx", "heldout", "ho6_tenc_post.onnx"), "--batch", "1", "--runtime", "cpu")
    if rep is None:
        return
    got, want = rep["memory"]["steps"][0]["peak"], truth["batches"]["1"]["infer_nograd"]["peak"]
    e = (got - want) / want
    print(f"ho6_tenc_post b1 infer_nograd measured {want} predicted {got} {100 * e:+.2f}%")
    check(abs(e) <= 0.005, f"odd heads: {100 * e:+.2f}% of PyTorch's peak, bound 0.5%")


def case_unnamed():
    against_truth("whisper_encoder", ["named_infer_nograd"], path("golden", "truth", "whisper", "unnamed.json"), tol=0.005)


def case_names_crafted():
    # three Relus in one module's forward, then a head: each value dies
    # after its reader (2 alive at most); had blk's forward named every
    # one (`a = relu(x); b = relu(a); c = relu(b); return c`), a and b live
    # until blk returns: 3 at its last op
    rep, st = first_step(relu_chain(["/blk/Relu", "/blk/Relu_1", "/blk/Relu_2", "/head/Relu"]))
    if rep is None:
        return
    got = ((st["peak"] - st["baseline"]) / UNIT, (st.get("peak_if_all_named", 0) - st["baseline"]) / UNIT)
    check(got == (2, 3), "peak and peak_if_all_named %s tensors, want (2, 3)" % (got,))
    codes = [n["code"] for n in rep.get("notes", [])]
    check("python_names" in codes, "no python_names note (+50 %% if every tensor were named): notes %s" % codes)


def case_names_bound():
    # PyTorch's no_grad peak lies between memest's figure and the bound
    # with every tensor named, on the zoo's own exports (nothing folded):
    # the bound holds where the forwards keep names (whisper's h, q, k, v,
    # w; the UNet's h), and the note is said where it is far off
    for model in ("resnet18", "resnet50", "mobilenet_v2", "vgg16", "densenet121", "efficientnet_b0", "googlenet",
                  "shufflenet_v2_x1_0", "regnet_y_400mf", "mobilenet_v3_large", "vit_b_16", "bert_like", "gpt2_tanh",
                  "llama_tied", "whisper_encoder", "diffusion_unet", "t5_like", "unet_like", "squeezenet1_0", "swin_t",
                  "efficientnet_v2_s", "r3d_18"):
        truth = json.load(open(path("golden", "truth", "memory", model + ".json")))
        spec = []
        for i in truth["inputs"]:
            spec += ["--input", "%s=%s:%s" % (i["name"], "x".join(map(str, i["shape"])), i.get("dtype", "float32"))]
        for b, cells in sorted(truth["batches"].items()):
            rep = run_json(path("models", "onnx", "zoo", model + ".onnx"), *spec, "--batch", b, "--runtime", "cpu")
            if rep is None:
                continue
            # above the baseline: names hold what the forward allocates, and
            # gpt2_tanh's file holds a folded slice of its mask buffer
            st, meas = rep["memory"]["steps"][0], cells["infer_nograd"]["peak_relative"]
            pred, bound = st["peak"] - st["baseline"], st.get("peak_if_all_named", 0) - st["baseline"]
            print("%-18s b%-2s measured %10d above the baseline: predicted %+7.2f%% bound %+7.2f%%" %
                  (model, b, meas, 100 * (pred - meas) / meas, 100 * (bound - meas) / meas))
            check(bound >= meas, "%s b%s: bound %d below PyTorch's %d above the baseline" % (model, b, bound, meas))
            if model in ("whisper_encoder", "diffusion_unet") and b == "8":
                codes = [n["code"] for n in rep.get("notes", [])]
                check("python_names" in codes, "%s b8: no python_names note (%s)" % (model, codes))


def attention(stored_key=False):
    """One module's forward spelling attention: q, k, v = relu(x) three
    times, k transposed, scores q @ k^T / 8 (k^T a stored [32, 64] weight
    instead when stored_key: a Linear, no attention), Softmax, a child
    Dropout, context = weights @ v, then a child that concatenates three
    copies of the context, and a head. x is [batch, 64, 32]: E bytes;
    the scores and the weights 2E each."""
    c8 = oc.tensor("c8", [], raw=b"\x00\x00\x00\x41")
    nodes = [oc.node("Relu", ["x"], ["q"], name="/attn/Relu"),
             oc.node("Relu", ["x"], ["k"], name="/attn/Relu_1"),
             oc.node("Relu", ["x"], ["v"], name="/attn/Relu_2")]
    inits = [c8]
    if stored_key:
        inits.append(oc.tensor("kt", [32, 64], external=True))
    else:
        nodes.append(oc.node("Transpose", ["k"], ["kt"], name="/attn/Transpose", attrs=[oc.attr_ints("perm", [0, 2, 1])]))
    nodes += [oc.node("MatMul", ["q", "kt"], ["sc"], name="/attn/MatMul"),
              oc.node("Div", ["sc", "c8"], ["sd"], name="/attn/Div"),
              oc.node("Softmax", ["sd"], ["w"], name="/attn/Softmax", attrs=[oc.attr_int("axis", -1)]),
              oc.node("Dropout", ["w"], ["wd"], name="/attn/drop/Dropout"),
              oc.node("MatMul", ["wd", "v"], ["ctx"], name="/attn/MatMul_1"),
              oc.node("Concat", ["ctx", "ctx", "ctx"], ["o3"], name="/attn/out/Concat", attrs=[oc.attr_int("axis", 2)]),
              oc.node("Relu", ["o3"], ["out"], name="/head/Relu")]
    g = oc.graph(nodes, [oc.value_info("x", ["batch", 64, 32])], [oc.value_info("out", [])], inits)
    fd, p = tempfile.mkstemp(suffix=".onnx")
    with os.fdopen(fd, "wb") as f:
        f.write(oc.model(g, 17))
    return p


def case_attn_names():
    # held by the forward's names (canon/attn.c): at the child's Concat q,
    # k, v, the weights (2E), the context (a functional result a child
    # reads) and the three-wide output: 9E above the input. Freed at their
    # last readers instead: 6E, at the head (its argument and its output)
    e = BATCH * 64 * 32 * 4
    for stored, want in ((False, 9), (True, None)):
        rep, st = first_step(attention(stored))
        if rep is None:
            return
        got = (st["peak"] - st["baseline"]) / e
        if want is not None:
            check(got == want, "attention's names: peak %s E above the baseline, want %d" % (got, want))
        else:
            # the scores' MatMul reads a stored weight (nn.Linear): no
            # attention, nothing held past its reader; below 9E
            check(got < 9, "a Softmax over a Linear's output: peak %s E, want below 9 (no names held)" % got)


CASES = {"loop": case_loop, "iter": case_iter, "stored": case_stored, "truth": case_truth, "unnamed": case_unnamed,
         "names_crafted": case_names_crafted, "names_bound": case_names_bound,
         "attn_names": case_attn_names, "attn_timm": case_attn_timm, "odd_heads": case_odd_heads}

if __name__ == "__main__":
    CASES[sys.argv[3]]()
    sys.exit(1 if failures else 0)
