#!/usr/bin/env python3
"""Issue 14, language models from a Hugging Face config.json: one case per item.

usage: test_issue14_llm.py MEMEST SOURCE_ROOT CASE
  truth-<model>  golden/truth/llm/<model>.json (tests/llm/measure_llm.py,
                 PyTorch on CPU): peak and end within 2 % for prefill and
                 the last decode step with a dynamic and a static cache,
                 batch 1 and 4; KV cache bytes and parameters exact
  published      parameter counts of real configs against the published figures
  kv_formula     Llama-3-8B bf16: 2 x 32 layers x 8 KV heads x 128 x 2 B a token
  max_seq        --max-seq on an H100: the answer fits and one token more does not
  tokens         tokens/s on an H100: the roofline step, and decode's bandwidth bound
  errors         unknown model_type, absurd sizes, options for other models
  folder         a model folder holding config.json
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json, write_json  # noqa: E402

CASE = sys.argv[3]
TMP = tempfile.mkdtemp(prefix="memest-i14-llm-")
TOL = 0.02


def write_config(name, cfg):
    return write_json(TMP, name, cfg)


memest_json = run_json


def case_truth(model):
    t = json.load(open(path("golden", "truth", "llm", model + ".json")))
    cfg = path("golden", "truth", "llm", t["config"])
    for mode, by_batch in t["results"].items():
        for b, r in by_batch.items():
            args = [cfg, "--runtime", "cpu", "--batch", b, "--seq", str(t["seq"])]
            if mode.startswith("decode"):
                args += ["--new-tokens", str(t["new_tokens"])]
            if mode.endswith("static"):
                args += ["--kv-cache", "static"]
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


# Real configs (the keys of their config.json that differ from the family's
# defaults) and their published parameter counts.
PUBLISHED = {
    "Llama-2-7B": ({"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 11008}, 6738415616),
    "Llama-3-8B": ({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                    "rope_theta": 500000.0, "torch_dtype": "bfloat16"}, 8030261248),
    "Mistral-7B-v0.1": ({"model_type": "mistral", "vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 32,
                         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                         "sliding_window": 4096}, 7241732096),
    "Qwen2-7B": ({"model_type": "qwen2", "vocab_size": 152064, "hidden_size": 3584, "num_hidden_layers": 28,
                  "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
                  "tie_word_embeddings": False}, 7615616512),
    "Gemma-2B": ({"model_type": "gemma", "vocab_size": 256000, "hidden_size": 2048, "num_hidden_layers": 18,
                  "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
                  "intermediate_size": 16384}, 2506172416),
    "Gemma-7B": ({"model_type": "gemma", "vocab_size": 256000, "hidden_size": 3072, "num_hidden_layers": 28,
                  "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
                  "intermediate_size": 24576}, 8537680896),
    "Phi-3-mini": ({"model_type": "phi3", "vocab_size": 32064, "hidden_size": 3072, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 8192}, 3821079552),
}


def case_published():
    for name, (cfg, want) in PUBLISHED.items():
        o = memest_json(write_config(name + ".json", cfg), "--seq", "16", "--runtime", "cpu")
        if o:
            check(o["totals"]["params"] == want, f"{name}: {o['totals']['params']} parameters, published {want}")


def case_kv_formula():
    cfg, _ = PUBLISHED["Llama-3-8B"]
    o = memest_json(write_config("l3.json", cfg), "--seq", "1000", "--new-tokens", "24", "--batch", "2", "--runtime", "cpu")
    if o:
        kv = o["kv_cache"]
        check(kv["bytes_per_token"] == 2 * 32 * 8 * 128 * 2, f"Llama-3-8B bf16: {kv['bytes_per_token']} bytes a token, not 131072")
        check(kv["tokens"] == 2 * 1024 and kv["bytes"] == 131072 * 2048, f"Llama-3-8B: {kv}")
        # the last decode step reads a cache of 1023 tokens per sequence: donated inputs
        past = [i for i in o["inputs"] if i["name"] == "past_key_values.0.key"]
        check(past and past[0]["shape"] == [2, 8, 1023, 128], f"past cache shape {past}")


def case_max_seq():
    # Llama-3-8B bf16, 8 sequences, on an H100: the answer fits, one more token does not
    cfg, _ = PUBLISHED["Llama-3-8B"]
    cfg = dict(cfg, max_position_embeddings=8192)
    p = write_config("l3ms.json", cfg)
    # prefill of 8 prompts (eager scores grow as S^2); the last decode step
    # of 64 sequences (the KV cache grows as S)
    for extra in (["--batch", "8"], ["--batch", "64", "--new-tokens", "512"],
                  ["--batch", "64", "--new-tokens", "512", "--kv-cache", "static"]):
        o = memest_json(p, "--gpu", "h100-sxm", "--max-seq", *extra)
        if not o:
            continue
        ms = o["device"]["max_seq"]
        s = ms["seq"]
        check(0 < s < 8192 - 512, f"max-seq {extra}: {ms}")
        at = memest_json(p, "--gpu", "h100-sxm", "--seq", str(s), *extra)
        above = memest_json(p, "--gpu", "h100-sxm", "--seq", str(s + 1), *extra)
        if at and above:
            check(at["device"]["fits"] and not above["device"]["fits"],
                  f"max-seq {extra} {s}: fits {at['device']['fits']}, {s + 1} fits {above['device']['fits']}")
            check(at["device"]["needed"] == ms["needed"] and above["device"]["needed"] == ms["needed_next"],
                  f"max-seq {extra}: {ms} vs the timelines {at['device']['needed']}, {above['device']['needed']}")
    # the whole context fits at batch 1: the answer is max_position_embeddings
    o = memest_json(p, "--gpu", "h100-sxm", "--max-seq")
    if o:
        check(o["device"]["max_seq"]["seq"] == 8192 and o["device"]["max_seq"]["needed_next"] == 0, f"batch 1: {o['device']['max_seq']}")
    rc, out, err = run(path("models", "resnet18.json"), "--gpu", "h100-sxm", "--max-seq")
    check(rc == 2 and "--max-seq" in err, f"--max-seq on a CNN: exit {rc}, {err!r}")


def case_tokens():
    # decode is bandwidth-bound: batch x 3350 GB/s (h100-sxm) / (weight bytes + KV cache bytes)
    cfg, _ = PUBLISHED["Llama-3-8B"]
    p = write_config("l3tok.json", cfg)
    for seq in ("1024", "4000"):
        o = memest_json(p, "--gpu", "h100-sxm", "--batch", "8", "--seq", seq, "--new-tokens", "128")
        if not o:
            continue
        dev = o["device"]
        want = 8 * 3350e9 / (o["totals"]["param_bytes"] + o["kv_cache"]["bytes"])
        got = dev.get("decode_bandwidth_bound_tokens_per_second", 0)
        check(abs(got - want) <= 1e-9 * want, f"seq {seq}: decode bound {got} tokens/s, want {want}")
        tps = dev.get("tokens_per_second", 0)
        check(0 < tps <= got and abs(tps - 8 / dev["roofline_seconds"]["step"]) <= 1e-9 * tps,
              f"seq {seq}: {tps} tokens/s from a step of {dev['roofline_seconds']['step']} s (bound {got})")
    o = memest_json(p, "--gpu", "h100-sxm", "--batch", "2", "--seq", "512")
    if o:
        dev = o["device"]
        check("decode_bandwidth_bound_tokens_per_second" not in dev and
              abs(dev["tokens_per_second"] - 1024 / dev["roofline_seconds"]["step"]) <= 1e-9 * dev["tokens_per_second"],
              f"prefill: {dev}")


def case_errors():
    p = write_config("unknown.json", {"model_type": "mamba9", "hidden_size": 64})
    rc, out, err = run(p)
    check(rc == 2 and "model_type" in err and "llama" in err and "gemma" in err and p in err,
          f"unknown model_type: exit {rc}, {err!r}")
    p = write_config("absurd.json", {"model_type": "llama", "hidden_size": 1 << 45})
    rc, out, err = run(p)
    check(rc == 2 and "hidden_size" in err and p in err, f"absurd hidden_size: exit {rc}, {err!r}")
    p = write_config("badheads.json", {"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3})
    rc, out, err = run(p)
    check(rc == 2 and "num_attention_heads" in err, f"heads not dividing hidden: exit {rc}, {err!r}")
    p = write_config("badtype.json", {"model_type": "qwen2", "num_hidden_layers": "many"})
    rc, out, err = run(p)
    check(rc == 2 and "num_hidden_layers" in err, f"string layer count: exit {rc}, {err!r}")
    rc, out, err = run(path("models", "resnet18.json"), "--seq", "128")
    check(rc == 2 and "--seq" in err, f"--seq on a JSON layer graph: exit {rc}, {err!r}")
    rc, out, err = run(path("models", "resnet18.json"))
    check(rc == 0, f"memest's own JSON layer graph no longer loads: exit {rc}, {err[-300:]}")
    rc, out, err = run(path("golden", "truth", "llm", "llama_small.config.json"), "--kv-cache", "ring")
    check(rc == 2 and "--kv-cache" in err, f"--kv-cache ring: exit {rc}, {err!r}")


def case_folder():
    d = os.path.join(TMP, "model")
    os.makedirs(d)
    with open(path("golden", "truth", "llm", "llama_small.config.json")) as f, open(os.path.join(d, "config.json"), "w") as g:
        g.write(f.read())
    rc, out, err = run(d, "--seq", "32")
    check(rc == 0 and "model.layers.1.self_attn.q_proj" in out and "KV cache:" in out,
          f"model folder: exit {rc}, {err[-300:]}")


if CASE.startswith("truth-"):
    case_truth(CASE[len("truth-"):])
else:
    {"published": case_published, "max_seq": case_max_seq, "tokens": case_tokens, "kv_formula": case_kv_formula, "errors": case_errors, "folder": case_folder}[CASE]()
print(f"{CASE}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
