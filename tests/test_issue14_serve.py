#!/usr/bin/env python3
"""Issue 14, serving: SDPA/flash attention, vLLM's paged cache and the
vLLM-style concurrency answer (doc/llm.md "Attention kernels", "The paged
cache", "Serving"). Torch 1.13 on CPU has neither SDPA nor a paged kernel,
so these are formula tests: each figure is derived here from the kernel's
or vLLM's own rule, independently of memest's code.

usage: test_issue14_serve.py MEMEST SOURCE_ROOT CASE
  sdpa          --attn sdpa: one ScaledDotProductAttention a layer, no [S,S]
                tensor, flash's output + fp32 logsumexp; with a StaticCache
                the memory-efficient kernel and its padded mask
  flash         --attn flash: no repeat_kv copies, Hkv heads read natively
  paged         --kv-cache paged: ceil(len/16) blocks a sequence in
                [2,blocks,16,Hkv,hd] pools written in place, the paged
                kernel's MACs, logits of the last token only
  concurrency-<model>  --max-concurrency on an H100 (SERVE_MODELS: Llama-3-8B
                bf16; Mixtral-8x7B int4 is one line there): vLLM's block
                arithmetic, confirmed by decode-step timelines at the
                answer and one above; capped by max_num_seqs for short ones
  truth-sdpa-<model>  golden/truth/llm/<model>.sdpa.json
                (tests/llm/measure_sdpa.py, PyTorch on CPU: HF's sdpa module,
                the kernel by its contract): prefill, last decode step with
                a dynamic and a static cache, batch 1 and 4, within 2 %
  truth-paged-<model>  golden/truth/llm/<model>.paged.json
                (tests/llm/measure_paged.py, PyTorch on CPU: pools, block
                table and slots as vLLM's, attention by the kernels'
                contract): prefill and last decode step, batch 1 and 4,
                peak and end within 2 %, the pools' bytes exact
  tokens        the decode bandwidth bound with the paged cache
  errors        options that conflict or bind nothing
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json, write_json  # noqa: E402

CASE = sys.argv[3]
L3 = path("models", "llm", "llama-3-8b", "config.json")
CFG = json.load(open(L3))
LAYERS, H, HKV = CFG["num_hidden_layers"], CFG["num_attention_heads"], CFG["num_key_value_heads"]
HD = CFG["hidden_size"] // H
PER_TOKEN = 2 * LAYERS * HKV * HD * 2  # bf16: 131,072
GPU = ["--gpu", "h100-sxm"]


memest_json = run_json


def rows(o, op):
    return [r for r in o["layers"] if r["op"] == op]


def case_sdpa():
    B, S = 2, 1024
    o = memest_json(L3, "--seq", str(S), "--batch", str(B), "--attn", "sdpa")
    e = memest_json(L3, "--seq", str(S), "--batch", str(B))
    if not o or not e:
        return
    at = rows(o, "ScaledDotProductAttention")
    check(len(at) == LAYERS, f"{len(at)} fused attention rows, want one a layer ({LAYERS})")
    check(not rows(o, "Softmax"), "sdpa still has eager's softmax")
    # flash (no mask, bf16): out [B,S,H,hd] bf16 + softmax_lse [B,H,S] fp32
    want = B * S * H * HD * 2 + B * H * S * 4
    for r in at[:1]:
        check(r["output_bytes"] == want, f"flash outputs {r['output_bytes']} B, want out + logsumexp {want}")
        check(r["macs"] == 2 * B * H * S * S * HD, f"attention MACs {r['macs']}")
    scores = B * H * S * S * 2
    attn = lambda x: [r["output_bytes"] for r in x["layers"] if ".self_attn" in r["name"]]  # noqa: E731
    check(max(attn(o)) < scores, "an [B,H,S,S] tensor in the sdpa graph")
    check(max(attn(e)) >= scores, "eager's scores are missing (the test would prove nothing)")
    check("causal_mask" not in [i["name"] for i in o["inputs"]], "HF's sdpa path builds no mask without padding")
    pk_s, pk_e = o["memory"]["steps"][0]["peak"], e["memory"]["steps"][0]["peak"]
    check(pk_s < pk_e, f"sdpa peak {pk_s} not below eager's {pk_e}")
    # StaticCache keeps the mask: the memory-efficient kernel, no logsumexp
    # in inference, the mask [B,1,1,T] padded to a multiple of 8 (T = 105)
    s = memest_json(L3, "--seq", "100", "--new-tokens", "5", "--batch", str(B), "--attn", "sdpa", "--kv-cache", "static")
    if s:
        r = rows(s, "ScaledDotProductAttention")[0]
        want = B * 1 * H * HD * 2 + B * 1 * 112 * 2
        check(r["output_bytes"] == want, f"efficient kernel outputs {r['output_bytes']} B, want out + padded mask {want}")
    # Mistral's window: HF's sdpa path keeps the mask once the keys reach it
    mi = path("models", "llm", "mistral-7b", "config.json")
    win = json.load(open(mi)).get("sliding_window") or 4096
    for S2, masked in ((win - 8, False), (win + 904, True)):
        m = memest_json(mi, "--seq", str(S2), "--attn", "sdpa")
        if m:
            names = [i["name"] for i in m["inputs"]]
            r = rows(m, "ScaledDotProductAttention")[0]
            lse = 0 if masked else H * S2 * 4
            check(("causal_mask" in names) == masked and r["output_bytes"] == S2 * H * HD * 2 + lse,
                  f"Mistral sdpa at {S2} tokens (window {win}): mask {'causal_mask' in names}, outputs {r['output_bytes']}")
    check(any("torch 1.13 has no SDPA" in n.get("text", str(n)) for n in o.get("notes", [])), f"no note on the kernels: {o.get('notes')}")
    # fp32: flash does not run it; the efficient kernel, no mask, no padding
    small = path("golden", "truth", "llm", "llama_small.config.json")
    f = memest_json(small, "--seq", "64", "--attn", "sdpa")
    if f:
        c = json.load(open(small))
        hd = c["hidden_size"] // c["num_attention_heads"]
        r = rows(f, "ScaledDotProductAttention")[0]
        check(r["output_bytes"] == 64 * c["num_attention_heads"] * hd * 4, f"fp32 efficient kernel outputs {r['output_bytes']} B")


def case_flash():
    B, S = 1, 2048
    o = memest_json(L3, "--seq", str(S), "--batch", str(B), "--attn", "flash")
    p = memest_json(L3, "--seq", str(S), "--batch", str(B), "--attn", "sdpa")
    if not o or not p:
        return
    check(not rows(o, "Expand"), "flash_attention_2 calls no repeat_kv")
    check(len(rows(p, "Expand")) == 2 * LAYERS, "sdpa repeats k and v a layer")
    # repeat_kv's copies are what sdpa holds beyond flash: 2 x [B,H,S,hd] a layer's
    # attention, alive together with q, k, v
    check(o["memory"]["steps"][0]["peak"] <= p["memory"]["steps"][0]["peak"], "flash peak above sdpa's")


def case_paged():
    B, S, N = 3, 100, 5
    o = memest_json(L3, "--seq", str(S), "--new-tokens", str(N), "--batch", str(B), "--kv-cache", "paged")
    d = memest_json(L3, "--seq", str(S), "--new-tokens", str(N), "--batch", str(B))
    if not o or not d:
        return
    per_seq = math.ceil((S + N) / 16)
    kv = o["kv_cache"]
    check(kv["tokens"] == B * per_seq * 16, f"paged tokens {kv['tokens']}, want {B * per_seq * 16}")
    check(kv["blocks"] == B * per_seq and kv["block_tokens"] == 16 and kv["block_bytes"] == 16 * PER_TOKEN,
          f"blocks {kv}")
    check(kv["bytes"] == B * per_seq * 16 * PER_TOKEN, f"cache bytes {kv['bytes']}")
    pools = [i for i in o["inputs"] if i["name"].startswith("kv_cache.")]
    check(len(pools) == LAYERS, f"{len(pools)} pools, want one a layer")
    for i in pools[:1]:
        check(i["shape"] == [2, B * per_seq, 16, HKV, HD], f"pool shape {i['shape']}")
    st = o["memory"]["steps"][0]
    check(st["at_peak"]["inputs"] >= kv["bytes"], "the pools are not alive at the peak")
    # written in place: nothing new survives the step but the logits
    # (vLLM's: the last token's, [B,1,V] fp32)
    logits = B * CFG["vocab_size"] * 4
    grow = st["end"] - st["baseline"]
    ws = st["at_peak"]["workspace"]  # cuBLAS's, taken at the first GEMM and kept
    check(grow == logits + ws, f"paged step keeps {grow} B beyond its start, want logits {logits} + cuBLAS workspace {ws}")
    dst = d["memory"]["steps"][0]
    check(dst["end"] - dst["baseline"] > B * PER_TOKEN, "the dynamic cache's cat does not grow (the test would prove nothing)")
    at = rows(o, "ScaledDotProductAttention")
    check(len(at) == LAYERS, "one paged attention a layer")
    if at:
        check(at[0]["macs"] == 2 * B * H * 1 * per_seq * 16 * HD, f"paged MACs {at[0]['macs']}")
        check(at[0]["output_bytes"] == B * H * HD * 2 + B * H * 4, f"paged kernel outputs {at[0]['output_bytes']}")
    check(not rows(o, "Concat") or all(r["output_shape"][-1] == HD for r in rows(o, "Concat")), "a cache cat in the paged graph")
    lm = [r for r in o["layers"] if r["name"] == "lm_head"]
    check(lm and lm[0]["output_shape"] == [B, 1, CFG["vocab_size"]], "logits of the last token only")
    # --max-batch re-binds the pools with the batch: its answer's need is
    # the need of a run at that batch
    mb = memest_json(L3, *GPU, "--seq", "4000", "--new-tokens", "96", "--kv-cache", "paged", "--max-batch")
    if mb:
        a = mb["device"]["max_batch"]
        r = memest_json(L3, *GPU, "--seq", "4000", "--new-tokens", "96", "--kv-cache", "paged", "--batch", str(a["batch"]))
        if r:
            check(r["device"]["needed"] == a["needed"], f"--max-batch {a['batch']} needs {a['needed']}, a run at it {r['device']['needed']}")
            check(r["kv_cache"]["blocks"] == a["batch"] * 256, f"pools at batch {a['batch']}: {r['kv_cache']['blocks']} blocks")
    # a paged prefill: flash on the fresh keys, the pool written in place
    p = memest_json(L3, "--seq", "1000", "--kv-cache", "paged")
    if p:
        check(p["kv_cache"]["blocks"] == math.ceil(1000 / 16), f"prefill blocks {p['kv_cache']['blocks']}")
        lm = [r for r in p["layers"] if r["name"] == "lm_head"]
        check(lm and lm[0]["output_shape"] == [1, 1, CFG["vocab_size"]], "prefill logits of the last token only")


# Models the concurrency answer is held to: config, extra options, the
# weight bytes (None: the timeline's own) and KV bytes an element. A model
# is one line here and one case name in tests/meson.build.
SERVE_MODELS = {
    "llama-3-8b": (L3, [], 8030261248 * 2, 2),
    # GPTQ int4 layout (--weights int4): the timeline's own weight bytes
    # (tests/test_issue14_quant.py holds them to the header layout)
    "mixtral-8x7b-int4": (path("models", "llm", "mixtral-8x7b", "config.json"), ["--weights", "int4"], None, 2),
}


def case_max_seq(model):
    """--max-seq at batch 8: the answer's timeline fits, one token more does not."""
    cfg, extra, _, _ = SERVE_MODELS[model]
    o = memest_json(cfg, *GPU, *extra, "--batch", "8", "--max-seq")
    if not o:
        return
    ms = o["device"]["max_seq"]
    s = ms["seq"]
    check(s > 0 and ms["needed"] <= o["device"]["memory"] < ms["needed_next"], f"{model} max-seq: {ms}")
    at = memest_json(cfg, *GPU, *extra, "--batch", "8", "--seq", str(s))
    above = memest_json(cfg, *GPU, *extra, "--batch", "8", "--seq", str(s + 1))
    if at and above:
        check(at["device"]["fits"] and at["device"]["needed"] == ms["needed"], f"{model} at {s}: {at['device']}")
        check(not above["device"]["fits"] and above["device"]["needed"] == ms["needed_next"],
              f"{model} at {s + 1}: {above['device']}")
    print(f"{model}: --max-seq at batch 8 on h100-sxm: {s} tokens ({ms['needed']} bytes; {s + 1}: {ms['needed_next']})")


