#!/usr/bin/python3
"""Crafts safetensors checkpoints made of headers only, valid and hostile,
for tests/unit/test_llm_headers.c:

    craft_headers.py OUTDIR [STAMP]
    craft_headers.py --corpus DIR     (small complete files for tests/fuzz)

writes OUTDIR/<case>(.safetensors | /) and OUTDIR/manifest.json, which says
for each case what the reader must answer: an error (a substring of the
message, which names the file and the tensor or key) or the logical
parameter count, the stored bytes, the quantization, bits, group and the
compute dtype.

The data region is never written: each file is truncated (ftruncate) to
8 + header + data bytes, a sparse file, so a 16 GB Llama-3-8B checkpoint
takes a few kilobytes on disk and the reader's "tensors end where the file
ends" check still sees the true size.

The valid checkpoints have Llama-3-8B's tensors (config: hidden 4096,
32 layers, 32 heads, 8 KV heads, intermediate 14336, vocab 128256, untied
head), whose unquantized count is the published 8,030,261,248; each
quantized layout (AutoGPTQ, AutoAWQ, bitsandbytes int8 and 4-bit, fp8)
must give the same logical count and its own exact bytes, computed here
from the layouts (see src/load/safetensors.c for their sources).
"""
import json
import os
import struct
import sys

SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
        "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write_st(path, tensors, metadata=None, extra=0, raw_header=None, length=None, size=None):
    """tensors: [(name, dtype, shape)] laid out back to back; returns data bytes."""
    header, at = {}, 0
    for name, dt, shape in tensors:
        nb = numel(shape) * SIZE[dt]
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [at, at + nb]}
        at += nb
    if metadata is not None:
        header["__metadata__"] = metadata
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if length is None else length))
        f.write(text)
        f.truncate(8 + len(text) + at + extra if size is None else size)
    return at


# Llama-3-8B (meta-llama/Meta-Llama-3-8B config.json)
V, D, L, H, KV, HD, I = 128256, 4096, 32, 32, 8, 128, 14336
LLAMA3_8B = 8030261248


def llama_linears():
    """(name, out, in) of every Linear in a Llama decoder."""
    for l in range(L):
        p = f"model.layers.{l}."
        yield p + "self_attn.q_proj", H * HD, D
        yield p + "self_attn.k_proj", KV * HD, D
        yield p + "self_attn.v_proj", KV * HD, D
        yield p + "self_attn.o_proj", D, H * HD
        yield p + "mlp.gate_proj", I, D
        yield p + "mlp.up_proj", I, D
        yield p + "mlp.down_proj", D, I


def llama_others(dt):
    yield "model.embed_tokens.weight", dt, (V, D)
    for l in range(L):
        yield f"model.layers.{l}.input_layernorm.weight", dt, (D,)
        yield f"model.layers.{l}.post_attention_layernorm.weight", dt, (D,)
    yield "model.norm.weight", dt, (D,)
    yield "lm_head.weight", dt, (V, D)


