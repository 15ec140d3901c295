#!/usr/bin/env python3
"""End-to-end tests of the memest command against truth files.

usage: test_cli.py MEMEST SOURCE_ROOT CASE [ARG]

Truth comes from PyTorch (golden/truth/*.json, made by tests/zoo/*.py) or
from the seed documents (golden/torchstat_resnet18_seed.txt); never from
memest. Stdlib only, so CI needs no torch.
"""
import json
import os
import random
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402
from harness import check, failures, path, run  # noqa: E402

CASE = sys.argv[3]
ARG = sys.argv[4] if len(sys.argv) > 4 else None


def run_json(*args):
    rc, out, err = run(*args, "--format", "json")
    if rc != 0:
        raise SystemExit(f"memest {' '.join(args)} failed ({rc}): {err}")
    return json.loads(out)


def parse_table(lines):
    """Rows of a torchstat-style table: index, name, then shapes and figures."""
    rows = {}
    for line in lines:
        parts = line.split()
        if not parts or not (parts[0].isdigit() or parts[0] == "total"):
            continue
        nums = [p.replace(",", "").rstrip("*") for p in parts]
        # last 8 fields: params, memory, MAdd, Flops, MemRead, MemWrite, duration, MemR+W
        key = parts[1] if parts[0] != "total" else "total"
        tail = nums[-8:]
        rows[key] = {"params": float(tail[0]), "memory": float(tail[1]), "madd": float(tail[2]),
                     "flops": float(tail[3]), "read": float(tail[4]), "write": float(tail[5]),
                     "rw": float(tail[7]), "shapes": " ".join(parts[2:-8]), "marked": "*" in line}
    return rows


def case_torchstat_seed():
    seed_lines = open(path("golden", "torchstat_resnet18_seed.txt")).read().splitlines()
    seed = parse_table(seed_lines)
    rc, out, err = run(path("models", "resnet18.json"), "--convention", "torchstat")
    check(rc == 0, f"memest exited {rc}: {err}")
    mine = parse_table(out.splitlines())
    names = [k for k in seed if k != "total"]
    check(len(names) == 52, f"seed table should have 52 rows, parsed {len(names)}")
    check(list(k for k in mine if k != "total") == names, "row names/order differ from the seed")
    for name in names:
        s, m = seed[name], mine.get(name)
        if m is None:
            check(False, f"row {name} missing")
            continue
        if name == "avgpool":
            # torchstat cannot compute AdaptiveAvgPool2d (zeros); memest shows real figures, marked
            check(m["marked"] and m["madd"] == 25088 and m["read"] == 100352, f"avgpool row: {m}")
            continue
        check(s["shapes"] == m["shapes"], f"{name}: shapes '{m['shapes']}' != seed '{s['shapes']}'")
        for col in ("params", "memory", "madd", "flops", "read", "write", "rw"):
            check(s[col] == m[col], f"{name}.{col}: memest {m[col]} != seed {s[col]}")
    t = mine["total"]
    check(t["params"] == 11689512, f"total params {t['params']}")
    check(t["memory"] == 25.65, f"total memory {t['memory']}")
    check(t["madd"] == 3638757912, f"total MAdd {t['madd']}")
    check(t["flops"] == 1821399040, f"total Flops {t['flops']}")
    check(t["rw"] == 101756992, f"total MemR+W {t['rw']}")
    for line in ("Total params: 11,689,512", "Total memory: 25.65MB", "Total MAdd: 3.64GMAdd",
                 "Total Flops: 1.82GFlops", "Total MemR+W: 97.04MB"):
        check(line in out, f"summary line '{line}' missing")


def case_json_models():
    truth = json.load(open(path("golden", "truth", "json_models.json")))
    for name, t in truth.items():
        if not isinstance(t, dict) or "params" not in t:
            continue
        d = run_json(path("models", name + ".json"))
        check(d["totals"]["params"] == t["params"], f"{name}: params {d['totals']['params']} != PyTorch {t['params']}")
        check(d["layers"][-1]["output_shape"] == t["output_shape"], f"{name}: output shape")
        # module name -> shape of its last call
        mine = {}
        for layer in d["layers"]:
            mine[layer["name"]] = layer["output_shape"]
        for mod, shape in t["module_shapes"].items():
            check(mine.get(mod) == shape, f"{name}: module {mod} shape {mine.get(mod)} != PyTorch {shape}")


def case_seed_sequential():
    d = run_json(path("models", "seed_sequential.json"))
    check(d["totals"]["params"] == 112576, f"params {d['totals']['params']} != 112,576")
    check(d["totals"]["param_bytes"] == 450304, "0.450304 MB of fp32 parameters")
    check(d["totals"]["seed_sum_bytes"] == 336089600, f"seed sum {d['totals']['seed_sum_bytes']} != 336.0896 MB")
    rc, out, _ = run(path("models", "seed_sequential.json"))
    check("336.0896 MB forward, 672.1792 MB with backward" in out, "table shows the seed's two views")


