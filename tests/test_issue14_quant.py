#!/usr/bin/env python3
"""Issue 14, helper quant: stored weight bytes, --weights, dequantization
temporaries, --kv-dtype and the roofline by dtype, through the memest command.

usage: test_issue14_quant.py MEMEST SOURCE_ROOT CASE
  headers   model folders of headers only (no weight byte): fp32, bf16, mixed
            dtypes (a small Llama crafted here) and Llama-3-8B's GPTQ int4
            g128, AWQ, bnb NF4 with double quantization, bnb int8 and fp8
            with scales (tests/llm/craft_headers.py): totals.param_bytes and
            the timeline's weights equal the sum of the headers' data_offsets
            spans, read here from the files; parameters unchanged; MACs equal
            to the unquantized model's
  weights   --weights on Llama-3-8B's config: int4 equals the GPTQ headers'
            bytes, int8 and fp8 the headers' less what the loader does not
            keep resident, nf4 bnb's layout (block 64, fp32 absmax, 16-float
            code), fp32/fp16/bf16 numel x size; the head and embedding stay
  dequant   the timeline's temporaries: NF4's dequantized [out, in] weight in a
            prefill, none in a one-token decode; LLM.int8's activation copies;
            GPTQ none; a note names the kernel (fp8's quantized activation and
            the rest over the whole timeline: tests/unit/test_llm_quant.c)
  kv        --kv-dtype fp8 halves a bf16 cache's bytes per token; fp16/bf16
            as given; the cache inputs are stored in that dtype
  roofline  a bf16 config's prefill on h100-sxm runs at the 16-bit peak
            (faster than its FLOPs at fp32 allow); decode's bandwidth bound
            reads the stored (quantized) weight bytes plus the KV cache
  errors    --weights / --kv-dtype that bind nothing or conflict: exit 2
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run  # noqa: E402

CASE = sys.argv[3]
TMP = tempfile.mkdtemp(prefix="memest-i14-quant-")
SIZE = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I8": 1, "U8": 1, "F8_E4M3": 1}
L3 = path("models", "llm", "llama-3-8b", "config.json")
SMALL = path("golden", "truth", "llm", "llama_small.config.json")


def memest_json(*args):
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, f"memest {' '.join(args)}: exit {rc}: {err[-400:]}")
    return (json.loads(out), err) if rc == 0 else (None, err)


def header_bytes(folder):
    """Sum of every tensor's data_offsets span, read from the headers."""
    total = 0
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            hdr = json.loads(fh.read(n))
        total += sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in hdr.items() if k != "__metadata__")
    return total


def write_st(p, tensors):
    header, at = {}, 0
    for name, dt, shape in tensors:
        nb = SIZE[dt]
        for d in shape:
            nb *= d
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [at, at + nb]}
        at += nb
    text = json.dumps(header).encode()
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.truncate(8 + len(text) + at)


def small_folder(name, dt_of):
    """llama_small (vocab 1000, d 256, 2 layers, 8 heads, 2 KV heads, I 688) with
    each tensor's dtype from dt_of(kind): kind embed | norm | linear | head."""
    cfg = json.load(open(SMALL))
    V, D, L, I = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    hd = D // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    t = [("model.embed_tokens.weight", dt_of("embed"), (V, D))]
    for l in range(L):
        p = f"model.layers.{l}."
        t += [(p + "input_layernorm.weight", dt_of("norm"), (D,)), (p + "post_attention_layernorm.weight", dt_of("norm"), (D,))]
        for n, o, i in [("self_attn.q_proj", D, D), ("self_attn.k_proj", kv, D), ("self_attn.v_proj", kv, D),
                        ("self_attn.o_proj", D, D), ("mlp.gate_proj", I, D), ("mlp.up_proj", I, D), ("mlp.down_proj", D, I)]:
            t.append((p + n + ".weight", dt_of("linear"), (o, i)))
    t += [("model.norm.weight", dt_of("norm"), (D,)), ("lm_head.weight", dt_of("head"), (V, D))]
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    write_st(os.path.join(d, "model.safetensors"), t)
    shutil.copy(SMALL, os.path.join(d, "config.json"))
    return d


CRAFTED = None


