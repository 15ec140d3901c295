#!/usr/bin/env python3
"""--torch: the PyTorch whose optimizer code a training step follows
(src/optim.c; doc/memory.md, "PyTorch versions").

usage: test_torch_version.py MEMEST SOURCE_ROOT CASE
  default  torch 2's _default_to_fused_or_foreach: Adam on CUDA runs the
           foreach path (the report says optimizer_impl foreach, torch 2);
           1.13's default stays single-tensor (neither key)
  lists    the temporaries at the update's peak: 1.13's _multi_tensor_adam
           holds two lists as large as the parameters (exp_avg_sq_sqrt,
           denom), 2.x's one (in-place denominators), as AdamW's and
           RMSprop's (avg); 2.x's Adagrad two (std, numerator); SGD's
           foreach path none in either
  paths    what each version has: adagrad's and rmsprop's foreach paths and
           fused SGD and AdamW from 2.x only (an error under 1.13 names
           the version)
  errors   --torch binds nothing without autograd, with --grad on a model
           whose ops save the same in both versions, on the CPU's default
           path, with an explicit single path, or as an unknown version:
           exit 2 naming the option
  attention  nn.MultiheadAttention's attention (vit_b_16): 1.13 makes and
           keeps the [B*H, T, T] scores and softmax; --torch 2 runs one
           scaled_dot_product_attention call, binds under no_grad too, and
           drops those bytes in every layer; the attention_sdpa note says
           which version the figure follows and what the file cannot show
  weights  an nn.MultiheadAttention whose averaged weights the model
           returns (need_weights=True, torch 2 computes them with the ops)
           is left as it is: --torch 2 binds nothing under no_grad; the
           same module called with need_weights=False binds (exported here
           with Debian's torch 1.13)
  saved    with autograd on, a mean over dims keeps its input in 1.13 and
           only its numel in 2.x (MeanBackward1, golden/truth/saved/): on
           llama_like (RMSNorm) --torch 2 keeps less by exactly the means'
           inputs, under --grad and --train on the CPU too, and the option
           binds there
"""
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json  # noqa: E402

MODEL = path("models", "resnet18.json")
TRAIN = [MODEL, "--train", "--batch", "4"]


def case_default():
    d = run_json(*TRAIN, "--optimizer", "adam", "--torch", "2")
    if d:
        m = d["memory"]
        check(m.get("torch") == "2" and m.get("optimizer_impl") == "foreach",
              "--torch 2, Adam on CUDA: torch %r, optimizer_impl %r, want '2', 'foreach'" % (m.get("torch"), m.get("optimizer_impl")))
        check("optimizer_impl" not in [n["code"] for n in d.get("notes", [])], "--torch 2 still prints the optimizer_impl note")
    d = run_json(*TRAIN, "--optimizer", "adam")
    if d:
        m = d["memory"]
        check("torch" not in m and "optimizer_impl" not in m, "1.13's default: keys torch/optimizer_impl present: %s" % sorted(m))
        check("optimizer_impl" in [n["code"] for n in d.get("notes", [])], "1.13's default on CUDA: no optimizer_impl note")


def update_temps(*extra):
    """the update's temporaries at the first step's peak, and the parameters' bytes"""
    d = run_json(*TRAIN, *extra)
    if not d:
        return None, None
    s = d["memory"]["steps"][0]
    check(s["peak_phase"] == "optimizer", "%s: the peak is in %s, not the update" % (" ".join(extra), s["peak_phase"]))
    return s["at_peak"]["temporary"], int(d["totals"]["param_bytes"])


def case_lists():
    for extra, lists in ((["--optimizer", "adam", "--optimizer-impl", "foreach"], 2),
                         (["--optimizer", "adam", "--torch", "2"], 1),
                         (["--optimizer", "adamw", "--optimizer-impl", "foreach", "--torch", "2"], 1),
                         (["--optimizer", "rmsprop", "--optimizer-impl", "foreach", "--torch", "2"], 1),
                         (["--optimizer", "adagrad", "--optimizer-impl", "foreach", "--torch", "2"], 2)):
        t, pb = update_temps(*extra)
        check(t == lists * pb if t is not None else True,
              "%s: %s B of temporaries at the update's peak, want %d list(s) of the parameters' %s B" % (" ".join(extra), t, lists, pb))
    a = run_json(*TRAIN, "--optimizer", "sgd", "--torch", "2")
    b = run_json(*TRAIN, "--optimizer", "sgd", "--optimizer-impl", "foreach")
    c = run_json(*TRAIN, "--optimizer", "sgd")
    if a and b and c:
        pa, pb_, pc = (x["memory"]["steps"][0]["peak"] for x in (a, b, c))
        check(pa == pb_ == pc, "SGD's foreach path holds no list: peaks %d, %d, %d" % (pa, pb_, pc))


def case_paths():
    for opt, impl in (("adagrad", "foreach"), ("rmsprop", "foreach"), ("sgd", "fused"), ("adamw", "fused")):
        rc, _, err = run(*TRAIN, "--optimizer", opt, "--optimizer-impl", impl)
        check(rc == 2 and "torch 1.13" in err, "%s %s under 1.13: exit %d (%s), want 2 naming torch 1.13" % (opt, impl, rc, err.strip()[-120:]))
        d = run_json(*TRAIN, "--optimizer", opt, "--optimizer-impl", impl, "--torch", "2")
        check(d is not None and d["memory"].get("optimizer_impl") == impl, "%s %s under --torch 2 not taken" % (opt, impl))