def case_zoo(stem):
    truth = json.load(open(path("golden", "truth", stem + ".json")))
    f = path("models", "onnx", stem + ".onnx")
    for b, t in truth["batches"].items():
        d = run_json(f, "--input", "3x224x224", "--batch", b)
        check(d["totals"]["params"] == truth["params"], f"{stem} b{b}: params {d['totals']['params']} != PyTorch {truth['params']}")
        check(d["unknown_ops"] == {}, f"{stem}: unknown ops {d['unknown_ops']}")
        outs = {o["name"]: o["shape"] for layer in d["layers"] for o in layer["outputs"]}
        check(outs.get("output") == t["output_shape"], f"{stem} b{b}: output {outs.get('output')} != PyTorch {t['output_shape']}")
        compared = 0
        # Constant nodes hold data, not layers: the report leaves them out
        expected = {k: v for k, v in t["value_shapes"].items() if k not in d["constants"] and k not in d.get("canonicalized_values", ())}
        for name, shape in expected.items():
            if name in outs:
                compared += 1
                check(outs[name] == shape, f"{stem} b{b}: {name} {outs[name]} != onnx {shape}")
        check(compared == len(expected), f"{stem} b{b}: compared only {compared} of {len(expected)} shapes")
        # per-module shapes from PyTorch hooks, where the scope names a leaf module
        by_module = {}
        for layer in d["layers"]:
            by_module.setdefault(layer["name"], layer["output_shape"])
        hooked = 0
        for mod, shape in t["module_shapes"].items():
            # hooks keep a module's last call; torch names later calls relu_1, relu_2
            called_again = any(re.fullmatch(re.escape(mod) + r"_\d+", n) for n in by_module)
            if mod in by_module and truth["mode"] == "train" and not called_again:
                hooked += 1
                check(by_module[mod] == shape, f"{stem} b{b}: module {mod} {by_module[mod]} != hook {shape}")
        if truth["mode"] == "train":
            check(hooked > 10, f"{stem}: only {hooked} modules matched by name")


def case_zoo3(name):
    """The wider zoo (tests/zoo/export_zoo2.py): one ONNX file with a dynamic
    batch axis per model; params, MACs from a dispatch-level counter in
    PyTorch, output and per-value shapes, at batch 1 and 8."""
    truth = json.load(open(path("golden", "truth", "zoo", name + ".json")))
    f = path("models", "onnx", "zoo", name + ".onnx")
    spec = []
    for i in truth["inputs"]:
        spec += ["--input", "%s=%s:%s" % (i["name"], "x".join(str(s) for s in i["shape"]), i["dtype"])]
    for b, t in truth["batches"].items():
        d = run_json(f, *spec, "--batch", b)
        check(d["totals"]["params"] == truth["params"], f"{name} b{b}: params {d['totals']['params']} != PyTorch {truth['params']}")
        check(d["unknown_ops"] == {}, f"{name} b{b}: unknown ops {d['unknown_ops']}")
        check(d["totals"]["macs"] == t["macs"], f"{name} b{b}: MACs {d['totals']['macs']} != PyTorch count {t['macs']}")
        outs = {o["name"]: o["shape"] for layer in d["layers"] for o in layer["outputs"]}
        expected = {k: v for k, v in t["value_shapes"].items() if k not in d["constants"] and k not in d.get("canonicalized_values", ())}
        compared = 0
        for vname, shape in expected.items():
            if vname in outs:
                compared += 1
                check(outs[vname] == shape, f"{name} b{b}: {vname} {outs[vname]} != onnx {shape}")
        check(compared == len(expected), f"{name} b{b}: compared only {compared} of {len(expected)} shapes")
        # the graph output export_zoo2.py names "output", against PyTorch's forward
        check(outs.get("output") == t["output_shapes"][0], f"{name} b{b}: output {outs.get('output')} != PyTorch {t['output_shapes'][0]}")


