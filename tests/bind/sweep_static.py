#!/usr/bin/python3
"""Issue 10 over the whole zoo (tests/zoo/models.py): each model exported
as torch.onnx.export's default writes it (fixed batch 1 and fixed sizes,
eval, constant folding) and again with a dynamic batch, into a temporary
folder (nothing committed); memest re-binds the fixed export to batch 8 and
must predict what it predicts for the dynamic one (params, MACs, peaks of
inference, --grad and Adam training on the CPU runtime); then another input
size (images 3x256x256, tokens 96) must either give PyTorch's output shape
or stop with exit 2 naming a node. Prints one line per model.

Run: /usr/bin/python3 tests/bind/sweep_static.py MEMEST [models,...]"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from models import MODELS, VOCAB  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
MEMEST = sys.argv[1]
ONLY = sys.argv[2].split(",") if len(sys.argv) > 2 else list(MODELS)
MODES = [[], ["--grad"], ["--train", "--optimizer", "adam"]]


def memest(f, *args):
    p = subprocess.run([MEMEST, f, *args, "--format", "json", "--runtime", "cpu"], capture_output=True, text=True)
    return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else p.stderr.strip())


def inputs(name, batch, seq=None, hw=None):
    out = []
    for _, shape, dt in MODELS[name][1]:
        shape = list(shape)
        if dt == torch.int64:
            if seq:
                shape[0] = seq
            out.append(torch.randint(0, VOCAB.get(name, 100), [batch] + shape))
        else:
            if hw:
                shape[1:] = [hw, hw]
            out.append(torch.randn([batch] + shape))
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="memest-sweep-")
    for name in ONLY:
        torch.manual_seed(0)
        ctor, specs = MODELS[name]
        model = ctor().eval()
        names = [s[0] for s in specs]
        xs = inputs(name, 1)
        files = {}
        for kind, dyn in (("static", None), ("dyn", {n: {0: "batch"} for n in names + ["output"]})):
            files[kind] = os.path.join(tmp, f"{name}_{kind}.onnx")
            torch.onnx.export(model, tuple(xs), files[kind], input_names=names, output_names=["output"],
                              dynamic_axes=dyn, opset_version=17)
        seq = 96 if specs[0][2] == torch.int64 else None
        hw = None if seq else 256
        line = [name]
        bad = []
        for mode in MODES:
            rs, a = memest(files["static"], "--batch", "8", *mode)
            rd, b = memest(files["dyn"], "--batch", "8", *mode)
            if rs or rd:
                bad.append(f"{' '.join(mode) or 'infer'}: static exit {rs} {a if rs else ''} dyn exit {rd} {b if rd else ''}")
                continue
            pa = [s["peak"] for s in a["memory"]["steps"]]
            pb = [s["peak"] for s in b["memory"]["steps"]]
            if a["totals"]["params"] != b["totals"]["params"] or a["totals"]["macs"] != b["totals"]["macs"] or pa != pb:
                bad.append(f"{' '.join(mode) or 'infer'}: params {a['totals']['params']}/{b['totals']['params']} "
                           f"macs {a['totals']['macs']}/{b['totals']['macs']} peaks {pa}/{pb}")
        line.append("batch 8 = dynamic export" if not bad else "batch 8 DIFFERS: " + "; ".join(bad))
        spec = str(seq) if seq else f"3x{hw}x{hw}"
        rc, r = memest(files["static"], "--input", spec, "--batch", "2")
        if rc == 0:
            with torch.no_grad():
                y = model(*inputs(name, 2, seq, hw))
            y = y[0] if isinstance(y, (tuple, list)) else y
            got = [l["output_shape"] for l in r["layers"] if l.get("output_shape")][-1]
            line.append(f"--input {spec} --batch 2: output {got}, PyTorch {list(y.shape)}"
                        + ("" if got == list(y.shape) else " MISMATCH"))
        else:
            line.append(f"--input {spec} --batch 2: exit {rc}: {r[:300]}")
        print(" | ".join(line), flush=True)
        for f in files.values():
            os.remove(f)


if __name__ == "__main__":
    main()
