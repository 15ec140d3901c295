#!/usr/bin/env python3
"""Issue 15, pipeline parallelism (--pp, --micro-batches: Megatron-LM's
non-interleaved 1F1B). No multi-GPU truth exists here: these cases check
structural facts the stage split and the schedule must satisfy, never a
figure memest computed against itself.

usage: test_issue15_pp.py MEMEST SOURCE_ROOT CASE
  split      each stage's weights: the layers' split evenly, the embedding
             on the first stage only, the head on the last only; summed over
             the stages they are the whole model's exactly
  inflight   stage s holds min(P - s, M) micro-batches
             (forward_backward_pipelining_without_interleaving's
             min(P - s - 1, M) warm-up forwards, plus the steady state's
             one); the first stage P; the worst stage is the largest needed
             figure and the device's needed figure is it; the CSV says the same
  rule       needed = max(one micro-batch's step, its forward and backward
             + (in_flight - 1) x held + earlier gradients); more micro-batches
             never need less on the first stage; the last stage (in flight 1)
             with M = 1 is its own one-micro-batch step
  pp1        --pp 1 is the model without --pp, report for report
  errors     --pp that does not divide the layers (names both), --pp
             without --train, --micro-batches without --pp / with --pp 1,
             --pp on an ONNX model: exit 2
  headers    a model folder with safetensors headers splits the same way
  ep         --ep E: experts/E of every MoE layer on a GPU, T*k rows through
             its local experts, the [T*k, D] dispatch and combine buffers
  offload    --offload optimizer|params (ZeRO-Offload) against DeepSpeed's
             published estimators (estimate_zero2/zero3_model_states_mem_needs)
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json, write_json  # noqa: E402

CASE = sys.argv[3]
TMP = tempfile.mkdtemp(prefix="memest-pp-")
# four decoder layers, an untied head: every stage differs from its neighbours
CFG = write_json(TMP, "config.json", {
    "model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "intermediate_size": 688, "torch_dtype": "float32"})
H, V, I, KV, L = 256, 1000, 688, 64, 4
LAYER = 4 * (H * H + 2 * H * KV + H * H + 3 * H * I + 2 * H)  # q,k,v,o + gate/up/down + two norms, fp32
EMB = 4 * V * H
COMMON = [CFG, "--train", "--seq", "64", "--batch", "2", "--optimizer", "adamw"]


def pipeline(*extra):
    r = run_json(*COMMON, *extra)
    return r and r["memory"].get("pipeline"), r


def case_split():
    whole = run_json(*COMMON)
    for P in (2, 4):
        p, _ = pipeline("--pp", str(P))
        if not p:
            check(False, f"--pp {P}: no pipeline in the report")
            continue
        st = p["per_stage"]
        check(len(st) == P and all(s["layers"] == L // P and s["first_layer"] == i * L // P for i, s in enumerate(st)),
              f"--pp {P}: layer split {[(s['first_layer'], s['layers']) for s in st]}")
        for i, s in enumerate(st):
            want = (L // P) * LAYER + (EMB if i == 0 else 0) + (EMB + 4 * H if i == P - 1 else 0)
            check(s["weights"] == want, f"--pp {P} stage {i}: weights {s['weights']}, want {want}")
        w = whole["memory"]["steps"][0]["at_peak"]["weights"]
        check(sum(s["weights"] for s in st) == w, f"--pp {P}: stage weights sum {sum(s['weights'] for s in st)}, model {w}")


def case_inflight():
    for P, M in ((2, 2), (4, 4), (4, 2), (4, 8), (2, 1)):
        p, r = pipeline("--pp", str(P), "--micro-batches", str(M), "--gpu", "h100")
        if not p:
            check(False, f"--pp {P} --micro-batches {M}: no pipeline")
            continue
        got = [s["in_flight"] for s in p["per_stage"]]
        check(got == [min(P - s, M) for s in range(P)], f"--pp {P} M {M}: in flight {got}")
        check(p["micro_batches"] == M and abs(p["bubble"] - (P - 1) / M) < 1e-12, f"--pp {P} M {M}: {p['micro_batches']} {p['bubble']}")
        needs = [s["needed"] for s in p["per_stage"]]
        check(needs[p["worst_stage"]] == max(needs) and p["needed"] == max(needs), f"--pp {P} M {M}: worst {p['worst_stage']} of {needs}")
        check(r["device"]["needed"] == max(needs), f"--pp {P} M {M}: device needs {r['device']['needed']}, stages {needs}")
    p, _ = pipeline("--pp", "4")
    check(p and p["micro_batches"] == 4 and p["per_stage"][0]["in_flight"] == 4, "--pp 4: M defaults to P, first stage holds P")
    # the CSV report carries the same stages
    rc, out, err = run(*COMMON, "--pp", "4", "--format", "csv")
    facts = dict((tuple(l.split(",")[:2]), l.split(",")[2]) for l in out.splitlines() if l.startswith("memory.pipeline"))
    check(rc == 0 and p and facts.get(("memory.pipeline", "worst_stage")) == str(p["worst_stage"]) and
          all(facts.get((f"memory.pipeline.stage{s}", "needed")) == str(st["needed"]) for s, st in enumerate(p["per_stage"])),
          f"csv: {facts}")


def case_rule():
    for M in (1, 2, 4, 8):
        p, _ = pipeline("--pp", "4", "--micro-batches", str(M))
        if not p:
            check(False, f"M {M}: no pipeline")
            continue
        for i, s in enumerate(p["per_stage"]):
            fb = s["one_micro_batch_forward_backward"] + (s["in_flight"] - 1) * s["held_per_micro_batch"] + \
                s["gradients_from_earlier_micro_batches"]
            check(s["needed"] == max(s["one_micro_batch"], fb), f"M {M} stage {i}: {s}")
            check(s["held_per_micro_batch"] > 0, f"M {M} stage {i}: nothing held at the end of forward")
            check((s["gradients_from_earlier_micro_batches"] > 0) == (M > 1), f"M {M} stage {i}: earlier gradients {s}")
        if M == 1:
            last = p["per_stage"][-1]
            check(last["in_flight"] == 1 and last["needed"] == last["one_micro_batch"], f"M 1: last stage {last}")
        case_rule.prev = getattr(case_rule, "prev", 0)
        check(p["per_stage"][0]["needed"] >= case_rule.prev, f"M {M}: first stage needs less than with fewer micro-batches")
        case_rule.prev = p["per_stage"][0]["needed"]


def case_pp1():
    for extra in ([], ["--gpu", "h100"], ["--dtype", "bf16", "--checkpoint", "layers"]):
        a = run(*COMMON, *extra, "--format", "json")
        b = run(*COMMON, *extra, "--pp", "1", "--format", "json")
        check(a[0] == 0 and a == b, f"--pp 1 {extra}: differs from no --pp")


def case_errors():
    onnx = path("golden", "truth", "sem", "lm_tiny.onnx")
    for args, words in (([*COMMON, "--pp", "3"], ["--pp 3", "4 decoder layers"]),
                        ([*COMMON, "--pp", "8"], ["--pp 8", "4 decoder layers"]),
                        ([CFG, "--pp", "2"], ["--pp", "--train"]),
                        ([*COMMON, "--micro-batches", "4"], ["--micro-batches", "--pp"]),
                        ([*COMMON, "--pp", "1", "--micro-batches", "4"], ["--micro-batches", "--pp 2"]),
                        ([*COMMON, "--pp", "0"], ["--pp"]),
                        ([*COMMON, "--pp", "2", "--max-batch", "--gpu", "h100"], ["--pp", "--max-batch"])):
        rc, out, err = run(*args)
        check(rc == 2 and all(w in err for w in words), f"{args[1:]}: exit {rc}: {err.strip()[-300:]}")
    if os.path.exists(onnx):
        rc, out, err = run(onnx, "--train", "--pp", "2")
        check(rc == 2 and "--pp" in err and "language model" in err, f"onnx --pp: exit {rc}: {err.strip()}")
    else:
        check(False, f"{onnx} missing")


# DeepSpeed's published estimators (deepspeed/runtime/zero/stage_1_and_2.py
# estimate_zero2_model_states_mem_needs, stage3.py
# estimate_zero3_model_states_mem_needs; additional_buffer_factor 1.5, one
# node), as DeepSpeed writes them
def ds_zero2(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, additional_buffer_factor=1.5):
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 4 * total_params + int(16 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def ds_zero3(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, cpu_offload_params=True,
             zero_init=True, additional_buffer_factor=1.5):
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = (4 * largest_layer_params)
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


BF16 = write_json(TMP, "bf16.json", {
    "model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "intermediate_size": 688, "torch_dtype": "bfloat16"})
PARAMS = L * (2 * H * H + 2 * H * KV + 3 * H * I + 2 * H) + 2 * V * H + H
LARGEST = 2 * V * H  # the embedding (and the untied head), bf16: the GPU's temp_grad_buffer_for_gpu_offload
# torch.optim.AdamW's state["step"], a 0-dim fp32 tensor for the rank's one
# flat partition (DeepSpeed flattens the group: one step, not one per parameter)
STEP = 4


def offload(*extra):
    r = run_json(BF16, "--train", "--seq", "64", "--batch", "2", "--optimizer", "adamw", *extra)
    return r and r["memory"]["steps"][-1]


def case_offload():
    """the host line (per GPU, DeepSpeed partitions it over the ranks) is
    16 bytes a parameter (fp32 master, fp32 gradient, Adam's two fp32
    moments) and 18 with offload_param (+ the bf16 parameter); with the
    pinned temp_grad_buffer_for_cpu_offload (the largest parameter) aside,
    times the GPUs it is the estimator's cpu_mem / additional_buffer_factor
    where max(4 x GPUs, 16) is 16; the GPU keeps the bf16 parameters
    (gpu_mem = 2 x params; ZeRO-3: 2 x params / GPUs), no optimizer state"""
    for gpus in (1, 4):
        extra = ["--gpus", "4", "--shard", "zero2"] if gpus > 1 else []
        s = offload(*extra, "--offload", "optimizer")
        if not s:
            continue
        cpu, gpu = ds_zero2(PARAMS, num_gpus_per_node=gpus)
        check((s["host"] - LARGEST - STEP) * gpus == cpu / 1.5, f"zero2 x{gpus}: host {s['host']} - {LARGEST}, estimator cpu {cpu}")
        check(s["at_peak"]["weights"] == gpu, f"zero2 x{gpus}: GPU weights {s['at_peak']['weights']}, estimator {gpu}")
        check(s["at_peak"]["optimizer"] == 0, f"zero2 x{gpus}: optimizer state on the GPU {s['at_peak']['optimizer']}")
        bucket = 2 * min(PARAMS, 500000000)
        check(s["at_peak"]["gradients"] in (LARGEST, LARGEST + bucket), f"zero2 x{gpus}: GPU gradients {s['at_peak']['gradients']}")
    s = offload("--gpus", "4", "--shard", "zero3", "--offload", "params")
    if s:
        cpu, _ = ds_zero3(PARAMS, 0, num_gpus_per_node=4)
        check((s["host"] - LARGEST - STEP) * 4 == cpu / 1.5, f"zero3 params: host {s['host']}, estimator cpu {cpu}")
        # less step 1's cuBLAS workspaces, held to the end
        base = s["baseline"] - s["at_peak"]["workspace"]
        check(base < LARGEST + 2 * PARAMS // 4, f"zero3 params: baseline {base} keeps parameters on the GPU")
    s = offload("--gpus", "4", "--shard", "zero3", "--offload", "optimizer")
    if s:
        cpu, gpu = ds_zero3(PARAMS, 0, num_gpus_per_node=4, cpu_offload_params=False)
        check((s["host"] - LARGEST - STEP) * 4 == cpu / 1.5, f"zero3 optimizer: host {s['host']}, estimator cpu {cpu}")
        check(s["at_peak"]["weights"] == gpu, f"zero3 optimizer: GPU weights {s['at_peak']['weights']}, estimator's shard {gpu}")
    plain = offload()
    off = offload("--offload", "optimizer")
    if plain and off:
        check("host" not in plain and off["peak"] < plain["peak"], f"offload: peak {off['peak']} vs {plain['peak']}")
    for args, words in ((["--offload", "params"], ["--offload params", "zero3"]),
                        (["--gpus", "2", "--shard", "ddp", "--offload", "optimizer"], ["--offload", "--shard"]),
                        (["--offload", "cpu"], ["--offload 'cpu'"])):
        rc, out, err = run(BF16, "--train", *args)
        check(rc == 2 and all(w in err for w in words), f"{args}: exit {rc}: {err.strip()[-300:]}")
    rc, out, err = run(BF16, "--offload", "optimizer")
    check(rc == 2 and "--train" in err, f"--offload without --train: exit {rc}: {err.strip()[-200:]}")


def case_headers():
    """a model folder with safetensors headers: each stage takes its own
    layers' tensors (the others belong to other stages), and the stages'
    weights still sum to the whole model's"""
    d = os.path.join(TMP, "folder")
    os.makedirs(d, exist_ok=True)
    with open(CFG) as f, open(os.path.join(d, "config.json"), "w") as g:
        g.write(f.read())
    shapes = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
    for i in range(L):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [KV, H],
                       p + "self_attn.v_proj.weight": [KV, H], p + "self_attn.o_proj.weight": [H, H],
                       p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H], p + "mlp.down_proj.weight": [H, I],
                       p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H]})
    head, off = {}, 0
    for name, shp in shapes.items():
        n = 4
        for x in shp:
            n *= x
        head[name] = {"dtype": "F32", "shape": shp, "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(head).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(len(hb).to_bytes(8, "little") + hb)
        f.truncate(8 + len(hb) + off)  # the data: zeros, never read
    whole = run_json(d, "--train", "--seq", "64", "--optimizer", "adamw")
    r = run_json(d, "--train", "--seq", "64", "--optimizer", "adamw", "--pp", "2")
    if whole and r:
        w = whole["memory"]["steps"][0]["at_peak"]["weights"]
        st = r["memory"]["pipeline"]["per_stage"]
        check(w == off and sum(s["weights"] for s in st) == w, f"headers: stages {[s['weights'] for s in st]}, model {w}, file {off}")


MIXTRAL = path("golden", "truth", "llm", "mixtral_small.config.json")  # 8 experts, top 2, 2 layers, D 256, I 512, fp32


def case_ep():
    """--ep E: each GPU holds experts/E of every MoE layer (the rest of the
    model whole); its local experts together process its own T*k rows
    (uniform routing), each E x as many as without --ep; the dispatch and
    combine buffers are [T*k, D]; --ep 1 is the model; errors exit 2"""
    T, k, D, I, E, layers = 64, 2, 256, 512, 8, 2
    expert = 3 * D * I * 4
    whole = run_json(MIXTRAL, "--seq", "64")
    for ep in (2, 4, 8):
        r = run_json(MIXTRAL, "--seq", "64", "--ep", str(ep))
        if not (r and whole):
            continue
        check("moe_ep" in json.dumps(r["notes"]) and "moe_ep" not in json.dumps(whole["notes"]), f"--ep {ep}: the moe_ep note")
        w, w0 = r["memory"]["steps"][0]["at_peak"]["weights"], whole["memory"]["steps"][0]["at_peak"]["weights"]
        check(w0 - w == layers * (E - E // ep) * expert, f"--ep {ep}: weights {w} vs {w0}")
        for li in range(layers):
            rows = [l for l in r["layers"] if l["name"].startswith(f"model.layers.{li}.block_sparse_moe.experts.") and l["name"].endswith(".w1")]
            check(len(rows) == E // ep and sum(l["output_shape"][0] for l in rows) == T * k and
                  all(l["output_shape"][0] == T * k * ep // E for l in rows), f"--ep {ep} layer {li}: {[l['output_shape'] for l in rows]}")
            comm = {l["name"].rsplit(".", 1)[1]: l["output_shape"] for l in r["layers"]
                    if l["name"].startswith(f"model.layers.{li}.block_sparse_moe.") and l["op"] in ("Gather", "AllToAll")
                    and ("all_to_all" in l["name"] or "permute" in l["name"])}
            check(comm == {"permute": [T * k, D], "all_to_all_dispatch": [T * k, D], "all_to_all_combine": [T * k, D]},
                  f"--ep {ep} layer {li}: buffers {comm}")
    t = run_json(MIXTRAL, "--seq", "64", "--ep", "2", "--train", "--optimizer", "adamw")
    t0 = run_json(MIXTRAL, "--seq", "64", "--train", "--optimizer", "adamw")
    if t and t0:
        g, g0 = t["memory"]["steps"][1]["at_peak"], t0["memory"]["steps"][1]["at_peak"]
        # AdamW: exp_avg and exp_avg_sq of each expert weight left out, and its 4-byte step tensor
        check(g0["optimizer"] - g["optimizer"] == 2 * layers * (E // 2) * expert + 4 * layers * (E // 2) * 3,
              f"--ep 2 --train: optimizer state {g['optimizer']} vs {g0['optimizer']}")
    a = run(MIXTRAL, "--seq", "64", "--format", "json")
    b = run(MIXTRAL, "--seq", "64", "--ep", "1", "--format", "json")
    check(a[0] == 0 and a == b, "--ep 1 differs from no --ep")
    for args, words in (([MIXTRAL, "--ep", "3"], ["--ep 3", "8 experts"]),
                        ([path("golden", "truth", "llm", "llama_small.config.json"), "--ep", "2"], ["--ep 2", "no experts"]),
                        ([path("golden", "truth", "sem", "lm_tiny.onnx"), "--ep", "2"], ["--ep", "language model"])):
        rc, out, err = run(*args)
        check(rc == 2 and all(w in err for w in words), f"{args}: exit {rc}: {err.strip()[-300:]}")


CASES = {"ep": case_ep, "headers": case_headers, "split": case_split, "inflight": case_inflight, "rule": case_rule, "pp1": case_pp1, "errors": case_errors,
         "offload": case_offload}
CASES[CASE]()
print(f"{CASE}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
