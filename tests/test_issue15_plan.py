#!/usr/bin/env python3
"""Issue 15, --plan: the training plans for a language model on N GPUs
(src/plan.c; doc/memory.md, "Plans").

usage: test_issue15_plan.py MEMEST SOURCE_ROOT CASE

  pareto    Llama-3-70B full fine-tune (AdamW, seq 4096) on 8 x h100-sxm,
            one micro-batch a step (--micro-batches 1): rows cover
            tp x pp x dp = 8 with tp and pp in 1, 2, 4, 8, every ZeRO stage
            where dp > 1, optimizer offload (with ZeRO when dp > 1), no and
            per-layer checkpointing; the Pareto rows
            fit, no fitting row needs less and trains more tokens/s, every
            non-Pareto fitting row is beaten by one; and each Pareto row's
            per-GPU need is re-checked by its own timeline: memest run
            with the row's memest_options gives the same bytes
  comm      the step time is the rank's roofline plus the collectives, as
            doc/memory.md writes them (computed here from the config and
            the GPU's link bandwidth), 8 micro-batches a step (the
            default): TP 4 (6 under per-layer checkpointing) all-reduces
            of b*s*h 16-bit values a layer a micro-batch slot at 2(t-1)/t
            (8 slots; M + P - 1 of L/P layers with P stages), the stages'
            sends 2 b*s*h/t a slot, DP 2(d-1)/d (ZeRO-3 3(d-1)/d) of the
            rank's gradients
  selective a GPT-2-style config (which marks core attention) gets
            selective-recompute rows, and they need less than the rows
            without checkpointing
  fewest    without --gpus: the fewest GPUs for which a plan fits; one
            node fewer (or one GPU fewer within a node) fits none
  errors    --plan without --train, with --tp or --shard, on an ONNX
            model, with --gpu-mem alone: exit 2
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json, write_json  # noqa: E402

CASE = sys.argv[3]
L70 = path("models", "llm", "llama-3-70b", "config.json")
BASE = ["--train", "--optimizer", "adamw", "--seq", "4096"]


def plan(cfg, *args):
    o = run_json(cfg, *args, "--plan")
    return o["device"]["plan"] if o else None


def case_pareto():
    p = plan(L70, *BASE, "--gpu", "h100-sxm", "--gpus", "8", "--micro-batches", "1")
    if not p:
        return
    rows = p["rows"]
    check(p["simulations"] == sum(r["pp"] for r in rows), f"{p['simulations']} timelines for {len(rows)} rows")
    want = set()
    for t in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8):
            if 8 % (t * pp):
                continue
            d = 8 // t // pp
            for z in (range(4) if d > 1 else (0,)):
                for off in ("none", "optimizer"):
                    if off == "optimizer" and d > 1 and z == 0:
                        continue
                    for c in ("none", "layers"):
                        want.add((t, pp, d, z, off, c))
    got = {(r["tp"], r["pp"], r["dp"], r["zero_stage"], r["offload"], r["checkpoint"]) for r in rows}
    check(got == want, f"plans {sorted(got ^ want)} differ from tp x pp x dp = 8 x ZeRO x offload x checkpointing")
    fit = [r for r in rows if r["fits"]]
    par = [r for r in rows if r["pareto"]]
    check(par, "no Pareto row")
    for r in par:
        check(r["fits"], f"Pareto row {r['memest_options']} does not fit")
        for o in fit:
            beats = o["needed"] <= r["needed"] and o["tokens_per_second"] >= r["tokens_per_second"] and \
                (o["needed"] < r["needed"] or o["tokens_per_second"] > r["tokens_per_second"])
            check(not beats, f"{o['memest_options']} beats Pareto row {r['memest_options']}")
        # the row's need, re-checked by its own timeline
        o = run_json(L70, *BASE, "--gpu", "h100-sxm", *r["memest_options"].split())
        if o:
            check(o["device"]["needed"] == r["needed"] and o["device"]["fits"],
                  f"{r['memest_options']}: its timeline needs {o['device']['needed']} B, the plan says {r['needed']}")
    for r in fit:
        if r["pareto"]:
            continue
        beaten = any(o["needed"] <= r["needed"] and o["tokens_per_second"] >= r["tokens_per_second"] for o in par)
        check(beaten, f"fitting row {r['memest_options']} is neither Pareto nor beaten by a Pareto row")
    # the largest rows do not fit: a 70B model's AdamW states alone are 560 GB
    check(not [r for r in rows if r["tp"] == 1 and r["zero_stage"] == 0][0]["fits"], "tp 1 DDP fits a 70B full fine-tune")


def case_comm():
    c = json.load(open(L70))
    L, h = c["num_hidden_layers"], c["hidden_size"]
    p = plan(L70, *BASE, "--gpu", "h100-sxm", "--gpus", "8")
    link = p["link_bandwidth"] if p else 0
    check(link == 450e9, f"h100-sxm link {link}, not NVLink 4's 900 GB/s over two")
    check(p is not None and p["micro_batches"] == 8, "the default step is 8 micro-batches")
    for r in (p["rows"] if p else []):
        t, d, P = r["tp"], r["dp"], r["pp"]
        act = 1 * 4096 * h * 2
        passes = 6 if r["checkpoint"] == "layers" else 4
        slots = 8 + P - 1 if P > 1 else 8
        tp = slots * (L / P) * passes * 2 * (t - 1) / t * act / link if t > 1 else 0
        check(abs(r["tp_comm_seconds"] - tp) <= 1e-9 + 1e-6 * tp, f"{r['memest_options']}: TP comm {r['tp_comm_seconds']} vs {tp}")
        pc = slots * 2 * act / t / link if P > 1 else 0
        check(abs(r["pp_comm_seconds"] - pc) <= 1e-9 + 1e-6 * pc, f"{r['memest_options']}: PP comm {r['pp_comm_seconds']} vs {pc}")
        check(abs(r["step_seconds"] - r["compute_seconds"] - r["tp_comm_seconds"] - r["pp_comm_seconds"] - r["dp_comm_seconds"]) < 1e-9,
              f"{r['memest_options']}: step is not compute + comm")
        # data parallelism's collectives; offload's PCIe transfers
        check((r["dp_comm_seconds"] > 0) == (d > 1 or r["offload"] != "none"), f"{r['memest_options']}: DP comm {r['dp_comm_seconds']}")
    # DP volume: ZeRO-3 moves 3/2 of DDP's
    rows = {(r["tp"], r["zero_stage"], r["checkpoint"]): r for r in (p["rows"] if p else [])
            if r["pp"] == 1 and r["offload"] == "none"}
    a, b = rows.get((2, 0, "none")), rows.get((2, 3, "none"))
    if a and b:
        check(abs(b["dp_comm_seconds"] / a["dp_comm_seconds"] - 1.5) < 1e-9, "ZeRO-3's DP traffic is not 1.5 x DDP's")


def case_selective():
    with tempfile.TemporaryDirectory() as tmp:
        cfg = write_json(tmp, "config.json", {"model_type": "gpt2", "vocab_size": 51200, "n_embd": 5120, "n_layer": 40,
                                              "n_head": 40, "n_positions": 2048, "activation_function": "gelu",
                                              "torch_dtype": "float16"})
        p = plan(cfg, "--train", "--optimizer", "adam", "--seq", "2048", "--gpu", "a100-80gb", "--gpus", "8")
        rows = p["rows"] if p else []
        sel = {(r["tp"], r["pp"], r["zero_stage"], r["offload"]): r for r in rows if r["checkpoint"] == "selective"}
        non = {(r["tp"], r["pp"], r["zero_stage"], r["offload"]): r for r in rows if r["checkpoint"] == "none"}
        check(len(sel) == len(non) and sel, f"{len(sel)} selective rows, {len(non)} without checkpointing")
        for k, r in sel.items():
            check(r["needed"] < non[k]["needed"], f"{r['memest_options']}: selective needs {r['needed']} >= {non[k]['needed']}")
        check("--recompute-granularity selective" in next(iter(sel.values()))["megatron_args"] if sel else False,
              "selective rows' Megatron arguments")


def case_fewest():
    p = plan(L70, *BASE, "--gpu", "a100-40gb")
    if not p:
        return
    n = p["gpus"]
    check(p.get("fewest_gpus") is True and p["fit"] > 0, f"fewest: {n} GPUs, {p['fit']} fit")
    fewer = n - 8 if n > 8 else n - 1
    if fewer >= 1:
        q = plan(L70, *BASE, "--gpu", "a100-40gb", "--gpus", str(fewer))
        check(q is not None and q["fit"] == 0, f"{fewer} GPUs: {q and q['fit']} plans fit, fewest said {n}")


def case_errors():
    for args, needle in ((["--seq", "4096", "--gpu", "h100-sxm", "--gpus", "8"], "--train"),
                         (BASE + ["--gpu", "h100-sxm", "--gpus", "8", "--tp", "2"], "--tp"),
                         (BASE + ["--gpu", "h100-sxm", "--gpus", "8", "--shard", "zero3"], "--shard"),
                         (BASE + ["--gpu", "h100-sxm", "--gpus", "8", "--pp", "2"], "--pp"),
                         (BASE + ["--gpu", "h100-sxm", "--gpus", "8", "--offload", "optimizer"], "--offload"),
                         (BASE + ["--gpu-mem", "80GiB", "--gpus", "8"], "--gpu")):
        rc, out, err = run(L70, *args, "--plan")
        check(rc == 2 and needle in err, f"{args} --plan: exit {rc}, {err[-200:]!r}")
    rc, out, err = run(path("models", "onnx", "zoo", "gpt_like.onnx"), "--input", "input_ids=128:int64", "--train",
                       "--gpu", "h100-sxm", "--gpus", "8", "--plan")
    check(rc == 2 and "language model" in err, f"ONNX --plan: exit {rc}, {err[-200:]!r}")


globals()["case_" + CASE]()
print("%s: %d failure(s)" % (CASE, len(failures)))
sys.exit(1 if failures else 0)
