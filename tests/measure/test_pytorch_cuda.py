#!/usr/bin/env python3
"""tests/measure/pytorch_cuda.py without torch or a GPU: the script runs
against fake_torch/ (a stand-in for torch and torchvision with a fake CUDA
GPU and a plain count of device memory) and its own logic is checked: the
answers without torch or without a GPU, argument errors, one fresh child
per (model, batch, mode), the measuring protocol its docstring states (seed,
eval/no_grad or train with SGD/Adam and zero_grad(set_to_none=True), the
peak reset before each step), the loss chosen for each output shape (shapes
from golden/truth/zoo, PyTorch's), the files it writes, and what it records
when a child runs out of memory or fails.

usage: test_pytorch_cuda.py SOURCE_ROOT
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1])
SCRIPT = os.path.join(ROOT, "tests", "measure", "pytorch_cuda.py")
FAKE = os.path.join(ROOT, "tests", "measure", "fake_torch")
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def run(tmp, fake, *args, **env):
    log = os.path.join(tmp, "calls.log")
    if os.path.exists(log):
        os.remove(log)
    # the source tree stays as it is: no __pycache__ beside fake_torch or tests/zoo
    e = dict(os.environ, PYTHONPATH=FAKE, PYTHONDONTWRITEBYTECODE="1", FAKE_TORCH=fake, FAKE_TORCH_LOG=log, **env)
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=e, timeout=300)
    calls = collections.defaultdict(list)
    if os.path.exists(log):
        for line in open(log):
            pid, *ev = line.split()
            calls[pid].append(ev)
    return p.returncode, p.stdout, p.stderr, calls


def written(out):
    return sorted(os.listdir(out)) if os.path.isdir(out) else []


def no_measurement(tmp):
    out = os.path.join(tmp, "none")
    rc, _, err, _ = run(tmp, "missing", "--out", out)
    check(rc == 77 and "cannot import torch" in err and "nothing measured, nothing written" in err,
          f"without torch: exit {rc}, expected 77 saying so; stderr {err!r}")
    rc, _, err, _ = run(tmp, "nocuda", "--out", out)
    check(rc == 77 and "torch.cuda.is_available() is False" in err, f"without a GPU: exit {rc}, expected 77; stderr {err!r}")
    check(written(out) == [], f"nothing may be written without a GPU: {written(out)}")
    rc, _, err, _ = run(tmp, "cuda", "--models", "resnet18,nosuch", "--out", out)
    check(rc == 2 and "unknown model 'nosuch'" in err and "resnet18" in err, f"unknown model: exit {rc}; stderr {err!r}")
    rc, _, err, _ = run(tmp, "cuda", "--modes", "train_lbfgs", "--out", out)
    check(rc == 2 and "unknown mode 'train_lbfgs'" in err, f"unknown mode: exit {rc}; stderr {err!r}")
    check(written(out) == [], f"nothing may be written on a usage error: {written(out)}")


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


SIZES = {"float32": 4, "int64": 8}
# the loss the docstring gives each output: [B, classes] cross_entropy, a
# token model's [B, T, vocab] flattened, anything else pow(2).mean()
LOSS = {"resnet18": "cross_entropy", "gpt_like": "cross_entropy (tokens)", "unet_like": "out.float().pow(2).mean()"}
BATCHES = [1, 8]
MODES = ["infer_nograd", "infer_grad", "train_sgd", "train_adam"]
INFER = ("infer_nograd", "infer_grad")


def child_protocol(label, mode, ev):
    """One child's calls, in order, against the docstring's method."""
    kinds = [e[0] for e in ev]
    check(["manual_seed", "0"] in ev and kinds.index("manual_seed") < kinds.index("model_to"),
          f"{label}: torch.manual_seed(0) must come before the model is built")
    check("autocast" not in kinds, f"{label}: autocast without --amp")
    fwd = [e for e in ev if e[0] == "forward"]
    check(len(fwd) == 8, f"{label}: {len(fwd)} forwards, expected 3 measured + 5 timed")
    want = {"infer_nograd": ["forward", "no_grad", "eval"], "infer_grad": ["forward", "grad", "eval"]}.get(
        mode, ["forward", "grad", "train"])
    check(all(e == want for e in fwd), f"{label}: forwards {fwd}, expected {want}")
    # each measured step: reset the peak, run, synchronize, then read it
    steps = [i for i, k in enumerate(kinds) if k == "reset_peak"]
    check(len(steps) == 3, f"{label}: peak reset {len(steps)} times, expected before each of 3 steps")
    for i in steps:
        rest = kinds[i + 1:]
        ok = "forward" in rest and "max_memory_allocated" in rest and rest.index("forward") < rest.index("max_memory_allocated")
        ok = ok and "synchronize" in rest[rest.index("forward"):rest.index("max_memory_allocated")]
        check(ok, f"{label}: a step must reset the peak, run, synchronize, then read max_memory_allocated: {rest[:12]}")
    if mode in INFER:
        check("optimizer" not in kinds and "backward" not in kinds, f"{label}: inference builds no optimizer, runs no backward")
        return
    opt = {"train_sgd": ["optimizer", "SGD", "0.01"], "train_adam": ["optimizer", "Adam", "0.001"]}[mode]
    check(opt in ev, f"{label}: expected {opt[1]}(lr={opt[2]})")
    for k in ("backward", "step"):
        check(kinds.count(k) == 8, f"{label}: {kinds.count(k)} {k}s, expected one per step (8)")
    check([e for e in ev if e[0] == "zero_grad"] == [["zero_grad", "set_to_none=True"]] * 8,
          f"{label}: zero_grad(set_to_none=True) after every step")


def measurements(tmp):
    out = os.path.join(tmp, "cuda")
    models = sorted(LOSS)
    rc, stdout, err, calls = run(tmp, "cuda", "--models", ",".join(models), "--batches", ",".join(map(str, BATCHES)),
                                 "--out", out)
    check(rc == 0, f"measuring with a (fake) GPU: exit {rc}; stderr {err[-2000:]!r}")
    check(written(out) == ["fake_gpu_24gb_%s.json" % m for m in models], f"files written: {written(out)}")
    # a fresh child process per (model, batch, mode), so every one starts with an empty allocator
    children = [pid for pid, ev in calls.items() if any(e[0] == "forward" for e in ev)]
    check(len(children) == len(models) * len(BATCHES) * len(MODES), f"{len(children)} child processes measured, expected one per run")
    by_run = {}
    for pid in children:
        ev = calls[pid]
        model = next(e[2] for e in ev if e[0] == "model_to")
        mode = "train_adam" if ["optimizer", "Adam", "0.001"] in ev else "train_sgd" if any(e[:2] == ["optimizer", "SGD"] for e in ev) \
            else "infer_grad" if ["forward", "grad", "eval"] in ev else "infer_nograd"
        by_run.setdefault((model, mode), []).append(ev)
    for m in models:
        path = os.path.join(out, "fake_gpu_24gb_%s.json" % m)
        if not os.path.exists(path):
            continue
        doc = json.load(open(path))
        truth = json.load(open(os.path.join(ROOT, "golden", "truth", "zoo", m + ".json")))
        for k, v in (("gpu", "Fake GPU 24GB"), ("gpu_memory_bytes", 24 << 30), ("compute_capability", "8.6"), ("sms", 82),
                     ("cuda", "12.1"), ("cudnn", 8902), ("torch", "0.0+fake"), ("model", m),
                     ("source", "tests/zoo/models.py:MODELS[%r]" % m)):
            check(doc.get(k) == v, f"{m}: {k} is {doc.get(k)!r}, expected {v!r}")
        check(doc.get("settings") == {"cudnn.benchmark": False, "cudnn.allow_tf32": True, "matmul.allow_tf32": False},
              f"{m}: settings {doc.get('settings')}")
        check(doc.get("how", "").startswith("Method (also in the \"how\" field"), f"{m}: 'how' is not the docstring's method")
        check(sorted(doc.get("batches", {})) == sorted(map(str, BATCHES)), f"{m}: batches {sorted(doc.get('batches', {}))}")
        params = truth["params"]
        for b in BATCHES:
            runs = doc.get("batches", {}).get(str(b), {})
            check(sorted(runs) == sorted(MODES), f"{m} b{b}: modes {sorted(runs)}")
            inputs = sum(b * numel(i["shape"]) * SIZES[i["dtype"]] for i in truth["inputs"])
            output = 4 * b * numel(truth["batches"]["1"]["output_shapes"][0][1:])
            base = 4 * params + inputs
            # what is left after a step: the kept output (inference; with autograd on also
            # the graph it holds, the fake's saved tensor); Adam's moments
            after = {"infer_nograd": base + output, "infer_grad": base + 2 * output, "train_sgd": base,
                     "train_adam": base + 8 * params}
            for mode in MODES:
                r, label = runs.get(mode, {}), f"{m} b{b} {mode}"
                if "error" in r or not r:
                    check(False, f"{label}: not measured: {r}")
                    continue
                check(r["params"] == params, f"{label}: params {r['params']} != {params}")
                check(r["baseline_allocated"] == base, f"{label}: baseline {r['baseline_allocated']} != weights + inputs {base}")
                check(r["loss"] == (None if mode in INFER else LOSS[m]), f"{label}: loss {r['loss']!r}")
                check(r["step_time_s"] == 0.01, f"{label}: step time {r['step_time_s']} s, expected the timed 50 ms / 5")
                for step in ("step1", "steady"):
                    s = r.get(step, {})
                    check(s.get("memory_allocated_after") == after[mode], f"{label} {step}: allocated after {s.get('memory_allocated_after')} != {after[mode]}")
                    check(s.get("output_kept") == (mode in INFER), f"{label} {step}: output_kept {s.get('output_kept')}")
                    peak, reserved = s.get("max_memory_allocated", 0), s.get("max_memory_reserved", 0)
                    # the seed's loop: the last step's output and graph live through the next call
                    least = after[mode] + (2 * output if mode == "infer_grad" and step == "steady" else
                                           output if mode.startswith("train") else 0)
                    check(reserved >= peak >= least, f"{label} {step}: peak {peak} / reserved {reserved} below what the step holds ({least})")
                evs = by_run.get((m, mode), [])
                if len(evs) == len(BATCHES):
                    child_protocol(label, mode, evs[BATCHES.index(b)])
        # the loss reads the right tensor: class logits against [B] labels, token logits flattened
        for ev in by_run.get((m, "train_sgd"), []):
            loss = [e for e in ev if e[0] == "loss"]
            if LOSS[m].startswith("cross_entropy"):
                shp = json.loads(" ".join(loss[0][2:]).replace("] [", "]|[").split("|")[0]) if loss else None
                check(loss and len(shp) == 2, f"{m}: cross_entropy must get 2-d logits, got {loss[:1]}")
            else:
                check(not loss, f"{m}: pow(2).mean() expected, got {loss[:1]}")


def options(tmp):
    # --amp, --input and --jobs: autocast around forward and loss, the first input's
    # per-sample shape replaced, children two at a time, all said in the file
    out = os.path.join(tmp, "amp")
    rc, _, err, calls = run(tmp, "cuda", "--models", "resnet18", "--batches", "2", "--modes", "infer_grad,train_sgd",
                            "--amp", "fp16", "--input", "3x64x64", "--jobs", "2", "--out", out)
    check(rc == 0, f"--amp fp16 --input 3x64x64 --jobs 2: exit {rc}; {err[-500:]!r}")
    name = "fake_gpu_24gb_resnet18_amp_fp16_3x64x64.json"
    check(written(out) == [name], f"--amp/--input file: {written(out)}")
    doc = json.load(open(os.path.join(out, name))) if written(out) == [name] else {}
    check((doc.get("amp"), doc.get("input"), doc.get("jobs")) == ("fp16", [3, 64, 64], 2),
          f"the file names its options: amp {doc.get('amp')}, input {doc.get('input')}, jobs {doc.get('jobs')}")
    params = json.load(open(os.path.join(ROOT, "golden", "truth", "zoo", "resnet18.json")))["params"]
    runs = doc.get("batches", {}).get("2", {})
    for mode in ("infer_grad", "train_sgd"):
        r = runs.get(mode, {})
        check(r.get("baseline_allocated") == 4 * params + 2 * 3 * 64 * 64 * 4,
              f"{mode}: baseline {r.get('baseline_allocated')} is not weights + a 2x3x64x64 input")
    children = [ev for ev in calls.values() if any(e[0] == "forward" for e in ev)]
    check(len(children) == 2, f"{len(children)} children for two runs")
    for ev in children:
        check(["randn", "2x3x64x64"] in ev, f"the input is not 2x3x64x64: {[e for e in ev if e[0] == 'randn']}")
        # every forward, and the loss, between autocast("cuda", float16) and its end
        inside, ok = False, True
        for e in ev:
            if e[0] == "autocast":
                ok &= e[1:] == ["cuda", "torch.float16"]
                inside = True
            elif e[0] == "autocast_end":
                inside = False
            elif e[0] in ("forward", "loss"):
                ok &= inside
        check(ok and any(e[0] == "autocast" for e in ev), f"forward or loss outside torch.autocast('cuda', float16)")
    for bad, what in ((["--input", "3x0x64"], "--input '3x0x64'"), (["--jobs", "0"], "--jobs 0"), (["--amp", "fp8"], "--amp")):
        rc, _, err, _ = run(tmp, "cuda", "--models", "resnet18", "--out", os.path.join(tmp, "bad"), *bad)
        check(rc == 2 and what in err, f"{bad}: exit {rc}, expected 2 naming {what}; {err[-300:]!r}")
    check(written(os.path.join(tmp, "bad")) == [], "nothing written on a usage error")


def oom_and_failure(tmp):
    # a GPU too small for Adam's state: that run records "out of memory", the rest are measured, exit 0
    out = os.path.join(tmp, "oom")
    rc, _, err, _ = run(tmp, "cuda", "--models", "resnet18", "--batches", "1", "--out", out, FAKE_TORCH_MEMORY=str(420 << 20))
    check(rc == 0, f"out of memory is an answer, not a failure: exit {rc}; {err[-500:]!r}")
    runs = json.load(open(os.path.join(out, "fake_gpu_24gb_resnet18.json")))["batches"]["1"] if written(out) else {}
    check(runs.get("train_adam") == {"error": "out of memory"}, f"Adam on 420 MiB: {runs.get('train_adam')}")
    check("steady" in runs.get("infer_nograd", {}), f"inference still measured: {runs.get('infer_nograd')}")
    # any other failure of a child: recorded with its last line, exit 1
    out = os.path.join(tmp, "fail")
    rc, _, err, _ = run(tmp, "cuda", "--models", "resnet18", "--batches", "1", "--modes", "train_sgd", "--out", out, FAKE_TORCH_FAIL="1")
    check(rc == 1, f"a failing child: exit {rc}, expected 1")
    runs = json.load(open(os.path.join(out, "fake_gpu_24gb_resnet18.json")))["batches"]["1"] if written(out) else {}
    check(runs.get("train_sgd") == {"error": ["RuntimeError: fake_torch: forward failed (FAKE_TORCH_FAIL)"]},
          f"the failure's last line is recorded: {runs.get('train_sgd')}")


with tempfile.TemporaryDirectory(prefix="memest-pytorch-cuda-") as tmp:
    no_measurement(tmp)
    measurements(tmp)
    options(tmp)
    oom_and_failure(tmp)
print(f"pytorch_cuda.py: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