def crafted():
    """Llama-3-8B's quantized headers as folders (config.json beside them)."""
    global CRAFTED
    if CRAFTED is None:
        out = os.path.join(TMP, "crafted")
        os.makedirs(out)
        subprocess.run([sys.executable, path("tests", "llm", "craft_headers.py"), out], check=True, stdout=subprocess.DEVNULL)
        CRAFTED = {}
        for k in ("gptq", "awq", "nf4", "int8", "fp8"):
            d = os.path.join(TMP, "l3-" + k)
            os.makedirs(d)
            # moved, not copied: a copy would write the sparse file's gigabytes
            os.replace(os.path.join(out, f"llama3-8b-{k}.safetensors"), os.path.join(d, "model.safetensors"))
            shutil.copy(L3, os.path.join(d, "config.json"))
            CRAFTED[k] = d
        CRAFTED["bf16"] = os.path.join(out, "llama3-8b-bf16")
        shutil.copy(L3, CRAFTED["bf16"])
    return CRAFTED


def l3_linears():
    D, KV, I = 4096, 1024, 14336
    return [(D, D), (KV, D), (KV, D), (D, D), (I, D), (I, D), (D, I)] * 32


def case_headers():
    plain, _ = memest_json(L3, "--seq", "8")
    folders = {
        "fp32": small_folder("fp32", lambda k: "F32"),
        "bf16": small_folder("bf16", lambda k: "BF16"),
        "mixed": small_folder("mixed", lambda k: {"embed": "F16", "norm": "F32", "linear": "BF16", "head": "F32"}[k]),
    }
    folders.update(crafted())
    for name, d in folders.items():
        o, err = memest_json(d, "--seq", "8")
        if not o:
            continue
        want = header_bytes(d)
        tot = o["totals"]
        check(tot["param_bytes"] == want, f"[{name}] param_bytes {tot['param_bytes']:,}, headers {want:,}")
        w = o["memory"]["steps"][0]["at_peak"]["weights"]
        check(w == want, f"[{name}] timeline weights {w:,}, headers {want:,}")
        if name not in ("fp32", "bf16", "mixed") and plain:
            check(tot["params"] == plain["totals"]["params"] and tot["macs"] == plain["totals"]["macs"],
                  f"[{name}] params {tot['params']:,} / MACs {tot['macs']:,} moved from the config's "
                  f"{plain['totals']['params']:,} / {plain['totals']['macs']:,}")
        if name in ("gptq", "awq", "nf4", "int8", "fp8"):
            check("quant_kernel" in err, f"[{name}] no note naming the kernel: {err[-300:]}")
    # --dtype converts plain floats as they load (model.bfloat16()): half the fp32 headers
    o, _ = memest_json(folders["fp32"], "--seq", "8", "--dtype", "bf16")
    if o:
        want = header_bytes(folders["fp32"]) // 2
        check(o["totals"]["param_bytes"] == want, f"[fp32 --dtype bf16] param_bytes {o['totals']['param_bytes']:,}, want {want:,}")
    # a header tensor that belongs to no parameter of the layout
    d = small_folder("stray", lambda k: "F32")
    with open(os.path.join(d, "model.safetensors"), "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(n))
    t = [(k, v["dtype"], v["shape"]) for k, v in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0])]
    t = [x for x in t if x[0] != "model.norm.weight"] + [("model.final_norm.weight", "F32", (256,))]
    write_st(os.path.join(d, "model.safetensors"), t)
    rc, _, err = run(d, "--seq", "8")
    check(rc == 2 and "model.final_norm.weight" in err, f"[stray tensor] exit {rc}: {err.strip()[-300:]}")