def case_errors():
    for extra, why in ((["--torch", "2"], "binds nothing for inference"),
                       (["--grad", "--torch", "2"], "binds nothing for --grad"),
                       (["--train", "--torch", "3"], "not one of"),
                       (["--train", "--optimizer", "adam", "--runtime", "cpu", "--torch", "2"], "binds nothing"),
                       (["--train", "--optimizer", "adam", "--optimizer-impl", "single", "--torch", "2"], "binds nothing")):
        rc, _, err = run(MODEL, *extra)
        check(rc == 2 and "--torch" in err and why in err, "%s: exit %d, stderr %r; want 2 and '%s'" % (" ".join(extra), rc, err.strip()[-160:], why))


LLAMA = path("models", "onnx", "zoo", "llama_like.onnx")


def case_saved():
    # --grad peaks at the forward's end, every saved tensor alive
    for mode in (["--grad"], ["--train", "--runtime", "cpu", "--optimizer", "sgd"]):
        a = run_json(LLAMA, "--batch", "8", *mode)
        b = run_json(LLAMA, "--batch", "8", *mode, "--torch", "2")
        if not a or not b:
            continue
        check(b["memory"].get("torch") == "2", "%s: report's torch is %r" % (" ".join(mode), b["memory"].get("torch")))
        sa, sb = a["memory"]["steps"][0], b["memory"]["steps"][0]
        if mode[0] == "--grad":
            want = sum(int(r["mem_read"]) for r in a["layers"] if r["op"] == "ReduceMean")  # each RMSNorm's pow result
            got = sa["at_peak"]["saved"] - sb["at_peak"]["saved"]
            check(want > 0 and got == want, "--grad: --torch 2 keeps %d bytes less for backward, the means' inputs are %d"
                  % (got, want))
        else:
            check(sb["peak"] < sa["peak"], "--train: --torch 2's peak %d is not below 1.13's %d" % (sb["peak"], sa["peak"]))


VIT = path("models", "onnx", "zoo", "vit_b_16.onnx")


def attn_note(d):
    return " ".join(n["text"] for n in d.get("notes", []) if n["code"] == "attention_sdpa")


XATTN = path("models", "onnx", "heldout", "ho7_xattn.onnx")  # a cross-attention block, its attention the no_grad peak


def case_attention():
    # --grad on vit_b_16: every layer's scores and softmax kept in 1.13, q
    # and the output in 2; no_grad on the cross-attention block: one
    # call's scores and softmax alive at once in 1.13
    for model, mode, calls in ((VIT, ["--grad"], 12), (XATTN, [], 1)):
        a = run_json(model, "--batch", "8", "--runtime", "cpu", *mode)
        b = run_json(model, "--batch", "8", "--runtime", "cpu", *mode, "--torch", "2")
        if not a or not b:
            continue
        what = os.path.basename(model) + " " + (" ".join(mode) or "no_grad")
        check("--torch 2 models it" in attn_note(a), "%s, 1.13: attention_sdpa note %r" % (what, attn_note(a)[:120]))
        check("need_weights" in attn_note(b) and "%d nn.MultiheadAttention" % calls in attn_note(b),
              "%s, --torch 2: attention_sdpa note %r" % (what, attn_note(b)[:120]))
        s = max(int(r["output_bytes"]) for r in a["layers"] if r["op"] == "Softmax")  # [B*H, T, S]
        e = max(int(r["output_bytes"]) for r in a["layers"] if r["op"] == "MatMul" and r["output_bytes"] < s)  # the context
        pa, pb = a["memory"]["steps"][0]["peak"], b["memory"]["steps"][0]["peak"]
        lo, hi = ((calls - 1) * (s - e), (calls + 1) * s) if mode else (s, 2 * s + e)
        check(lo <= pa - pb <= hi, "%s: --torch 2 is %d bytes below 1.13, want %d..%d (S %d, E %d)" % (what, pa - pb, lo, hi, s, e))


def case_weights():
    import tempfile
    import torch

    class Attn(torch.nn.Module):
        def __init__(self, weights):
            super().__init__()
            self.weights = weights
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x):
            y, w = self.attn(x, x, x, need_weights=self.weights)
            return (y, w) if self.weights else y

    with tempfile.TemporaryDirectory() as tmp:
        for weights in (True, False):
            f = os.path.join(tmp, "attn_%d.onnx" % weights)
            torch.manual_seed(0)
            torch.onnx.export(Attn(weights).eval(), torch.randn(2, 16, 32), f, opset_version=17, input_names=["x"],
                              dynamic_axes={"x": {0: "batch"}})
            rc, _, err = run(f, "--batch", "8", "--runtime", "cpu", "--torch", "2")
            if weights:
                check(rc == 2 and "binds nothing" in err, "need_weights=True: --torch 2 exit %d, stderr %r" % (rc, err[-200:]))
            else:
                check(rc == 0 and "attention_sdpa" in err, "need_weights=False: --torch 2 exit %d, stderr %r" % (rc, err[-200:]))


CASES = {"default": case_default, "lists": case_lists, "paths": case_paths, "errors": case_errors, "saved": case_saved,
         "attention": case_attention, "weights": case_weights}

if __name__ == "__main__":
    CASES[sys.argv[3]]()
    print("%s: %d failure(s)" % (sys.argv[3], len(failures)))
    sys.exit(1 if failures else 0)