def case_seed_memory():
    """Seed 004 (y = 5*x, x 3 GiB): peak 12 GiB and 9 GiB at the end; the fused
    form peaks at 9 GiB. Seed 001's Sequential: timeline peak beside the
    seed's sum-of-outputs views."""
    gib = 1 << 30
    d = run_json(path("models", "seed", "y5x.json"), "--batch", "3", "--train", "--optimizer", "none")
    step = d["memory"]["steps"][0]
    check(step["baseline"] == 3 * gib, f"y5x: x alone should be 3 GiB, got {step['baseline']}")
    check(abs(step["peak"] - 12 * gib) <= 4096, f"y5x: peak {step['peak'] / gib:.4f} GiB, seed says 12")
    check(abs(step["end"] - 9 * gib) <= 4096, f"y5x: end {step['end'] / gib:.4f} GiB, seed says 9")
    d = run_json(path("models", "seed", "y5x_fused.json"), "--batch", "3", "--train", "--optimizer", "none")
    check(abs(d["memory"]["steps"][0]["peak"] - 9 * gib) <= 4096, f"fused: peak {d['memory']['steps'][0]['peak'] / gib:.4f} GiB, seed says 9")
    rc, out, _ = run(path("models", "seed_sequential.json"), "--runtime", "cpu")
    check("336.0896 MB forward, 672.1792 MB with backward" in out, "seed views printed")
    check("peak 355.69 MiB" in out, "timeline peak printed beside them")


def case_checkpoint():
    """100 residual blocks at batch 2048: sqrt(N) checkpointing (N = 100
    layers, 10 segments) keeps O(N/k + k) of the activations and matches
    PyTorch's checkpoint_sequential(blocks, 10) within 5 %."""
    f = path("models", "resmlp100.json")

    def step(*extra):
        d = run_json(f, "--batch", "2048", "--runtime", "cpu", "--train", "--input-grad", *extra)
        s = d["memory"]["steps"][0]
        acts = s["peak"] - s["at_peak"]["weights"] - s["at_peak"]["inputs"] - s["at_peak"]["gradients"] - s["at_peak"]["optimizer"]
        return s, acts

    none, acts_none = step()
    sq, acts_sqrt = step("--checkpoint", "sqrt")
    ten, acts_ten = step("--checkpoint", "10")
    check(sq["checkpoint_segments"] == 9, f"sqrt(100 layers) = 10 segments, 9 checkpointed; got {sq['checkpoint_segments']}")
    # O(N/k + k) with k = sqrt(N): 20 of 100 block-units, plus the last
    # segment and gradients that checkpoint_sequential leaves alone
    check(acts_sqrt < 0.4 * acts_none, f"sqrt checkpointing keeps {acts_sqrt / acts_none:.2%} of the activations")
    twenty, acts_twenty = step("--checkpoint", "20")
    check(acts_twenty < acts_sqrt < acts_none, "finer segments keep less here")
    measured = json.load(open(path("golden", "truth", "memory", "resmlp100.json")))["batches"]["2048"]["train_sgd_ckpt10"]["step1"]["peak"]
    check(abs(sq["peak"] - measured) <= 0.05 * measured, f"sqrt: {sq['peak'] / 2**20:.2f} MiB vs checkpoint_sequential {measured / 2**20:.2f} MiB")
    # recomputing the checkpointed part costs one more forward of it: 90 of 100 blocks
    check(abs(sq["recompute_macs"] - 0.9 * 2 * 2048 * 512 * 512 * 100) < 1e9, f"recompute MACs {sq['recompute_macs']}")
    check(ten["peak"] == sq["peak"], "--checkpoint 10 is sqrt here")


def case_conventions():
    """Each peer convention reproduces its tool's total on resnet18/50, vgg16
    and mobilenet_v2 (truth: tests/zoo/peer_conventions.py, the tools' rules
    applied in PyTorch), and ptflops' published README figures (0.7.3, to
    two decimals). thop's README and fvcore's quoted 4.09 G come from older
    rule sets (doc/conventions-peers.md, 'History'); the truth file records
    them under "published" and the rule sets that reproduce them."""
    truth = json.load(open(path("golden", "truth", "conventions.json")))
    for model, tools in truth["models"].items():
        f = path("models", "onnx", "zoo", model + ".onnx")
        for tool in ("fvcore", "ptflops", "thop", "deepspeed"):
            t = tools[tool]
            d = run_json(f, "--input", "3x224x224", "--convention", tool)
            want = t["total"] if tool == "fvcore" else t["macs"]
            check(d["totals"]["macs"] == want, f"{model} {tool}: {d['totals']['macs']} != {want}")
            if tool == "deepspeed":
                check(d["totals"]["flops"] == t["flops"], f"{model} deepspeed flops: {d['totals']['flops']} != {t['flops']}")
            if tool in ("fvcore", "thop"):
                check("Relu" in d["uncounted_ops"] or "Clip" in d["uncounted_ops"], f"{model} {tool}: ReLU/ReLU6 count zero there and must be listed")
        pub = [p for p in truth["published"].get(model, {}).get("ptflops", []) if "0.7.3" in p["where"]]
        if pub:
            d = run_json(f, "--input", "3x224x224", "--convention", "ptflops")
            check(f"{d['totals']['macs'] / 1e9:.2f}" == pub[0]["shown"], f"{model} ptflops {d['totals']['macs'] / 1e9:.2f} G vs published {pub[0]['shown']}")


