#!/usr/bin/env python3
"""Issue 15, QLoRA: LoRA adapters on a frozen bitsandbytes NF4 base. No GPU
truth exists (bitsandbytes is not in Debian and its kernels need CUDA):
these are formula tests on bitsandbytes' published layout and code
(v0.43: functional.quantize_4bit, autograd/_functions.py MatMul4Bit).

usage: test_issue15_qlora.py MEMEST SOURCE_ROOT CASE
  storage    --weights nf4-dq (bnb_4bit_use_double_quant=True): each
             Linear weight but the head's is packed 4-bit + uint8 absmax
             per block of 64 + fp32 second-level absmax per 256 blocks +
             the fp32 offset + the 16-float NF4 code, exact against the
             hand formula; the same under --train (the head, behind the
             training forward's cast and slice, stays bf16)
  dequant    the dequantized [out, in] bf16 tile at the base matmul: in
             forward (MatMul4Bit.forward) and again in backward
             (MatMul4Bit.backward's grad_A), each the timeline's
             temporary at a peak placed there
  nograd     the frozen base keeps no gradient and no optimizer state:
             the gradients and Adam state are the fp32 adapters' exactly
  errors     --train on quantized weights without --lora
  maxbatch   the issue's two questions (Llama-3-8B LoRA with adamw8bit,
             Llama-3-70B QLoRA) on an A100-80GB at 4096 tokens, with and
             without --checkpoint layers: the answer B re-run at --batch B
             fits with the figure --max-batch gave, B + 1 does not
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, write_json  # noqa: E402

CASE = sys.argv[3]
SMALL = path("golden", "truth", "llm", "llama_small_bf16.config.json")
# one decoder layer, a wide MLP and a tiny vocabulary: the MLP's base
# matmuls (tile 16384 x 64 bf16 = 2 MiB) place the peaks
WIDE = {"model_type": "llama", "vocab_size": 32, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 4, "intermediate_size": 16384, "torch_dtype": "bfloat16"}


def memest_json(*args):
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, f"memest {' '.join(args)}: exit {rc}: {err[-300:]}")
    return (json.loads(out), err) if rc == 0 else (None, err)


def linears(c):
    """[out, in] of every decoder Linear (the head is never quantized)."""
    h, i = c["hidden_size"], c["intermediate_size"]
    kv = c["num_key_value_heads"] * (h // c["num_attention_heads"])
    return [(h, h), (kv, h), (kv, h), (h, h), (i, h), (i, h), (h, i)] * c["num_hidden_layers"]


def nf4_dq(o, i):
    """bnb quantize_4bit(compress_statistics=True, blocksize=64): packed
    uint8 [n/2], absmax uint8 [nb] (quantize_blockwise, blocksize 256),
    state2.absmax fp32 [ceil(nb/256)], offset fp32 (1), code fp32 [16]"""
    n = o * i
    nb = -(-n // 64)
    return -(-n // 2) + nb + 4 * -(-nb // 256) + 4 + 16 * 4


def case_storage():
    c = json.load(open(SMALL))
    lin = linears(c)
    for mode in ([], ["--train", "--lora", "r=8,targets=q_proj,v_proj"]):
        base, _ = memest_json(SMALL, "--seq", "8", *mode)
        o, err = memest_json(SMALL, "--seq", "8", "--weights", "nf4-dq", *mode)
        if not base or not o:
            continue
        lora = sum(4 * 8 * (a + b) for a, b in lin[:1] + lin[2:3]) * c["num_hidden_layers"] if mode else 0
        others = base["totals"]["param_bytes"] - lora - 2 * sum(a * b for a, b in lin)  # embedding, norms, head: bf16
        want = others + sum(nf4_dq(a, b) for a, b in lin) + lora
        got = o["totals"]["param_bytes"]
        check(got == want, f"nf4-dq {mode}: param_bytes {got:,}, want {want:,}")
        check(o["memory"]["steps"][0]["at_peak"]["weights"] == want, f"nf4-dq {mode}: timeline weights")
        check("double-quantized" in err, f"nf4-dq: the note says so: {err[-300:]}")
    # the double quantization saves 3 bytes per block of 64 less the second level's
    p4, _ = memest_json(SMALL, "--seq", "8", "--weights", "nf4")
    dq, _ = memest_json(SMALL, "--seq", "8", "--weights", "nf4-dq")
    if p4 and dq:
        nb = [-(-a * b // 64) for a, b in lin]
        want = sum(3 * x - 4 * -(-x // 256) - 4 for x in nb)
        check(p4["totals"]["param_bytes"] - dq["totals"]["param_bytes"] == want, "nf4 - nf4-dq bytes")


def wide():
    d = tempfile.mkdtemp()
    return write_json(d, "config.json", WIDE)


def case_dequant():
    cfg = wide()
    tile = WIDE["intermediate_size"] * WIDE["hidden_size"] * 2
    # forward: q,v adapters only; the peak is the last MLP matmul's tile. In
    # the steady step: step 1's backward makes its cuBLAS handle's workspace
    # (memory.c), which on this small model outweighs the forward's lead
    o, _ = memest_json(cfg, "--train", "--weights", "nf4-dq", "--lora", "r=8,targets=q_proj,v_proj", "--seq", "8")
    if o:
        s = o["memory"]["steps"][-1]
        check(s["peak_phase"] == "forward" and s["peak_at"] == "model.layers.0.mlp.down_proj",
              f"forward peak at {s['peak_at']} ({s['peak_phase']})")
        check(s["at_peak"]["temporary"] == tile, f"forward tile {s['at_peak']['temporary']:,}, want {tile:,}")
    # backward: the adapters' gradients exist; grad_input of a base MLP
    # matmul dequantizes the weight again
    o, _ = memest_json(cfg, "--train", "--weights", "nf4-dq", "--lora", "r=8,targets=all-linear", "--seq", "4")
    if o:
        for s in o["memory"]["steps"]:
            check(s["peak_phase"] == "backward" and s["peak_at"] in ("model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"),
                  f"step {s['step']}: backward peak at {s['peak_at']} ({s['peak_phase']})")
            check(s["at_peak"]["temporary"] == tile, f"step {s['step']}: backward tile {s['at_peak']['temporary']:,}, want {tile:,}")
    # on the CPU bitsandbytes runs no dequantized copy (quant_temp's rule)
    o, _ = memest_json(cfg, "--train", "--weights", "nf4-dq", "--lora", "r=8,targets=all-linear", "--seq", "4", "--runtime", "cpu")
    if o:
        for s in o["memory"]["steps"]:
            check(s["at_peak"]["temporary"] != tile, f"cpu step {s['step']}: tile at the peak")


def case_nograd():
    cfg = wide()
    lin = linears(WIDE)
    r = 8
    adapters = sum(r * (a + b) for a, b in lin)  # lora_A [r, in], lora_B [out, r], fp32
    o, err = memest_json(cfg, "--train", "--weights", "nf4-dq", "--optimizer", "adam", "--lora", f"r={r},targets=all-linear", "--seq", "4")
    if not o:
        return
    check(f"{adapters} trainable" in err, f"trainable parameters: {err[-300:]}")
    s1 = o["memory"]["steps"][0]
    check(s1["peak_phase"] == "optimizer", f"step 1 peak in {s1['peak_phase']}")
    check(s1["at_peak"]["gradients"] == 4 * adapters, f"gradients {s1['at_peak']['gradients']:,}, want the adapters' {4 * adapters:,}")
    # Adam: exp_avg and exp_avg_sq fp32 per adapter, plus one fp32 step per parameter tensor
    want = 8 * adapters + 4 * 2 * len(lin)
    check(s1["at_peak"]["optimizer"] == want, f"Adam state {s1['at_peak']['optimizer']:,}, want {want:,}")


def case_errors():
    rc, _, err = run(SMALL, "--train", "--weights", "nf4-dq", "--seq", "8")
    check(rc == 2 and "--lora" in err, f"--train on nf4 without --lora: exit {rc}: {err[-200:]}")
    rc, _, err = run(SMALL, "--weights", "nf4-dq4", "--seq", "8")
    check(rc == 2 and "nf4-dq" in err, f"--weights nf4-dq4: exit {rc}: {err[-200:]}")


def case_maxbatch():
    common = ["--train", "--lora", "r=16,alpha=32,targets=q_proj,v_proj", "--optimizer", "adamw8bit", "--seq", "4096",
              "--gpu", "a100-80gb"]
    want = {}
    for name, model, extra in (("8b", "llama-3-8b", []), ("70b-qlora", "llama-3-70b", ["--weights", "nf4-dq"])):
        cfg = path("models", "llm", model, "config.json")
        for ck in ([], ["--checkpoint", "layers"]):
            o, _ = memest_json(cfg, *common, *extra, *ck, "--max-batch")
            if not o:
                continue
            mb = o["device"]["max_batch"]
            b = mb["batch"]
            want[(name, bool(ck))] = b
            print(f"{name} {' '.join(ck) or 'no checkpointing'}: largest batch {b} (needs {mb['needed'] / 2**20:.2f} MiB; "
                  f"{b + 1} needs {mb['needed_next'] / 2**20:.2f} MiB)")
            if b:
                a, _ = memest_json(cfg, *common, *extra, *ck, "--batch", str(b))
                if a:
                    check(a["device"]["fits"] and a["device"]["needed"] == mb["needed"], f"{name} {ck}: batch {b} re-run")
            n, _ = memest_json(cfg, *common, *extra, *ck, "--batch", str(b + 1))
            if n:
                check(not n["device"]["fits"] and n["device"]["needed"] == mb["needed_next"], f"{name} {ck}: batch {b + 1} re-run")
    # per-layer checkpointing (QLoRA's recipe: prepare_model_for_kbit_training
    # turns it on) is what lets a 4096-token batch fit at all
    check(want.get(("8b", True), 0) >= 1 and want.get(("70b-qlora", True), 0) >= 1, f"answers {want}")


CASES = {"storage": case_storage, "dequant": case_dequant, "nograd": case_nograd, "errors": case_errors, "maxbatch": case_maxbatch}
CASES[CASE]()
print(f"{CASE}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
