#!/usr/bin/env python3
"""memest-measure end to end on the CPU stand-in of CUDA (fake_cuda.c,
kernels_host.c): the executor follows memest's plan, measures, times,
calibrates, writes its report and a device profile that reads back.

usage: emulated.py MEMEST_MEASURE_EMULATED ROOT

What must hold on the stand-in: the plan is memest's timeline; the tensors'
peak and every layer's live bytes are exactly memest's (the executor
allocates what the plan says, no more); the cuDNN workspaces show up as
library memory; every layer that launches something was timed.
"""
import json
import os
import subprocess
import sys
import tempfile

exe, root = os.path.abspath(sys.argv[1]), sys.argv[2]
failures = []
FAST = ["--warmup", "0", "--iterations", "1"]


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([exe, *args], cwd=root, capture_output=True, text=True, timeout=600, env=e)
    return p.returncode, p.stdout, p.stderr


def check(label, cond, detail):
    if not cond:
        failures.append(f"{label}: {detail}")
    return cond


def row(rows, name):
    for r in rows:
        if r["name"] == name:
            return r
    return None


def measured(label, args, training=False):
    rc, out, err = run(*args, "--format", "json", *FAST)
    if not check(label, rc == 0, f"exit {rc}; stderr: {err[-2000:]!r}"):
        return None
    check(label, "without the workspace" not in err, "a GEMM ran without the plan's cuBLAS workspace")
    try:
        rep = json.loads(out)
    except ValueError as e:
        check(label, False, f"not JSON ({e}): {out[:500]!r}")
        return None
    check(label, rep["format"] == "memest-measure" and rep["version"] == 1, "format")
    check(label, rep["plan"]["matches_memest"], f"plan: {rep['plan']['detail']}")
    steps = [", step 1", ", steady"] if training else [""]
    for s in steps:
        r = row(rep["memory"], "peak tensors (requested)" + s)
        if check(label, r is not None, f"no peak row{s}"):
            check(label, r["measured"] == r["predicted"] and r["error_pct"] == 0,
                  f"peak{s}: measured {r['measured']}, memest {r['predicted']}")
        d = row(rep["memory"], "peak device use vs allocated" + s)
        check(label, d is not None and d["measured"] and d["measured"] >= r["measured"],
              f"device peak{s} {d and d['measured']} below the tensors' {r and r['measured']}")
    ws = row(rep["memory"], "largest cuDNN workspace")
    conv = any(l["op"] == "Conv" for l in rep["layers"])
    if "--conv" not in args and conv:
        check(label, ws and ws["measured"] and ws["measured"] >= 1 << 20, f"cuDNN workspace {ws}")
    ctx = row(rep["memory"], "CUDA context")
    check(label, ctx and ctx["measured"] == 300 << 20, f"context {ctx}")
    own = row(rep["memory"], "cuBLAS workspace (its own, first GEMM)")
    check(label, own and own["measured"] == 4 << 20, f"cuBLAS's own workspace {own}")
    bad = [l for l in rep["layers"] if l["live_error_pct"] not in (0, None)]
    check(label, not bad, f"{len(bad)} layers' live bytes differ from memest's, first {bad[:1]}")
    fwd = [l for l in rep["layers"] if l["phase"] == "forward"]
    check(label, fwd and all(l["predicted_live_bytes"] is not None for l in fwd), "forward layers without memest's live bytes")
    untimed = [l for l in rep["layers"] if l["phase"] == "forward" and l["op"] in ("Conv", "Gemm", "Linear") and l["measured_s"] is None]
    check(label, not untimed, f"untimed layers {untimed[:1]}")
    if training:
        check(label, any(l["phase"] == "backward" and l["measured_s"] is not None for l in rep["layers"]), "no timed backward")
        t = row(rep["time"], "optimizer")
        check(label, t and t["measured"] is not None and t["measured"] > 0, f"optimizer time {t}")
    return rep