def case_max_batch():
    """resnet50, Adam, RTX 3090: the largest batch that fits is confirmed by
    the timeline (B fits, B + 1 does not), and PyTorch's measured training
    peak, extrapolated linearly from batches 1 and 8 (CPU), plus what memest
    adds on a GPU beyond the CPU allocator's bytes (context, cuBLAS
    workspace, 512 B rounding, minus oneDNN's CPU temporaries), crosses
    24 GiB between B and B + 1 within 5 %: the model's 3 % plus the linear
    extrapolation over 30x the measured batches (memest's own curve bends
    by ~4 % there as the peak moves from a conv's backward to bn3's)."""
    f = path("models", "onnx", "zoo", "resnet50.onnx")
    base = [f, "--input", "3x224x224", "--train", "--optimizer", "adam", "--gpu", "rtx3090"]
    d = run_json(*base, "--max-batch")
    mb = d["device"]["max_batch"]
    b = mb["batch"]
    cap = d["device"]["memory"]
    check(cap == 24576 << 20, f"rtx3090 memory {cap}")
    check(b > 1, f"max batch {b}")
    at_b = run_json(*base, "--batch", str(b))["device"]
    at_b1 = run_json(*base, "--batch", str(b + 1))["device"]
    check(at_b["fits"] and not at_b1["fits"], f"timeline: batch {b} fits={at_b['fits']}, {b + 1} fits={at_b1['fits']}")
    check(at_b["needed"] == mb["needed"] and at_b1["needed"] == mb["needed_next"], "max-batch figures equal full runs")
    # truth: PyTorch's peaks at batch 1 and 8, linear in the batch
    t = json.load(open(path("golden", "truth", "memory", "resnet50.json")))["batches"]
    p1 = max(t["1"]["train_adam"]["step1"]["peak"], t["1"]["train_adam"]["step2"]["peak"])
    p8 = max(t["8"]["train_adam"]["step1"]["peak"], t["8"]["train_adam"]["step2"]["peak"])
    meas = lambda n: p1 + (p8 - p1) * (n - 1) / 7
    # what memest adds on a GPU beyond the allocator's bytes (its own figures on the cpu runtime)
    cpu = run_json(*base, "--batch", str(b), "--runtime", "cpu")["memory"]["steps"]
    overhead = at_b["needed"] - max(s["peak"] for s in cpu)
    need_b, need_b1 = meas(b) + overhead, meas(b + 1) + overhead
    check(need_b <= cap * 1.05, f"measured-based need at {b}: {need_b / 2**30:.2f} GiB > 24 GiB + 5 %")
    check(need_b1 >= cap * 0.95, f"measured-based need at {b + 1}: {need_b1 / 2**30:.2f} GiB < 24 GiB - 5 %")
    print(f"max batch {b}: memest needs {at_b['needed'] / 2**30:.3f} GiB, measured-based {need_b / 2**30:.3f} GiB; "
          f"{b + 1}: {at_b1['needed'] / 2**30:.3f} / {need_b1 / 2**30:.3f} GiB")


def case_zero3():
    """GPT-like model, Adam, 8 GPUs, ZeRO-3: per-GPU model states (fp32
    params, gradients and Adam's two moments, 4 + 4 + 8 bytes a parameter)
    are 16 Psi / N, the ZeRO paper's (2 + 2 + K) Psi / N_d with K = 12."""
    f = path("models", "onnx", "zoo", "gpt_like.onnx")
    psi = json.load(open(path("golden", "truth", "zoo", "gpt_like.json")))["params"]
    n = 8
    d = run_json(f, "--input", "input_ids=128:int64", "--train", "--optimizer", "adam", "--gpus", str(n), "--shard", "zero3")
    steady = d["memory"]["steps"][1]
    inputs = steady["at_peak"]["inputs"]
    # before the step: this rank's params and optimizer state (+ Adam's per-tensor
    # step counters); the causal masks are bool buffers, whole on every rank;
    # and step 1's cuBLAS workspaces, held to the end (not model states)
    buffers = json.load(open(path("golden", "truth", "zoo", "gpt_like.json")))["nonfloat_initializer_elements"]["BOOL"]  # 1 byte each
    states = steady["baseline"] - inputs - buffers - steady["at_peak"]["workspace"]
    expect = 12 * psi / n
    check(abs(states - expect) <= 0.001 * expect + 4 * 200, f"params + Adam state per GPU {states} vs 12 Psi/N = {expect:.0f}")
    grads = max(s["at_peak"]["gradients"] for s in d["memory"]["steps"])
    check(grads <= 4 * psi / n + 4096, f"gradients per GPU {grads} exceed 4 Psi/N")
    # and the whole model states under ZeRO-3 = 16 Psi / N
    full = run_json(f, "--input", "input_ids=128:int64", "--train", "--optimizer", "adam")
    per_gpu_total = states + 4 * psi / n
    check(abs(per_gpu_total - 16 * psi / n) <= 0.001 * 16 * psi / n + 1024, f"model states {per_gpu_total} vs 16 Psi/N {16 * psi / n}")
    single = full["memory"]["steps"][1]["baseline"] - inputs - buffers - full["memory"]["steps"][1]["at_peak"]["workspace"]
    check(abs(single / states - n) < 0.01, f"one GPU keeps {single / states:.3f}x the sharded state, expected {n}")


