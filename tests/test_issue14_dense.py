#!/usr/bin/env python3
"""Issue 14, helper dense: GPT-2 and GPT-NeoX from their config.json.

usage: test_issue14_dense.py MEMEST SOURCE_ROOT CASE
  truth-<model>  golden/truth/llm/<model>.json (tests/llm/measure_llm.py,
                 PyTorch on CPU): prefill and the last decode step with the
                 tuple cache, batch 1 and 4: peak and end within 2 %, KV
                 cache bytes and parameters exact
  published      models/llm gpt2, pythia-160m, gpt-neox-20b: memest's count
                 equals the published figure and the meta-device count
                 (golden/truth/llm/params.json)
  static         --kv-cache static|paged, --attn and --kv-dtype are errors
                 naming the model class (v4.44's GPT-2 and GPT-NeoX keep
                 tuples, no StaticCache; their builder makes no training
                 forward and no cache cast yet)
  context        the default prompt within GPT-2's positions, a prompt past
                 them refused, --max-seq on an H100
  config         the families' own keys and defaults (n_inner null, tied
                 head, rotary_pct, use_parallel_residual, activations) and
                 the keys memest refuses
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json, write_json  # noqa: E402

CASE = sys.argv[3]
TMP = tempfile.mkdtemp(prefix="memest-i14-dense-")
TOL = 0.02


def write_config(name, cfg):
    return write_json(TMP, name, cfg)


memest_json = run_json


def case_truth(model):
    t = json.load(open(path("golden", "truth", "llm", model + ".json")))
    cfg = path("golden", "truth", "llm", t["config"])
    check(set(t["results"]) == {"prefill", "decode_dynamic"}, f"{model}: modes {sorted(t['results'])}")
    for mode, by_batch in t["results"].items():
        for b, r in by_batch.items():
            args = [cfg, "--runtime", "cpu", "--batch", b, "--seq", str(t["seq"])]
            if mode.startswith("decode"):
                args += ["--new-tokens", str(t["new_tokens"])]
            o = memest_json(*args)
            if not o:
                continue
            st = o["memory"]["steps"][0]
            tag = f"{model} {mode} batch {b}"
            for key in ("peak", "end"):
                err = (st[key] - r[key]) / r[key]
                check(abs(err) <= TOL, f"{tag}: {key} {st[key]} vs PyTorch {r[key]} ({100 * err:+.2f} %)")
            check(o["kv_cache"]["bytes"] == r["cache_bytes_end"],
                  f"{tag}: KV cache {o['kv_cache']['bytes']} bytes vs PyTorch {r['cache_bytes_end']}")
            check(o["totals"]["params"] == t["params"], f"{tag}: params {o['totals']['params']} vs {t['params']}")


PUBLISHED = {"gpt2": 124439808, "pythia-160m": 162322944, "gpt-neox-20b": 20554567680}


def case_published():
    meta = json.load(open(path("golden", "truth", "llm", "params.json")))["models"]
    for name, want in PUBLISHED.items():
        o = memest_json(path("models", "llm", name, "config.json"), "--seq", "16", "--runtime", "cpu")
        if not o:
            continue
        got = o["totals"]["params"]
        check(got == want, f"{name}: {got} parameters, published {want}")
        check(meta[name]["method"] == "meta" and got == meta[name]["params"],
              f"{name}: {got} parameters, meta device {meta[name]}")


def case_static():
    for name, cls in (("gpt2", "GPT2Model"), ("pythia-160m", "GPTNeoXModel")):
        p = path("models", "llm", name, "config.json")
        rc, out, err = run(p, "--seq", "64", "--new-tokens", "4", "--kv-cache", "static")
        check(rc == 2 and "--kv-cache static" in err and cls in err and "StaticCache" in err,
              f"{name} --kv-cache static: exit {rc}, {err!r}")
    # what their builder does not make is refused by name, never built as
    # a Llama graph: a cache in another dtype, the fused kernels, vLLM's cache
    for name, cls in (("gpt2", "GPT2LMHeadModel"), ("pythia-160m", "GPTNeoXForCausalLM")):
        p = path("models", "llm", name, "config.json")
        rc, out, err = run(p, "--seq", "64", "--new-tokens", "4", "--kv-dtype", "fp8")
        check(rc == 2 and "--kv-dtype" in err and cls in err, f"{name} --kv-dtype fp8: exit {rc}, {err!r}")
        for extra in (["--attn", "sdpa"], ["--kv-cache", "paged"]):
            rc, out, err = run(p, "--seq", "64", "--new-tokens", "4", *extra)
            check(rc == 2 and extra[0] in err and cls in err, f"{name} {extra}: exit {rc}, {err!r}")


def params_of(cfg, name):
    o = memest_json(write_config(name, cfg), "--seq", "8", "--runtime", "cpu")
    return o["totals"]["params"] if o else None


def case_config():
    # GPT-2: n_inner null is 4 x n_embd; the head is tied unless told
    D, L, V, P = 64, 2, 100, 32
    layer = 4 * D + D * 3 * D + 3 * D + D * D + D + D * 4 * D + 4 * D + 4 * D * D + D
    base = {"model_type": "gpt2", "vocab_size": V, "n_embd": D, "n_layer": L, "n_head": 4, "n_positions": P,
            "n_inner": None}
    want = V * D + P * D + L * layer + 2 * D
    check(params_of(base, "g1.json") == want, f"gpt2 n_inner null: want {want}")
    check(params_of(dict(base, tie_word_embeddings=False), "g2.json") == want + V * D, "gpt2 untied head")
    layer2 = layer - (D * 4 * D + 4 * D + 4 * D * D) + (D * 100 + 100 + 100 * D)
    check(params_of(dict(base, n_inner=100), "g3.json") == V * D + P * D + L * layer2 + 2 * D, "gpt2 n_inner 100")
    # NeoX: untied embed_out by default, attention_bias false drops the attention biases
    neox = {"model_type": "gpt_neox", "vocab_size": V, "hidden_size": D, "num_hidden_layers": L,
            "num_attention_heads": 4, "intermediate_size": 96, "max_position_embeddings": P}
    nl = 4 * D + D * 3 * D + 3 * D + D * D + D + D * 96 + 96 + 96 * D + D
    want = 2 * V * D + L * nl + 2 * D
    check(params_of(neox, "n1.json") == want, f"neox defaults: want {want}")
    check(params_of(dict(neox, attention_bias=False), "n2.json") == want - L * 4 * D, "neox attention_bias false")
    # the activation and residual keys reach the graph
    o = memest_json(write_config("n3.json", dict(neox, hidden_act="gelu_fast", use_parallel_residual=False)),
                    "--seq", "8", "--runtime", "cpu")
    if o:
        ops = [n["op"] for n in o["layers"] if n["name"].startswith("gpt_neox.layers.0.mlp.act")]
        check(ops.count("Tanh") == 1 and "Gelu" not in ops, f"gelu_fast: {ops}")
    o = memest_json(write_config("n4.json", neox), "--seq", "8", "--runtime", "cpu")
    if o:
        ops = [n["op"] for n in o["layers"] if n["name"].startswith("gpt_neox.layers.0.mlp.act")]
        check(ops == ["Gelu"], f"gelu: {ops}")
    # rotary_pct: the rotated slice is int(head_size * rotary_pct) wide
    o = memest_json(write_config("n5.json", dict(neox, rotary_pct=0.5)), "--seq", "8", "--runtime", "cpu")
    if o:
        rot = [n for n in o["layers"] if n["name"] == "gpt_neox.layers.0.attention" and n["op"] == "Neg"]
        check(rot and rot[0]["output_shape"][-1] == 4, f"rotary_pct 0.5 of 16: {rot[:1]}")
    # refused: what memest does not build, and sizes HF raises on
    for cfg, key in ((dict(base, scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx"),
                     (dict(base, reorder_and_upcast_attn=True), "reorder_and_upcast_attn"),
                     (dict(base, add_cross_attention=True), "add_cross_attention"),
                     (dict(base, n_head=5), "n_head"),
                     (dict(base, activation_function="swiglu9"), "activation_function"),
                     (dict(neox, rotary_pct=0.1), "rotary_pct"),
                     (dict(neox, rope_scaling={"type": "linear", "factor": 2.0}), "rope_scaling"),
                     (dict(neox, hidden_act="mish9"), "hidden_act")):
        p = write_config("bad.json", cfg)
        rc, out, err = run(p, "--seq", "8")
        check(rc == 2 and key in err and p in err, f"{key}: exit {rc}, {err!r}")


def case_context():
    # no --seq: GPT-2's 1024 positions, not the 2048-token default
    g = path("models", "llm", "gpt2", "config.json")
    rc, out, err = run(g, "--runtime", "cpu", "--format", "json")
    check(rc == 0, f"gpt2 without --seq: exit {rc}, {err[-300:]}")
    if rc == 0:
        o = json.loads(out)
        check(o["kv_cache"]["tokens"] == 1024 and "1024 tokens" in err, f"gpt2 default prompt: {o['kv_cache']}, {err!r}")
    for p, args, key in ((g, ["--seq", "1020", "--new-tokens", "10"], "n_positions"),
                         (path("models", "llm", "pythia-160m", "config.json"), ["--seq", "3000"], "max_position_embeddings")):
        rc, out, err = run(p, *args)
        check(rc == 2 and key in err and "longer" in err, f"{args} past the context: exit {rc}, {err!r}")
    # a folder named as a shell completes it ("gpt2/"): the message names
    # its config.json once, not "gpt2//config.json"
    rc, out, err = run(path("models", "llm", "gpt2") + "/", "--seq", "2000")
    check(rc == 2 and "gpt2/config.json" in err and "//" not in err, f"gpt2/ past the context: exit {rc}, {err!r}")
    # --max-seq: the answer fits, one token more does not (or the whole context fits)
    for extra in (["--batch", "256"], ["--batch", "512", "--new-tokens", "16"]):
        o = memest_json(g, "--gpu", "h100-sxm", "--max-seq", *extra)
        if not o:
            continue
        ms = o["device"]["max_seq"]
        s = ms["seq"]
        n = int(extra[extra.index("--new-tokens") + 1]) if "--new-tokens" in extra else 0
        check(0 < s <= 1024 - n, f"max-seq {extra}: {ms}")
        at = memest_json(g, "--gpu", "h100-sxm", "--seq", str(s), *extra)
        if at:
            check(at["device"]["fits"] and at["device"]["needed"] == ms["needed"], f"max-seq {extra} at {s}: {at['device']}")
        if s < 1024 - n:
            above = memest_json(g, "--gpu", "h100-sxm", "--seq", str(s + 1), *extra)
            if above:
                check(not above["device"]["fits"], f"max-seq {extra}: {s + 1} fits too")


if CASE.startswith("truth-"):
    case_truth(CASE[len("truth-"):])
else:
    {"published": case_published, "static": case_static, "config": case_config, "context": case_context}[CASE]()
print(f"{CASE}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