measured("resnet18 inference", ["models/resnet18.json", "--input", "3x32x32", "--batch", "2"])
# batch 2: at 32 px layer4's BatchNorm sees 1x1, one value per channel at
# batch 1, which PyTorch refuses to train
measured("resnet18 sgd", ["models/resnet18.json", "--input", "3x32x32", "--batch", "2", "--train"], training=True)
# every op memest-measure runs, small: Concat (gradients that are channel
# slices, through cuDNN and through the direct kernels), Clip, depthwise
# convolution, ceil-mode max-pool, average pools, Dropout, Linear
MINI = "tests/measure/models/mini.json"
measured("mini sgd", [MINI, "--batch", "2", "--train"], training=True)
measured("mini adam", [MINI, "--batch", "3", "--train", "--optimizer", "adam"], training=True)
measured("mini momentum, direct", [MINI, "--batch", "2", "--train", "--optimizer", "momentum", "--conv", "direct"], training=True)
measured("mini inference", [MINI, "--batch", "2"])
# MatMul folded and batched, Gemm with transB, alpha, beta and a [1, N] C (tests/measure/make_models.py)
measured("matmul adam", ["tests/measure/models/matmul.onnx", "--batch", "3", "--train", "--optimizer", "adamw"], training=True)
measured("matmul inference", ["tests/measure/models/matmul.onnx", "--batch", "2"])
# an exported graph at its 224 x 224: Clip with constant inputs, Gemm
measured("mobilenet_v2 inference", ["models/onnx/mobilenet_v2_op13_eval.onnx"])

# the allocator's log: every call of the measured steps
with tempfile.TemporaryDirectory() as d:
    log = os.path.join(d, "alloc.csv")
    rc, out, err = run(MINI, "--train", "--alloc-log", log, *FAST)
    if check("alloc log", rc == 0, f"exit {rc}: {err!r}"):
        lines = open(log).read().splitlines()
        check("alloc log", lines[0] == "seq,op,category,plan_buffer,bytes,live_after,device_used", f"header {lines[:1]}")
        ops = [ln.split(",")[1] for ln in lines[1:]]
        check("alloc log", ops.count("alloc") > 50 and ops.count("free") > 50, f"{len(ops)} calls")

# the table
rc, out, err = run(MINI, *FAST)
check("table", rc == 0 and "predicted" in out and "measured" in out and "fire.expand3x3" in out, f"exit {rc}: {out[:400]!r} {err!r}")

# calibration: a profile the reader accepts, then used
with tempfile.TemporaryDirectory() as d:
    prof = os.path.join(d, "profile.json")
    rc, out, err = run("--calibrate", "-o", prof)
    if check("calibrate", rc == 0, f"exit {rc}: {err!r}"):
        p = json.load(open(prof))
        for k in ("format", "version", "name", "memory_bytes", "bandwidth_bytes_per_s", "fp32_flops", "fp16_flops", "sms",
                  "cuda_context_bytes", "allocation_granularity", "cublas_workspace_bytes", "measured"):
            check("calibrate", k in p, f"no field {k}")
        check("calibrate", p.get("format") == "memest-device-profile" and p.get("version") == 1, "format")
        check("calibrate", p.get("cuda_context_bytes") == 300 << 20 and p.get("allocation_granularity") == 512, f"sizes {p}")
        check("calibrate", p.get("cublas_workspace_bytes") == 4 << 20 and p.get("fp16_flops") == 0, f"cuBLAS {p}")
        check("calibrate", p.get("bandwidth_bytes_per_s", 0) > 0 and p.get("fp32_flops", 0) > 0, f"rates {p}")
        rc, out, err = run(MINI, "--device-profile", prof, "--format", "json", *FAST)
        if check("with a profile", rc == 0, f"exit {rc}: {err!r}"):
            check("with a profile", prof in json.loads(out)["roofline_gpu"], "the profile is not named")

# the stand-in without a GPU
rc, out, err = run("models/resnet18.json", env={"ME_FAKE_NO_GPU": "1"})
check("no GPU", rc == 77 and "no CUDA GPU available (cudaGetDeviceCount:" in err and "nothing measured" in err, f"exit {rc}: {err!r}")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