def concurrency(cfg, extra, length, *more):
    o = memest_json(cfg, *GPU, *extra, "--max-concurrency", str(length), *more)
    return o["device"]["max_concurrency"] if o else None


def case_concurrency(model):
    cfg, extra, weights, kv_elt = SERVE_MODELS[model]
    c0 = json.load(open(cfg))
    heads = c0["num_attention_heads"]
    hd = c0.get("head_dim") or c0["hidden_size"] // heads
    per_token = 2 * c0["num_hidden_layers"] * c0.get("num_key_value_heads", heads) * hd * kv_elt
    ctx = max(c0.get("max_position_embeddings", 2048), 2048)
    gpu = memest_json(cfg, *GPU, *extra, "--seq", "16")
    if not gpu:
        return
    mem = gpu["device"]["memory"]
    for length in (4096, 8192):
        c = concurrency(cfg, extra, length)
        if not c:
            continue
        tag = f"{model} LEN {length}"
        check(c["max_num_batched_tokens"] == ctx, f"{tag}: max_num_batched_tokens")
        check(c["profile_seqs"] == 256 and c["profile_tokens"] == c["max_num_batched_tokens"] // 256, f"{tag}: profile run {c}")
        check(c["budget"] == int(0.9 * mem), f"{tag}: budget {c['budget']} vs 0.9 x {mem}")
        want_w = weights if weights is not None else gpu["memory"]["steps"][0]["at_peak"]["weights"]
        check(c["weights"] == want_w, f"{tag}: weights {c['weights']}, want {want_w}")
        check(c["block_bytes"] == 16 * per_token, f"{tag}: block bytes {c['block_bytes']}")
        blocks = (c["budget"] - c["weights"] - c["activation_peak"] - c["cuda_context"]) // c["block_bytes"]
        check(c["blocks"] == blocks, f"{tag}: blocks {c['blocks']}, want {blocks}")
        per = math.ceil(length / 16)
        want = min(256, blocks // per)
        check(c["seqs"] == want and c["blocks_per_seq"] == per, f"{tag}: {c['seqs']} sequences, want {want}")
        if want < 256:
            check(not c["capped_by_max_num_seqs"], f"{tag}: capped")
            check(c["needed"] <= c["budget"] < c["needed_next"] and c["confirmed"],
                  f"{tag}: timelines {c['needed']} / {c['needed_next']} vs budget {c['budget']}")
        tps = c["seqs"] * 3350e9 / (c["weights"] + c["seqs"] * length * per_token)  # h100-sxm: 3350 GB/s
        check(abs(c.get("decode_bandwidth_bound_tokens_per_second", 0) - tps) <= 1e-6 * tps, f"{tag}: decode bound {c}")
        # the profile's activation peak is the prefill timeline's, paged, 256 x tokens/256
        p = memest_json(cfg, *GPU, *extra, "--kv-cache", "paged", "--batch", "256", "--seq", str(c["profile_tokens"]))
        if p:
            st = p["memory"]["steps"][0]
            act = st["peak"] - st["at_peak"]["weights"] - st["at_peak"]["inputs"]
            check(act == c["activation_peak"], f"{tag}: activation peak {c['activation_peak']} vs the profile timeline's {act}")
        # the answer's decode step, re-run on its own
        if c["seqs"] < 1:
            continue
        d = memest_json(cfg, *GPU, *extra, "--kv-cache", "paged", "--batch", str(c["seqs"]), "--seq", str(length - 1),
                        "--new-tokens", "1")
        if d:
            st = d["memory"]["steps"][0]
            act = st["peak"] - st["at_peak"]["weights"] - st["at_peak"]["inputs"]
            need = st["peak"] + max(0, c["activation_peak"] - act) + c["cuda_context"]
            check(need == c["needed"], f"{tag}: decode step needs {need}, the answer says {c['needed']}")
            check(st["at_peak"]["inputs"] >= c["seqs"] * per * c["block_bytes"], f"{tag}: the pools at the peak")
    # short sequences: the blocks hold more than max_num_seqs
    c = concurrency(cfg, extra, 128)
    if c and c["blocks"] // 8 > 256:
        check(c["seqs"] == 256 and c["capped_by_max_num_seqs"] and c["needed"] <= c["budget"] and c["needed_next"] == 0,
              f"{model} LEN 128: {c}")
    # the knobs move the answer the way vLLM's arithmetic says
    c = concurrency(cfg, extra, 4096, "--gpu-memory-utilization", "0.5")
    if c:
        check(c["budget"] == int(0.5 * mem) and c["seqs"] == min(256, c["blocks"] // 256), f"{model} 0.5: {c}")
    a, b = concurrency(cfg, extra, 4096), concurrency(cfg, extra, 4096, "--max-num-batched-tokens", str(2 * ctx))
    if a and b:
        check(b["profile_tokens"] == 2 * ctx // 256 and b["activation_peak"] > a["activation_peak"] and b["blocks"] < a["blocks"],
              f"{model} {2 * ctx} batched tokens: {b['activation_peak']} vs {a['activation_peak']}")
    # the table says it too
    rc, out, err = run(cfg, *GPU, *extra, "--max-concurrency", "4096")
    check(rc == 0 and "concurrent sequences:" in out and "decode step of" in out, f"{model} table: {out[-600:]}")


def case_tokens():
    B, S, N = 4, 1000, 24
    o = memest_json(L3, *GPU, "--seq", str(S), "--new-tokens", str(N), "--batch", str(B), "--kv-cache", "paged")
    if not o:
        return
    weights = 8030261248 * 2
    read = weights + B * (S + N) * PER_TOKEN  # the kernel reads each context, not whole blocks
    got = o["device"]["decode_bandwidth_bound_tokens_per_second"]
    want = B * 3350e9 / read
    check(abs(got - want) / want < 1e-6, f"decode bound {got}, want {want} (bandwidth 3350 GB/s)")


def case_truth(model, kind):
    """golden/truth/llm/<model>.<kind>.json (tests/llm/measure_<kind>.py,
    PyTorch on CPU): peak and end within 2 %, the cache's bytes exact"""
    t = json.load(open(path("golden", "truth", "llm", f"{model}.{kind}.json")))
    cfg = path("golden", "truth", "llm", t["config"])
    for mode, by_batch in t["results"].items():
        for b, r in by_batch.items():
            args = [cfg, "--runtime", "cpu", "--batch", b, "--seq", str(t["seq"])]
            args += ["--kv-cache", "paged"] if kind == "paged" else ["--attn", "sdpa"]
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
                check(abs(err) <= 0.02, f"{tag}: {key} {st[key]} vs PyTorch {r[key]} ({100 * err:+.2f} %)")
            check(o["kv_cache"]["bytes"] == r["cache_bytes_end"], f"{tag}: cache {o['kv_cache']['bytes']} vs {r['cache_bytes_end']}")


def case_errors():
    small = path("golden", "truth", "llm", "llama_small.config.json")
    onnx = path("models", "resmlp100.json")
    bad = [
        ([L3, "--kv-cache", "paged", "--attn", "sdpa"], "--attn sdpa"),
        ([L3, "--kv-cache", "static", "--attn", "flash", "--new-tokens", "2"], "StaticCache"),
        ([small, "--attn", "flash"], "float16/bfloat16"),
        ([L3, "--attn", "fast"], "--attn 'fast'"),
        ([L3, *GPU, "--max-concurrency", "4096", "--train"], "cannot be given together"),
        ([L3, "--gpu-memory-utilization", "0.5"], "needs --max-concurrency"),
        ([L3, *GPU, "--max-concurrency", "4096", "--gpu-memory-utilization", "1.5"], "fraction"),
        ([L3, *GPU, "--max-concurrency", "4096", "--kv-cache", "static"], "paged"),
        ([L3, *GPU, "--max-concurrency", "9000"], "max_position_embeddings"),
        ([L3, "--max-concurrency", "4096"], "needs --gpu"),
    ]
    bad.append(([onnx, "--attn", "sdpa"], "apply to language models"))
    for args, msg in bad:
        rc, out, err = run(*args)
        check(rc == 2 and msg in err, f"memest {' '.join(args)}: exit {rc}, want 2 saying '{msg}': {err[-300:]}")


if CASE.startswith("maxseq-"):
    case_max_seq(CASE[len("maxseq-"):])
elif CASE.startswith("concurrency-"):
    case_concurrency(CASE[len("concurrency-"):])
elif CASE.startswith("truth-"):
    kind, model = CASE[len("truth-"):].split("-", 1)
    case_truth(model, kind)
else:
    {"sdpa": case_sdpa, "flash": case_flash, "paged": case_paged, "tokens": case_tokens, "errors": case_errors}[CASE]()
print(f"{CASE}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