def quantized(kind):
    """Tensors of Llama-3-8B stored by one quantizer: linears quantized, the
    rest (embedding, norms, head) kept in the compute dtype, as each one does."""
    t = []
    if kind == "gptq" or kind == "awq":  # 4 bits, group 128, fp16 scales
        bits, group, dt = 4, 128, "F16"
        for n, o, i in llama_linears():
            if kind == "gptq":  # AutoGPTQ QuantLinear
                t += [(n + ".qweight", "I32", (i * bits // 32, o)), (n + ".qzeros", "I32", (i // group, o * bits // 32)),
                      (n + ".scales", "F16", (i // group, o)), (n + ".g_idx", "I32", (i,))]
            else:  # AutoAWQ WQLinear_GEMM
                t += [(n + ".qweight", "I32", (i, o * bits // 32)), (n + ".qzeros", "I32", (i // group, o * bits // 32)),
                      (n + ".scales", "F16", (i // group, o))]
    elif kind == "int8":  # bnb Linear8bitLt
        dt = "F16"
        for n, o, i in llama_linears():
            t += [(n + ".weight", "I8", (o, i)), (n + ".SCB", "F32", (o,)), (n + ".weight_format", "U8", ())]
    elif kind == "nf4":  # bnb Params4bit, blocksize 64, nested (double) quantization of absmax by 256
        dt = "BF16"
        for n, o, i in llama_linears():
            w, blocks = n + ".weight", o * i // 64
            t += [(w, "U8", (o * i // 2, 1)), (w + ".absmax", "U8", (blocks,)), (w + ".quant_map", "F32", (16,)),
                  (w + ".nested_absmax", "F32", ((blocks + 255) // 256,)), (w + ".nested_quant_map", "F32", (256,)),
                  (w + ".quant_state.bitsandbytes__nf4", "U8", (129,))]
    elif kind == "fp8":  # per-tensor fp8 (compressed-tensors style)
        dt = "BF16"
        for n, o, i in llama_linears():
            t += [(n + ".weight", "F8_E4M3", (o, i)), (n + ".weight_scale", "F32", ()), (n + ".input_scale", "F32", ())]
    return t + list(llama_others(dt)), dt


def valid(out, man):
    # bf16, four shards and an index, as the published checkpoint is stored
    d = os.path.join(out, "llama3-8b-bf16")
    os.makedirs(d, exist_ok=True)
    tensors = [(n + ".weight", "BF16", (o, i)) for n, o, i in llama_linears()] + list(llama_others("BF16"))
    assert sum(numel(s) for _, _, s in tensors) == LLAMA3_8B
    shards = [tensors[k::4] for k in range(4)]
    wm, total = {}, 0
    for k, part in enumerate(shards):
        name = f"model-{k + 1:05d}-of-00004.safetensors"
        total += write_st(os.path.join(d, name), part, {"format": "pt"})
        wm.update({n: name for n, _, _ in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f)
    man["llama3-8b-bf16"] = {"params": LLAMA3_8B, "bytes": total, "quant": "none", "dtype": "bfloat16",
                             "tensors": len(tensors)}
    man["llama3-8b-bf16/model-00002-of-00004.safetensors"] = {
        "params": sum(numel(s) for _, _, s in shards[1]), "bytes": 2 * sum(numel(s) for _, _, s in shards[1]),
        "quant": "none", "dtype": "bfloat16", "tensors": len(shards[1])}
    # shards out of offset order in the header are legal (the crate sorts)
    name = "reordered.safetensors"
    hdr = {"b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
           "a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}}
    write_st(os.path.join(out, name), [], raw_header=json.dumps(hdr).encode(), size=8 + len(json.dumps(hdr)) + 24)
    man[name] = {"params": 8, "bytes": 24, "quant": "none", "dtype": "float32", "tensors": 2}
    for kind, quant, bits, group in [("gptq", "GPTQ", 4, 128), ("awq", "AWQ", 4, 128), ("int8", "bitsandbytes int8", 8, 0),
                                     ("nf4", "bitsandbytes 4-bit", 4, 64), ("fp8", "fp8", 8, 0)]:
        t, dt = quantized(kind)
        name = f"llama3-8b-{kind}.safetensors"
        nb = write_st(os.path.join(out, name), t)
        man[name] = {"params": LLAMA3_8B, "bytes": nb, "quant": quant, "bits": bits, "group": group,
                     "dtype": {"F16": "float16", "BF16": "bfloat16"}[dt], "tensors": len(t)}


def hostile(out, man):
    def bad(name, expect, **kw):
        tensors = kw.pop("tensors", [("w", "F32", (2, 2))])
        write_st(os.path.join(out, name), tensors, **kw)
        man[name] = {"error": expect}

    def raw(name, hdr, data, expect, length=None):
        text = hdr if isinstance(hdr, bytes) else json.dumps(hdr).encode()
        write_st(os.path.join(out, name), [], raw_header=text, size=8 + len(text) + data, length=length)
        man[name] = {"error": expect}

    bad("len-past-eof.safetensors", "runs past the end of the file", length=1000, size=60)
    bad("len-absurd.safetensors", "over safetensors' limit", length=1 << 40)
    with open(os.path.join(out, "short.safetensors"), "wb") as f:
        f.write(b"\x10\x00\x00")
    man["short.safetensors"] = {"error": "too short"}
    raw("not-json.safetensors", b"{\"w\": {\"dtype\": \"F32\",", 0, "not valid JSON")
    raw("not-object.safetensors", b"[1, 2, 3]", 0, "not a JSON object")
    raw("deep.safetensors", b"{\"a\":" + b"[" * 100000 + b"]" * 100000 + b"}", 0, "nests deeper")
    raw("wide.safetensors", b"{\"w\": {\"dtype\": \"F32\", \"shape\": [" + b"1," * 5000000 + b"1], \"data_offsets\": [0, 4]}}",
        4, "more than")
    raw("dtype-lie.safetensors", {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}}, 8,
        "'w': 4 elements of F32 are 16 bytes, but data_offsets span 8")
    raw("dtype-unknown.safetensors", {"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}, 1,
        "'w' has dtype 'Q4'")
    raw("shape-negative.safetensors", {"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}}, 16,
        "'w': shape must be")
    raw("shape-fraction.safetensors", {"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}, 4,
        "'w': shape must be")
    raw("shape-overflow.safetensors", {"w": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 4]}}, 4,
        "'w': shape's element count overflows")
    raw("bytes-overflow.safetensors", {"w": {"dtype": "F64", "shape": [1 << 31, 1 << 31], "data_offsets": [0, 4]}}, 4,
        "'w': its byte count overflows")
    raw("overlap.safetensors", {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, 24, "'b' (data offsets 8..24) overlaps")
    raw("hole.safetensors", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                             "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}, 24, "'b' starts at data offset 16")
    raw("past-end.safetensors", {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, 8,
        "'a' ends at data offset 16, past the end")
    raw("offsets-reversed.safetensors", {"a": {"dtype": "F32", "shape": [0], "data_offsets": [16, 0]}}, 16,
        "'a': data_offsets must be")
    raw("trailing.safetensors", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 12,
        "data ends at offset 8 but the file holds 12")
    raw("duplicate.safetensors", b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
        b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', 8, "'a' is named twice")
    raw("metadata-bad.safetensors", {"__metadata__": {"format": 1}}, 0, "__metadata__ must map strings")
    raw("missing-key.safetensors", {"w": {"dtype": "F32", "shape": [1]}}, 4, "'w' needs")
    raw("gptq-no-scales.safetensors", {"l.qweight": {"dtype": "I32", "shape": [2, 8], "data_offsets": [0, 64]}}, 64,
        "'l.qweight': a packed int32 qweight needs")
    raw("nf4-no-weight.safetensors", {"l.weight.absmax": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 8,
        "'l.weight.absmax': 4-bit absmax without")
    # indexes
    for case, wm, expect in [
        ("index-missing-shard", {"a": "model-00001.safetensors", "b": "model-00002.safetensors"},
         "names shard 'model-00002.safetensors', which is missing"),
        ("index-escape", {"a": "../secret.safetensors"}, "names shard '../secret.safetensors', not a file name"),
        ("index-absent-tensor", {"a": "model-00001.safetensors", "zz": "model-00001.safetensors"},
         "names tensor 'zz' in shard 'model-00001.safetensors', which does not hold it"),
        ("index-twice", {"a": "model-00001.safetensors", "a2": "model-00003.safetensors"}, "tensor 'a' is in two shards"),
        ("index-no-map", None, "no \"weight_map\""),
    ]:
        d = os.path.join(out, case)
        os.makedirs(d, exist_ok=True)
        write_st(os.path.join(d, "model-00001.safetensors"), [("a", "F32", (2,))])
        write_st(os.path.join(d, "model-00003.safetensors"), [("a", "F32", (2,)), ("a2", "F32", (1,))])
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}} if wm is None else {"weight_map": wm}, f)
        man[case] = {"error": expect}


def corpus(out):
    """Small complete files (data bytes written, zeros) seeding the fuzzer:
    one linear of 64 x 32 in each quantized layout."""
    os.makedirs(out, exist_ok=True)
    o, i, g = 64, 32, 16
    n = "model.layers.0.mlp.up_proj"
    layouts = {
        "gptq": [(n + ".qweight", "I32", (i // 8, o)), (n + ".qzeros", "I32", (i // g, o // 8)),
                 (n + ".scales", "F16", (i // g, o)), (n + ".g_idx", "I32", (i,))],
        "awq": [(n + ".qweight", "I32", (i, o // 8)), (n + ".qzeros", "I32", (i // g, o // 8)), (n + ".scales", "F16", (i // g, o))],
        "int8": [(n + ".weight", "I8", (o, i)), (n + ".SCB", "F32", (o,)), (n + ".weight_format", "U8", ())],
        "nf4": [(n + ".weight", "U8", (o * i // 2, 1)), (n + ".weight.absmax", "F32", (o * i // 64,)),
                (n + ".weight.quant_map", "F32", (16,)), (n + ".weight.quant_state.bitsandbytes__nf4", "U8", (8,))],
        "fp8": [(n + ".weight", "F8_E4M3", (o, i)), (n + ".weight_scale_inv", "F32", (1, 1))],
        "bf16": [("model.embed_tokens.weight", "BF16", (16, 8)), ("model.norm.weight", "F32", (8,))],
    }
    kvs = [gkv("general.architecture", "str", "llama"), gkv("llama.block_count", "u32", 1),
           gkv("llama.embedding_length", "u32", 64), gkv("llama.attention.head_count", "u32", 4),
           gkv("tokenizer.ggml.tokens", "arr", ("str", ["a", "b", "c"])), gkv("general.alignment", "u32", 32)]
    write_gguf(os.path.join(out, "valid.gguf"), kvs, [("token_embd.weight", "Q8_0", (64, 3)), ("blk.0.ffn_down.weight", "Q4_K", (256, 2)),
                                                     ("output_norm.weight", "F32", (64,))])
    for k, t in layouts.items():
        write_st(os.path.join(out, f"valid-{k}.safetensors"), t, {"format": "pt"})
        with open(os.path.join(out, f"valid-{k}.safetensors"), "r+b") as f:  # real zeros, not a hole
            f.seek(0, 2)
            end = f.tell()
            f.seek(0)
            hl = struct.unpack("<Q", f.read(8))[0]
            f.seek(8 + hl)
            f.write(bytes(end - 8 - hl))


# GGUF (ggml/docs/gguf.md): value types and ggml's type traits (block elements, block bytes)
GV = {"u8": 0, "u32": 4, "i32": 5, "f32": 6, "str": 8, "arr": 9, "u64": 10}
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
        "Q6_K": (14, 256, 210)}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gkv(key, kind, val):
    out = gstr(key) + struct.pack("<I", GV[kind])
    if kind == "str":
        return out + gstr(val)
    if kind == "arr":  # (item kind, items) or (item kind, count, raw bytes) for a lying count
        it, items = val[0], val[1]
        if len(val) == 3:
            return out + struct.pack("<IQ", GV[it], items) + val[2]
        body = b"".join(gstr(x) if it == "str" else struct.pack({"u32": "<I", "i32": "<i"}[it], x) for x in items)
        return out + struct.pack("<IQ", GV[it], len(items)) + body
    return out + struct.pack({"u8": "<B", "u32": "<I", "i32": "<i", "f32": "<f", "u64": "<Q"}[kind], val)


def write_gguf(path, kvs, tensors, align=32, counts=None, version=3, magic=b"GGUF", offsets=None, size=None):
    """tensors: [(name, ggml type, ne)] (ne innermost first) laid out aligned;
    returns the data bytes. counts/offsets/size override what is written."""
    infos, at, data = b"", 0, []
    for k, (name, ty, ne) in enumerate(tensors):
        code, blck, tsize = GGML[ty]
        nb = numel(ne) // blck * tsize
        off = at if offsets is None else offsets[k]
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", code, off)
        data.append(nb)
        at = (at + nb + align - 1) // align * align
    nt, nkv = counts or (len(tensors), len(kvs))
    head = magic + struct.pack("<IQQ", version, nt, nkv) + b"".join(kvs) + infos
    start = (len(head) + align - 1) // align * align
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(start + at if size is None else size)
    return sum(data)


def llama_gguf_kvs(vocab_count=V):
    return [gkv("general.architecture", "str", "llama"), gkv("llama.block_count", "u32", L),
            gkv("llama.context_length", "u32", 8192), gkv("llama.embedding_length", "u32", D),
            gkv("llama.feed_forward_length", "u32", I), gkv("llama.attention.head_count", "u32", H),
            gkv("llama.attention.head_count_kv", "u32", KV), gkv("llama.rope.freq_base", "f32", 500000.0),
            gkv("llama.attention.layer_norm_rms_epsilon", "f32", 1e-5), gkv("general.file_type", "u32", 15),
            gkv("tokenizer.ggml.tokens", "arr", ("str", ["t"] * vocab_count))]


def gguf_cases(out, man):
    """Llama-3-8B as llama.cpp's Q4_K_M mix stores it (attn_v, ffn_down and
    output in Q6_K, the rest Q4_K, norms F32), and hostile GGUF headers."""
    t = [("token_embd.weight", "Q4_K", (D, V))]
    for l in range(L):
        p = f"blk.{l}."
        t += [(p + "attn_norm.weight", "F32", (D,)), (p + "attn_q.weight", "Q4_K", (D, H * HD)),
              (p + "attn_k.weight", "Q4_K", (D, KV * HD)), (p + "attn_v.weight", "Q6_K", (D, KV * HD)),
              (p + "attn_output.weight", "Q4_K", (H * HD, D)), (p + "ffn_norm.weight", "F32", (D,)),
              (p + "ffn_gate.weight", "Q4_K", (D, I)), (p + "ffn_up.weight", "Q4_K", (D, I)),
              (p + "ffn_down.weight", "Q6_K", (I, D))]
    t += [("output_norm.weight", "F32", (D,)), ("output.weight", "Q6_K", (D, V))]
    assert sum(numel(ne) for _, _, ne in t) == LLAMA3_8B
    nb = write_gguf(os.path.join(out, "llama3-8b-q4_k_m.gguf"), llama_gguf_kvs(), t)
    man["llama3-8b-q4_k_m.gguf"] = {"params": LLAMA3_8B, "bytes": nb, "quant": "GGUF", "dtype": "float32",
                                    "tensors": len(t), "config": {"family": "llama", "layers": L, "hidden": D, "heads": H,
                                                                  "kv_heads": KV, "intermediate": I, "vocab": V,
                                                                  "max_pos": 8192, "tied": False}}
    small = [("a.weight", "Q8_0", (64, 2)), ("b.weight", "F32", (8,))]
    kv = [gkv("general.architecture", "str", "llama")]

    def bad(name, expect, **kw):
        write_gguf(os.path.join(out, name), kw.pop("kvs", kv), kw.pop("tensors", small), **kw)
        man[name] = {"error": expect}

    bad("gguf-magic.gguf", "not a GGUF file", magic=b"GGUG")
    bad("gguf-version.gguf", "GGUF version 9", version=9)
    bad("gguf-tensor-count.gguf", "1099511627776 tensors cannot fit", counts=(1 << 40, 1))
    bad("gguf-key-count.gguf", "1099511627776 metadata keys cannot fit", counts=(2, 1 << 40))
    bad("gguf-string-past-end.gguf", "runs past the end of the file",
        kvs=[gstr("general.architecture") + struct.pack("<IQ", GV["str"], 1 << 40) + b"llama"], tensors=[])
    bad("gguf-array-count.gguf", "key 'tokenizer.ggml.tokens': an array of 1125899906842624 items cannot fit",
        kvs=kv + [gkv("tokenizer.ggml.tokens", "arr", ("str", 1 << 50, gstr("a")))])
    nested = struct.pack("<IQ", GV["arr"], 1) + struct.pack("<IQ", GV["arr"], 1) + struct.pack("<IQ", GV["u8"], 1) + b"\0"
    bad("gguf-nested.gguf", "key 'x': arrays nested deeper than 2",
        kvs=kv + [gstr("x") + struct.pack("<I", GV["arr"]) + nested])
    bad("gguf-dims.gguf", "tensor 'a.weight' has 5 dims", tensors=[("a.weight", "F32", (1, 1, 1, 1, 1))])
    write_gguf(os.path.join(out, "gguf-type.gguf"), kv, small)
    with open(os.path.join(out, "gguf-type.gguf"), "r+b") as f:  # a.weight's type 8 -> 99
        b = f.read()
        i = b.index(b"a.weight") + 8 + 4 + 16
        f.seek(i)
        f.write(struct.pack("<I", 99))
    man["gguf-type.gguf"] = {"error": "tensor 'a.weight' has ggml type 99"}
    bad("gguf-block.gguf", "tensor 'a.weight': Q4_K rows of 100 elements are not whole blocks of 256",
        tensors=[("a.weight", "Q4_K", (100, 4))])
    bad("gguf-misaligned.gguf", "tensor 'b.weight' at data offset 40 is not aligned to 32", offsets=[0, 40])
    bad("gguf-overlap.gguf", "tensor 'b.weight' (data offset 64) overlaps 'a.weight'", offsets=[0, 64],
        tensors=[("a.weight", "Q8_0", (64, 4)), ("b.weight", "F32", (8,))])
    bad("gguf-past-end.gguf", "tensor 'a.weight' ends at byte 296, past the end", size=200)
    bad("gguf-duplicate.gguf", "tensor 'a.weight' is named twice", tensors=[("a.weight", "F32", (8,)), ("a.weight", "F32", (8,))])
    bad("gguf-no-arch.gguf", "no general.architecture", kvs=[])
    bad("gguf-alignment.gguf", "general.alignment 3 is not a power of two", kvs=kv + [gkv("general.alignment", "u32", 3)])
    bad("gguf-layers.gguf", "key 'llama.block_count' is -1", kvs=kv + [gkv("llama.block_count", "i32", -1)])
    bad("gguf-hidden.gguf", "key 'llama.embedding_length' is 1e+15", kvs=kv + [gkv("llama.embedding_length", "u64", 10 ** 15)])


def main():
    if sys.argv[1] == "--corpus":
        return corpus(sys.argv[2])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    man = {}
    valid(out, man)
    hostile(out, man)
    gguf_cases(out, man)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)
    if len(sys.argv) > 2:  # meson's output, touched once all is written
        open(sys.argv[2], "w").close()


if __name__ == "__main__":
    main()