def case_device_profile():
    """memest --device-profile reads what memest-measure --calibrate writes
    (doc/device-profile.md): its memory, speeds, context and cuBLAS
    workspace replace the built-in table and estimates."""
    tmp = tempfile.mkdtemp(prefix="memest-prof-")
    prof = {"format": "memest-device-profile", "version": 1, "name": "lab-gpu", "memory_bytes": 16 << 30,
            "bandwidth_bytes_per_s": 5e11, "fp32_flops": 1e13, "fp16_flops": 5e13, "sms": 40,
            "cuda_context_bytes": 300 << 20, "allocation_granularity": 2 << 20, "cublas_workspace_bytes": 4 << 20,
            "measured": "test"}
    p = os.path.join(tmp, "p.json")
    json.dump(prof, open(p, "w"))
    f = path("models", "onnx", "zoo", "resnet18.onnx")
    d = run_json(f, "--input", "3x224x224", "--train", "--device-profile", p)
    check(d["device"]["memory"] == 16 << 30, f"memory from the profile: {d['device']['memory']}")
    s = d["memory"]["steps"][0]
    check(s["cuda_context_estimate"] == 300 << 20, "context from the profile")
    # one a cuBLAS handle: the forward's thread's and, at a backward peak, the autograd engine's
    check(s["peak_phase"] == "backward" and s["at_peak"]["workspace"] == 2 * (4 << 20),
          f"cuBLAS workspaces from the profile: {s['at_peak']['workspace']} at a {s['peak_phase']} peak")
    # what must fit: the worst step's allocated peak plus the profile's context
    worst = max(st["peak"] for st in d["memory"]["steps"])
    check(d["device"]["needed"] == worst + (300 << 20), f"needed {d['device']['needed']} != allocated peak {worst} + context {300 << 20}")
    del prof["bandwidth_bytes_per_s"]
    json.dump(prof, open(p, "w"))
    expect_bad([f, "--device-profile", p], ["p.json", "bandwidth_bytes_per_s"], label="profile missing a field")


def expect_bad(args, words, code=2, label=None):
    rc, out, err = run(*args)
    label = label or " ".join(os.path.basename(a) for a in args)
    check(rc == code, f"[{label}] exit {rc}, expected {code}; stderr: {err.strip()}")
    for w in words:
        check(w in err, f"[{label}] message lacks '{w}': {err.strip()}")
    check("AddressSanitizer" not in err and "runtime error" not in err, f"[{label}] sanitizer report")