def case_weights():
    c = crafted()
    lin = l3_linears()
    n_lin = len(lin)
    base, _ = memest_json(L3, "--seq", "8")
    if not base:
        return
    others = base["totals"]["param_bytes"] - 2 * sum(o * i for o, i in lin)  # embedding, norms, head in bf16
    nf4 = sum((o * i + 1) // 2 + 4 * ((o * i + 63) // 64) + 64 for o, i in lin)
    want = {
        "int4": header_bytes(c["gptq"]),  # AutoGPTQ: qweight, qzeros, fp16 scales, g_idx; the rest 2-byte floats
        "int8": header_bytes(c["int8"]) - n_lin,  # weight_format (a state-dict entry) is not resident
        "fp8": header_bytes(c["fp8"]) - 4 * n_lin,  # no static input_scale
        "nf4": others + nf4,
        "bf16": base["totals"]["param_bytes"],
        "fp16": base["totals"]["param_bytes"],
        "fp32": 2 * base["totals"]["param_bytes"],
    }
    for w, b in want.items():
        o, err = memest_json(L3, "--seq", "8", "--weights", w)
        if not o:
            continue
        check(o["totals"]["param_bytes"] == b, f"--weights {w}: param_bytes {o['totals']['param_bytes']:,}, want {b:,}")
        check(o["totals"]["params"] == base["totals"]["params"], f"--weights {w}: params moved")
        check(o["memory"]["steps"][0]["at_peak"]["weights"] == b, f"--weights {w}: timeline weights")
    # the same on a folder of bf16 headers: a loader quantizes what it reads
    o, _ = memest_json(c["bf16"], "--seq", "8", "--weights", "int4")
    if o:
        check(o["totals"]["param_bytes"] == want["int4"], f"folder --weights int4: {o['totals']['param_bytes']:,}")


def peak_temp(*args):
    o, err = memest_json(*args)
    return (o["memory"]["steps"][0]["at_peak"]["temporary"], o, err) if o else (None, None, err)


def case_dequant():
    # NF4 prefill of 64 tokens: the whole gate/up weight [14336, 4096] in bf16
    t, o, err = peak_temp(L3, "--seq", "64", "--weights", "nf4")
    if o is not None:
        check(t == 14336 * 4096 * 2, f"nf4 prefill: temporary at the peak {t:,}, want {14336 * 4096 * 2:,}")
        check("gemv_4bit" in err and "dequantize_4bit" in err, f"nf4: note: {err[-400:]}")
    # one token per step, batch 1: gemv_4bit, no copy; batch 2 dequantizes again
    t, o, _ = peak_temp(L3, "--seq", "64", "--new-tokens", "4", "--weights", "nf4")
    if o is not None:
        check(t == 0, f"nf4 decode batch 1: temporary {t:,}, want 0 (gemv_4bit)")
    t, o, _ = peak_temp(L3, "--seq", "64", "--new-tokens", "4", "--batch", "2", "--weights", "nf4")
    if o is not None:
        check(t == 14336 * 4096 * 2, f"nf4 decode batch 2: temporary {t:,}")
    # the CPU backend of bitsandbytes always takes gemv_4bit
    t, o, _ = peak_temp(L3, "--seq", "64", "--weights", "nf4", "--runtime", "cpu")
    if o is not None:
        check(t == 0, f"nf4 on the CPU: temporary {t:,}")
    # GPTQ: exllama/marlin dequantize in registers
    t, o, err = peak_temp(L3, "--seq", "64", "--weights", "int4")
    if o is not None:
        check(t == 0 and "registers" in err, f"int4: temporary {t:,}; {err[-300:]}")
    # a model whose peak falls in its MLP (a small vocabulary: the logits
    # do not dominate), to see the smaller temporaries at the peak
    cfg = os.path.join(TMP, "mlp.json")
    D, I, T = 1024, 4096, 16
    json.dump({"model_type": "llama", "vocab_size": 256, "hidden_size": D, "num_hidden_layers": 1,
               "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": I,
               "torch_dtype": "bfloat16"}, open(cfg, "w"))
    shapes = [(D, D), (I, D), (D, I)]
    # fp8's quantized activation is smaller than the RMSNorm's fp32 copies,
    # never at the peak: tests/unit/test_llm_quant.c reads it from the series
    # LLM.int8, bf16 activations: fp16 copy + CA, CAt, col32 + SCA, SCAt + int32 out + fp16 result
    cands = [2 * T * i + 3 * T * i + 4 * T + 4 * i + 6 * T * o for o, i in shapes]
    t, o, _ = peak_temp(cfg, "--seq", str(T), "--weights", "int8")
    if o is not None:
        check(t in cands, f"int8: temporary {t:,}, one of {sorted(cands)}")
    t, o, _ = peak_temp(cfg, "--seq", str(T), "--weights", "int4")
    if o is not None:
        check(t == 0, f"int4 (mlp model): temporary {t:,}")


def case_kv():
    for kv, per in (("fp8", 65536), ("bf16", 131072), ("fp16", 131072)):
        for extra in ([], ["--new-tokens", "8"], ["--new-tokens", "8", "--kv-cache", "static"]):
            o, err = memest_json(L3, "--seq", "256", "--kv-dtype", kv, *extra)
            if not o:
                continue
            check(("kv_dtype" in err) == (kv != "bf16"), f"--kv-dtype {kv}: note {err[-300:]}")
            check(o["kv_cache"]["bytes_per_token"] == per, f"--kv-dtype {kv} {extra}: {o['kv_cache']}")
            if extra:
                ins = {i["name"]: i["dtype"] for i in o["inputs"]}
                want = {"fp8": "float8_e4m3fn", "bf16": "bfloat16", "fp16": "float16"}[kv]
                got = ins.get("past_key_values.0.key")
                check(got == want, f"--kv-dtype {kv} {extra}: cache input stored as {got}")
    # fp8 cache: the decode step's peak falls (the cache is half) but a
    # layer's dequantized copy is there
    a, _ = memest_json(L3, "--seq", "4096", "--new-tokens", "8", "--batch", "4")
    b, _ = memest_json(L3, "--seq", "4096", "--new-tokens", "8", "--batch", "4", "--kv-dtype", "fp8")
    if a and b:
        pa, pb = a["memory"]["steps"][0]["peak"], b["memory"]["steps"][0]["peak"]
        half = a["kv_cache"]["bytes"] // 2
        check(pa - half < pb < pa, f"fp8 cache: peak {pb:,} vs bf16 {pa:,} (cache {a['kv_cache']['bytes']:,})")


def case_roofline():
    o, _ = memest_json(L3, "--seq", "2048", "--gpu", "h100-sxm")
    if o:
        t = o["device"]["roofline_seconds"]["forward"]
        fl = o["totals"]["flops"]
        check(fl / 989e12 <= t < fl / 67e12, f"bf16 prefill: {t} s for {fl:,} FLOPs (fp32 peak would need {fl / 67e12} s)")
    g = crafted()["gptq"]
    o, _ = memest_json(g, "--seq", "1024", "--new-tokens", "16", "--batch", "4", "--gpu", "h100-sxm")
    if o:
        want = 4 * 3350e9 / (header_bytes(g) + o["kv_cache"]["bytes"])
        got = o["device"].get("decode_bandwidth_bound_tokens_per_second", 0)
        check(abs(got - want) <= 1e-9 * want, f"gptq decode bound {got}, want {want}")


def case_errors():
    onnx = path("models", "onnx", "mobilenet_v2_op13_eval.onnx")
    for opt in (["--weights", "int4"], ["--kv-dtype", "fp8"]):
        rc, _, err = run(onnx, *opt)
        check(rc == 2 and opt[0] in err, f"{opt} on {onnx}: exit {rc}, {err.strip()[-200:]}")
    rc, _, err = run(L3, "--weights", "int3")
    check(rc == 2 and "int3" in err and "nf4" in err, f"--weights int3: exit {rc}, {err.strip()[-200:]}")
    rc, _, err = run(L3, "--kv-dtype", "int8")
    check(rc == 2 and "int8" in err and "fp8" in err, f"--kv-dtype int8: exit {rc}, {err.strip()[-200:]}")
    rc, _, err = run(crafted()["gptq"], "--weights", "nf4")
    check(rc == 2 and "GPTQ" in err and "--weights" in err, f"--weights nf4 on a GPTQ checkpoint: exit {rc}, {err.strip()[-200:]}")
    rc, _, err = run(crafted()["gptq"], "--weights", "fp16")
    check(rc == 2 and "GPTQ" in err, f"--weights fp16 on a GPTQ checkpoint: exit {rc}, {err.strip()[-200:]}")
    rc, _, err = run(L3, "--weights", "fp16", "--dtype", "bf16")
    check(rc == 2 and "conflict" in err, f"--weights fp16 --dtype bf16: exit {rc}, {err.strip()[-200:]}")


if "--seq" not in run("--help")[1]:
    print("SKIP: this memest has no language-model path (--seq)")
    sys.exit(77)
try:
    {"headers": case_headers, "weights": case_weights, "dequant": case_dequant, "kv": case_kv,
     "roofline": case_roofline, "errors": case_errors}[CASE]()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
sys.exit(1 if failures else 0)
