#!/usr/bin/env python3
"""Issue 15, tensor and sequence parallelism and selective recompute
against Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", arXiv:2205.05198, section 4 and table 2): the
activation memory of one transformer layer, in bytes,
  no parallelism        s*b*h*(34 + 5*a*s/h)
  tensor parallel t     s*b*h*(10 + 24/t + 5*a*s/(h*t))
  + sequence parallel   s*b*h*(34/t + 5*a*s/(h*t))
  selective recompute   s*b*h*(10 + 24/t), with SP s*b*h*34/t
under the paper's assumptions, which memest is put in here: a GPT layer
(LayerNorm, QKV, scores, softmax, dropout, attention over v, projection,
dropout, LayerNorm, MLP 4h with GeLU, dropout), 16-bit activations
(torch_dtype float16), 1-byte dropout masks (the CUDA runtime's bool
mask), no flash attention (eager). The truth is the formula, computed
here from the paper; memest's figure is the training report's
forward_end (bytes alive when the forward returns beyond the baseline) of
a two-layer model minus the one-layer model's: one layer's saved tensors.
memest also counts what the paper leaves out: LayerNorm's mean and rstd
(fp32, 2 x 2 x 4 bytes per token: +0.008 % at t = 1).

usage: test_issue15_megatron.py MEMEST SOURCE_ROOT CASE

  table     GPT-3 175B's layer (h 12288, a 96, s 2048, b 1) for t = 1, 2,
            4, 8, with and without sequence parallelism and selective
            recompute: within 1 % of the formula
  llama     Llama-3-8B under --tp 2 and 8: one rank's parameters are
            Megatron's shard, counted here from the config (q, k, v, gate,
            up split by outputs, o and down by inputs, the embedding and
            head by the vocabulary padded to 128 x t, norms whole)
  errors    --tp that does not divide the heads, --sp without --tp,
            --tp without --train, --tp on an ONNX model, a sequence
            --sp cannot split, --checkpoint
            selective on a model without core attention: exit 2 naming
            the option
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json, write_json  # noqa: E402

CASE = sys.argv[3]
TOL = 0.01
H, A, S, B, V = 12288, 96, 2048, 1, 51200


def gpt3(tmp, layers):
    cfg = {"model_type": "gpt2", "vocab_size": V, "n_embd": H, "n_layer": layers, "n_head": A, "n_positions": S,
           "activation_function": "gelu", "torch_dtype": "float16"}
    d = os.path.join(tmp, "L%d" % layers)
    os.makedirs(d, exist_ok=True)
    return write_json(d, "config.json", cfg)


def formula(t, sp, selective):
    sbh = S * B * H
    scores = 0 if selective else 5 * A * S / (H * t)
    return sbh * (34 / t + scores) if sp else sbh * (10 + 24 / t + scores)


def forward_end(cfg, args):
    o = run_json(cfg, "--train", "--seq", str(S), "--batch", str(B), *args)
    return o["memory"]["steps"][0]["forward_end"] if o else None


def case_table():
    with tempfile.TemporaryDirectory() as tmp:
        one, two = gpt3(tmp, 1), gpt3(tmp, 2)
        for t in (1, 2, 4, 8):
            for sp in ((False, True) if t > 1 else (False,)):
                for sel in (False, True):
                    args = (["--tp", str(t)] if t > 1 else []) + (["--sp"] if sp else []) + \
                           (["--checkpoint", "selective"] if sel else [])
                    f1, f2 = forward_end(one, args), forward_end(two, args)
                    if f1 is None or f2 is None:
                        continue
                    got, want = f2 - f1, formula(t, sp, sel)
                    err = (got - want) / want
                    print("t=%d sp=%d selective=%d: memest %d B, formula %.0f B, %+.3f %%" % (t, sp, sel, got, want, 100 * err))
                    check(abs(err) <= TOL, f"t={t} sp={sp} selective={sel}: {got} B vs {want:.0f} B ({100 * err:+.2f} %)")


def case_llama():
    cfg = path("models", "llm", "llama-3-8b", "config.json")
    c = json.load(open(cfg))
    D, I, L, Vc = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    kvd = D // c["num_attention_heads"] * c["num_key_value_heads"]
    for t in (2, 8):
        vp = -(-Vc // (128 * t)) * 128 * t // t
        layer = (D * D + 2 * D * kvd + D * D + 3 * D * I) // t + 2 * D
        want = L * layer + D + 2 * vp * D
        o = run_json(cfg, "--train", "--seq", "512", "--tp", str(t), "--sp")
        got = o["totals"]["params"] if o else None
        check(got == want, f"llama-3-8b --tp {t}: {got} parameters a rank, Megatron's shard {want}")


def case_errors():
    with tempfile.TemporaryDirectory() as tmp:
        cfg = gpt3(tmp, 1)
        base = ["--train", "--seq", "256"]
        for args, needle in ((["--tp", "5"], "--tp 5"), (["--sp"], "--sp"), (["--seq", "256", "--tp", "2"], "--tp")):
            a = args if args[0] == "--seq" else base + args
            rc, out, err = run(cfg, *a)
            check(rc == 2 and needle in err, f"{a}: exit {rc}, {err[-200:]!r}")
        # --sp splits the sequence: 250 tokens do not split over 4 ranks
        rc, out, err = run(cfg, "--train", "--seq", "250", "--tp", "4", "--sp")
        check(rc == 2 and "sequence" in err, f"--seq 250 --tp 4 --sp: exit {rc}, {err[-200:]!r}")
        rc, out, err = run(path("models", "onnx", "zoo", "gpt_like.onnx"), "--input", "input_ids=128:int64", "--train", "--tp", "2")
        check(rc == 2 and "--tp" in err, f"ONNX --tp: exit {rc}, {err[-200:]!r}")
        rc, out, err = run(path("models", "llm", "llama-3-8b", "config.json"), "--train", "--seq", "256",
                           "--checkpoint", "selective")
        check(rc == 2 and "selective" in err, f"llama --checkpoint selective: exit {rc}, {err[-200:]!r}")


globals()["case_" + CASE]()
print("%s: %d failure(s)" % (CASE, len(failures)))
sys.exit(1 if failures else 0)