def case_bad_input():
    tmp = tempfile.mkdtemp(prefix="memest-bad-")

    def write(name, data):
        p = os.path.join(tmp, name)
        with open(p, "wb" if isinstance(data, bytes) else "w") as fh:
            fh.write(data)
        return p

    good = open(path("models", "onnx", "resnet18_op17_eval.onnx"), "rb").read()
    for cut in (1, 10, 1000, len(good) // 2, len(good) - 3):
        p = write(f"trunc{cut}.onnx", good[:cut])
        expect_bad([p, "--input", "3x224x224"], [p], label=f"truncated at {cut}")
    rnd = random.Random(1)
    for i in range(5):
        p = write(f"random{i}.onnx", bytes(rnd.getrandbits(8) for _ in range(4096)))
        expect_bad([p], [p], label=f"random bytes {i}")
    expect_bad([write("empty.onnx", b"")], ["empty"], label="empty file")
    expect_bad([os.path.join(tmp, "missing.onnx")], ["cannot open"], label="missing file")
    expect_bad([write("bad.json", '{"format": "memest-graph", "version": 1,\n "inputs": [')], ["bad.json:2:", "invalid JSON"])
    expect_bad([write("fmt.json", '{"format": "other", "version": 1}')], ["format"])
    base = {"format": "memest-graph", "version": 1, "inputs": [{"name": "x", "shape": [3, 8, 8]}]}

    def model(*layers):
        return json.dumps(dict(base, layers=list(layers)))

    expect_bad([write("unknown.json", model({"name": "f", "type": "Foo"}))], ["layers[0]", "unknown layer type 'Foo'"])
    expect_bad([write("kernel.json", model({"name": "c", "type": "Conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": "three"}))],
               ['layers[0] ("c").kernel_size', "expected an integer"])
    expect_bad([write("chan.json", model({"name": "c", "type": "Conv2d", "in_channels": 4, "out_channels": 4, "kernel_size": 3}))],
               ["node 'c' (Conv)", "input has 3 channels"])
    expect_bad([write("dangling.json", model({"name": "a", "type": "Add", "inputs": ["x", "nowhere"]}))],
               ["'nowhere' is not a graph input or an earlier layer"])
    expect_bad([write("nested.json", "[" * 5000 + "]" * 5000)], ["invalid JSON"], label="deeply nested JSON")
    expect_bad([write("badutf8.json", b'{"format": "memest-graph", "version": 1, "inputs": [{"name": "x\xff\xfe", "shape": [4]}], "layers": [{"name": "r", "type": "ReLU"}]}')],
               ["badutf8.json", "inputs[0].name", "not valid UTF-8"], label="non-UTF-8 name")
    expect_bad([write("negshape.json", json.dumps(dict(base, inputs=[{"name": "x", "shape": [-3, 8]}], layers=[{"name": "r", "type": "ReLU"}])))],
               ["inputs[0].shape[0]"])
    r18 = path("models", "onnx", "resnet18_op17_eval.onnx")
    expect_bad([r18, "--input", "3x224"], ["rank 4"], label="--input rank")
    expect_bad([r18, "--input", "4x224x224"], ["dim 1 is 3 in the model, not 4"], label="--input channels")
    expect_bad([r18, "--input", "foo=3x224x224"], ["no input named 'foo'", "inputs: input"], label="--input name")
    expect_bad([r18, "--input", "3x22a4x224"], ["expected sizes"], label="--input syntax")
    # the file types its input: int64 into its Conv is no model
    expect_bad([r18, "--input", "3x224x224:int64"], ["input 'input' is float32 in the file, not int64"], label="--input dtype")
    expect_bad([write("typed.json", json.dumps(dict(base, inputs=[{"name": "x", "shape": [3, 8, 8], "dtype": "float32"}],
                                                     layers=[{"name": "r", "type": "ReLU"}]))), "--input", "3x8x8:float16"],
               ["input 'x' is float32 in the file, not float16"], label="--input dtype (JSON)")
    expect_bad([path("models", "seed_sequential.json"), "--input", "3x1x1"], ["node '4' (MaxPool)", "smaller than the window"], label="--input too small")
    expect_bad([r18, "--batch", "0"], ["--batch"], label="--batch 0")
    # a training step PyTorch refuses: BatchNorm over one value per channel
    # (DeepLabV3's ASPP pooling branch at batch 1)
    expect_bad([path("models", "onnx", "zoo", "deeplabv3_mbv3.onnx"), "--input", "3x224x224", "--train"],
               ["convs.4.2/BatchNormalization", "one value per channel"], label="--train BatchNorm at batch 1")
    expect_bad([r18, "--frobnicate"], ["unknown option"], label="unknown option")
    expect_bad([r18, "--convention", "nope"], ["--convention"], label="bad convention")
    # the CPU's vector ISA sets oneDNN's layouts: it binds nothing on CUDA
    expect_bad([r18, "--cpu-isa", "avx2"], ["--cpu-isa 'avx2' needs --runtime"], label="--cpu-isa alone")
    expect_bad([r18, "--runtime", "cuda", "--cpu-isa", "avx2"], ["--cpu-isa avx2 with --runtime cuda binds nothing"], label="--cpu-isa on cuda")
    expect_bad([r18, "--runtime", "cpu", "--cpu-isa", "sse4"], ["--cpu-isa 'sse4'", "avx512 or avx2"], label="bad --cpu-isa")


def case_crafted():
    """Hand-written ONNX files: external data, unknown ops, hostile fields."""
    tmp = tempfile.mkdtemp(prefix="memest-craft-")

    def write(name, data):
        p = os.path.join(tmp, name)
        open(p, "wb").write(data)
        return p

    ok = write("conv.onnx", oc.conv_model())
    d = run_json(ok, "--input", "3x32x32", "--batch", "4")
    layer = d["layers"][0]
    check(layer["output_shape"] == [4, 8, 30, 30], f"conv output {layer['output_shape']}")
    check(d["totals"]["params"] == 8 * 3 * 3 * 3, "params of an external-data weight")
    # MACs = N·Cout·Hout·Wout·(Cin/g)·k² = 4·8·30·30·3·9
    check(d["totals"]["macs"] == 4 * 8 * 30 * 30 * 27, f"conv MACs {d['totals']['macs']}")
    unk = write("unknown.onnx", oc.conv_model(extra_nodes=[oc.node("FancyOp", ["y"], ["z"], name="fancy")]))
    rc, out, err = run(unk, "--input", "3x32x32")
    check(rc == 0 and "FancyOp x1" in out, f"unknown op listed with its count (rc {rc}): {out[-300:]} {err}")
    expect_bad([unk, "--input", "3x32x32", "--strict"], ["FancyOp", "--strict"], code=3, label="strict")
    expect_bad([write("opset.onnx", oc.conv_model(opset=99))], ["opset 99"], label="unknown opset")
    expect_bad([write("negdim.onnx", oc.conv_model(weight_dims=(8, 3, -3, 3)))], ["initializer 'w'", "dim 2"], label="negative dim")
    expect_bad([write("hugedim.onnx", oc.conv_model(weight_dims=(1 << 62, 3, 3, 3)))], ["initializer 'w'"], label="huge dim")
    expect_bad([write("noinit.onnx", oc.model(oc.graph([oc.node("Conv", ["x", "w"], ["y"])], [oc.value_info("x", [1, 3, 8, 8])], [oc.value_info("y", [])])))],
               ["input 1 'w' is not produced"], label="missing initializer")
    cyc = oc.graph([oc.node("Relu", ["x2"], ["x1"], name="a"), oc.node("Relu", ["x1"], ["x2"], name="b"), oc.node("Add", ["x", "x2"], ["y"], name="c")],
                   [oc.value_info("x", [1, 4])], [oc.value_info("y", [])])
    expect_bad([write("cycle.onnx", oc.model(cyc))], ["cycle"], label="cycle")
    expect_bad([write("nograph.onnx", oc.f_varint(1, 8))], ["no graph"], label="no graph")
    huge = oc.f_varint(1, 8) + oc.key(7, 2) + oc.varint(1 << 60) + b"\x00" * 16
    expect_bad([write("hugelen.onnx", huge)], ["truncated or corrupt"], label="huge length field")
    empty_graph = oc.model(oc.graph([], [oc.value_info("x", [1])], [oc.value_info("x", [])]))
    expect_bad([write("emptygraph.onnx", empty_graph)], ["no nodes"], label="empty graph")
    # an attribute of the wrong type: kernel_shape as a float
    bad_attr = oc.f_bytes(1, "kernel_shape") + oc.key(2, 5) + b"\x00\x00\x40\x40" + oc.f_varint(20, 1)
    expect_bad([write("badattr.onnx", oc.model(oc.graph(
        [oc.node("MaxPool", ["x"], ["y"], attrs=[bad_attr])], [oc.value_info("x", [1, 3, 8, 8])], [oc.value_info("y", [])])))],
        ["MaxPool", "kernel_shape"], label="attribute of the wrong type")
    # names must be UTF-8 (reports are JSON)
    g = oc.graph([oc.node("Relu", [b"x\xff"], [b"y"], name=b"r\xfe")], [oc.value_info(b"x\xff", [1, 4])], [oc.value_info(b"y", [])])
    expect_bad([write("latin1.onnx", oc.model(g))], ["not valid UTF-8"], label="non-UTF-8 ONNX names")
    raw_short = oc.model(oc.graph([oc.node("Reshape", ["x", "s"], ["y"])], [oc.value_info("x", [2, 6])], [oc.value_info("y", [])],
                                  [oc.tensor("s", [2], oc.INT64, raw=oc.int64_raw([3])) ]))
    expect_bad([write("rawshort.onnx", raw_short)], ["raw_data has 8 bytes"], label="raw_data length")
    # Nesting that a recursive protobuf unpacker would follow off the stack:
    # a graph input typed as a sequence of sequences... 100,000 deep, and an
    # If whose then-branch holds an If whose branch holds an If...
    def nest(core, levels, wrap):  # wrap(inner_len) -> prefix bytes; built in linear time
        parts, n = [], len(core)
        for _ in range(levels):
            parts.append(wrap(n))
            n += len(parts[-1])
        return b"".join(reversed(parts)) + core

    def seq_of(n):  # TypeProto{4 sequence_type: {1 elem_type: <n bytes>}}
        inner = oc.key(1, 2) + oc.varint(n)
        return oc.key(4, 2) + oc.varint(len(inner) + n) + inner

    def if_in(n):  # Attribute{then_branch, GRAPH, g: Graph{node: Node{If, attribute: <n bytes>}}}
        nd = oc.f_bytes(4, "If") + oc.key(5, 2) + oc.varint(n)
        gr = oc.key(1, 2) + oc.varint(len(nd) + n) + nd
        return oc.f_bytes(1, "then_branch") + oc.f_varint(20, 5) + oc.key(6, 2) + oc.varint(len(gr) + n) + gr

    t = nest(oc.f_bytes(1, oc.f_varint(1, oc.FLOAT) + oc.f_bytes(2, oc.dim(3))), 100000, seq_of)
    deep_type = oc.model(oc.f_bytes(1, oc.node("Relu", ["x"], ["y"])) + oc.f_bytes(11, oc.f_bytes(1, "x") + oc.f_bytes(2, t))
                         + oc.f_bytes(12, oc.value_info("y", [3])))
    expect_bad([write("deeptype.onnx", deep_type)], ["graph input 0", "nests deeper than 64"], label="deeply nested type")
    a = nest(oc.f_bytes(1, "then_branch") + oc.f_varint(20, 5) + oc.f_bytes(6, oc.f_bytes(1, oc.f_bytes(4, "If"))), 100000, if_in)
    deep_if = oc.model(oc.graph([oc.node("If", ["c"], ["y"], name="if0", attrs=[a])], [oc.value_info("c", [1], elem=9)], [oc.value_info("y", [])]))
    p = write("deepif.onnx", deep_if)
    rc, out, err = run(p)
    check(rc == 0 and "If x1" in out, f"nested subgraphs: If listed as unknown, no crash (rc {rc}): {err.strip()[-300:]}")
    expect_bad([p, "--strict"], ["If", "--strict"], code=3, label="nested subgraphs, strict")
    # 400 Adds of a 65,536-element constant: each fold is allowed, all of
    # them together (26M values, 210 MB) are not
    k = 65536
    fold = oc.graph([oc.node("Add", [f"c{i}", "c0"], [f"c{i + 1}"], name=f"a{i}") for i in range(400)] + [oc.node("Relu", ["x"], ["y"])],
                    [oc.value_info("x", [3])], [oc.value_info("y", []), oc.value_info("c400", [])],
                    [oc.tensor("c0", [k], oc.INT64, raw=oc.int64_raw(list(range(k))))])
    expect_bad([write("foldbomb.onnx", oc.model(fold))], ["node 'a256' (Add)", "constant folding would hold over 16777216 values"],
               label="folding bomb")
    many_attrs = [oc.attr_int(f"a{i}", i) for i in range(2000)]
    expect_bad([write("manyattrs.onnx", oc.model(oc.graph([oc.node("Relu", ["x"], ["y"], name="r", attrs=many_attrs)], [oc.value_info("x", [3])],
                                                          [oc.value_info("y", [])])))],
               ["node 'r' (Relu)", "2000 attributes", "1024"], label="too many attributes")
    long_name = "n" * 5000
    expect_bad([write("longname.onnx", oc.model(oc.graph([oc.node("Relu", ["x"], ["y"], name=long_name)], [oc.value_info("x", [3])],
                                                        [oc.value_info("y", [])])))],
               ["node 0", "5000 bytes long", "limit is 4096"], label="over-long ONNX node name")
    expect_bad([write("longname.json", json.dumps({"format": "memest-graph", "version": 1, "inputs": [{"name": "x", "shape": [4]}],
                                                   "layers": [{"name": long_name, "type": "ReLU"}]}).encode())],
               ["layers[0].name", "longer than 4096"], label="over-long JSON layer name")
    # Shape folding: x[2,6] -> Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape
    g = oc.graph([oc.node("Shape", ["x"], ["s"]), oc.node("Gather", ["s", "i0"], ["n"], attrs=[oc.attr_int("axis", 0)]),
                  oc.node("Unsqueeze", ["n", "ax"], ["nu"]), oc.node("Concat", ["nu", "m1"], ["t"], attrs=[oc.attr_int("axis", 0)]),
                  oc.node("Reshape", ["x", "t"], ["y"])],
                 [oc.value_info("x", ["batch", 6])], [oc.value_info("y", [])],
                 [oc.tensor("i0", [], oc.INT64, raw=oc.int64_raw([0])), oc.tensor("ax", [1], oc.INT64, raw=oc.int64_raw([0])),
                  oc.tensor("m1", [1], oc.INT64, raw=oc.int64_raw([-1]))])
    d = run_json(write("fold.onnx", oc.model(g)), "--batch", "5")
    check(d["layers"][-1]["output_shape"] == [5, 6], f"folded reshape gives {d['layers'][-1]['output_shape']}")


CASES = {"torchstat_seed": case_torchstat_seed, "json_models": case_json_models, "seed_sequential": case_seed_sequential,
         "zoo": case_zoo, "zoo3": case_zoo3, "seed_memory": case_seed_memory, "checkpoint": case_checkpoint, "conventions": case_conventions, "max_batch": case_max_batch, "device_profile": case_device_profile, "zero3": case_zero3, "bad_input": case_bad_input, "crafted": case_crafted}

if __name__ == "__main__":
    fn = CASES[CASE]
    fn(ARG) if ARG else fn()
    print(f"{CASE}{' ' + ARG if ARG else ''}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
