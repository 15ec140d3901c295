#!/usr/bin/python3
"""Every zoo model (tests/zoo/models.py) through memest.estimate(): params
against sum(p.numel()), each mode's peaks against the memest command on the
committed export (models/onnx/zoo/<name>.onnx, same options) and against
PyTorch's measured truth (golden/truth/memory/<name>.json: CPU runtime,
torch 1.13's profiler) where the truth covers the model.

usage: /usr/bin/python3 tests/python/zoo_check.py [--models a,b] [--memest build/memest]

The module is exported once by estimate() (batch 1, inference); the other
cells reuse that export (estimate(report.exported, ...)), the same path
minus the trace. Prints a Markdown table; exit 1 if a param count or a CLI
comparison differs, or a truth comparison is off by more than 2 %.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import memest  # noqa: E402
import torch  # noqa: E402
from models import MODELS  # noqa: E402

TOL = 0.02
# truth mode -> estimate() keywords; the memest command's options follow from them
MODES = {
    "infer_nograd": dict(mode="infer"),
    "infer_grad": dict(mode="grad"),
    "train_sgd": dict(mode="train", optimizer="sgd"),
    "train_sgd_momentum": dict(mode="train", optimizer="momentum"),
    "train_adam": dict(mode="train", optimizer="adam"),
    "train_sgd_amp_bf16": dict(mode="train", optimizer="sgd", amp="bf16"),
    "train_adam_amp_bf16": dict(mode="train", optimizer="adam", amp="bf16"),
}
# the oracle's frozen layers (tests/test_memory.py's FREEZE)
FREEZE = {"resnet18": ["conv1", "bn1", "layer1", "layer2"]}
for _m, _o in (("train_sgd_freeze", "sgd"), ("train_adam_freeze", "adam")):
    MODES[_m] = dict(mode="train", optimizer=_o, freeze="FREEZE")
DEFAULT_MODES = ["infer_nograd", "infer_grad", "train_sgd", "train_sgd_momentum", "train_adam"]


def cli_args(kw, loss):
    a = {"infer": [], "grad": ["--grad"], "train": ["--train"]}[kw["mode"]]
    if kw["mode"] == "train":
        a += ["--optimizer", kw["optimizer"], "--loss", loss]
    if kw.get("amp"):
        a += ["--amp", kw["amp"]]
    for p in kw.get("freeze") or []:
        a += ["--freeze", p]
    return a


def loss_of(truth):
    """The oracle's loss: F.cross_entropy, or out.pow(2).mean() (mse)."""
    if truth and "pow(2).mean" in truth.get("loss", ""):
        return "mse"
    return "cross-entropy"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--memest", default=os.path.join(ROOT, "build", "memest"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    rows, bad = [], 0
    print("| model | export s | params (= sum(p.numel())) | mode | batch | estimate() peak MiB | CLI peak MiB | = CLI "
          "| truth MiB | vs truth |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        ctor, specs = MODELS[name]
        torch.manual_seed(0)
        module = ctor()
        want = sum(p.numel() for p in module.parameters())
        inputs = ["%s=%s:%s" % (n, "x".join(map(str, s)), str(d).replace("torch.", "")) for n, s, d in specs]
        tpath = os.path.join(ROOT, "golden", "truth", "memory", name + ".json")
        truth = json.load(open(tpath)) if os.path.exists(tpath) else None
        loss = loss_of(truth)
        t0 = time.time()
        try:
            first = memest.estimate(module, input_size=inputs, batch=1, mode="infer", runtime="cpu")
        except memest.ExportError as e:
            print("| %s | - | export failed: %s | | | | | | | |" % (name, str(e).splitlines()[0]))
            continue
        secs = time.time() - t0
        ok_params = first.params == want
        bad += not ok_params
        cells = []
        if truth:
            for b, modes in sorted(truth["batches"].items(), key=lambda kv: int(kv[0])):
                cells += [(int(b), m, modes[m]) for m in modes if m in MODES]
        else:
            cells = [(b, m, None) for b in (1, 8) for m in DEFAULT_MODES]
        for b, mode, meas in cells:
            kw = dict(MODES[mode])
            if kw.get("freeze") == "FREEZE":
                kw["freeze"] = FREEZE.get(name)
            r = first if (b, mode) == (1, "infer_nograd") else memest.estimate(
                first.exported, batch=b, runtime="cpu", loss=loss if kw["mode"] == "train" else None, **kw)
            peaks = [s.peak for s in r.memory.steps] if r.memory else []
            p = subprocess.run([args.memest, os.path.join(ROOT, "models", "onnx", "zoo", name + ".onnx"), *sum(
                (["--input", i] for i in inputs), []), "--batch", str(b), "--runtime", "cpu", "--format", "json",
                *cli_args(kw, loss)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            cli = [s["peak"] for s in json.loads(p.stdout)["memory"]["steps"]] if p.returncode == 0 else None
            same = cli == peaks
            bad += not same
            if meas is not None:
                m = [meas["step1"]["peak"], meas["step2"]["peak"]] if "step1" in meas else [meas["peak"]]
                # --grad's second call is the loop's steady state (golden/truth/loop), not in this truth
                errs = [(x - y) / y for x, y in zip(peaks, m)] if len(m) == len(peaks) or mode == "infer_grad" else None
                worst = max(errs, key=abs) if errs else None
                off = worst is None or abs(worst) > TOL
                bad += off
                tcol = "/".join("%.2f" % (y / 2**20) for y in m)
                vcol = ("%+.2f %%" % (100 * worst) if worst is not None else "steps differ") + (" FAIL" if off else "")
            else:
                tcol = vcol = "-"
            print("| %s | %.1f | %s %s | %s | %d | %s | %s | %s | %s | %s |" % (
                name, secs, format(first.params, ","), "ok" if ok_params else "FAIL (want %d)" % want, mode, b,
                "/".join("%.2f" % (x / 2**20) for x in peaks),
                "/".join("%.2f" % (x / 2**20) for x in cli) if cli else "error: " + p.stderr.strip()[:60],
                "yes" if same else "NO", tcol, vcol), flush=True)
            secs = 0.0
    print("\n%d failure(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
