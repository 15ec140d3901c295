#!/usr/bin/python3
"""PyTorch (CPU) truth for issue 10's semantics cells: training steps with each
loss memest models (--loss), and torch.autocast("cpu", bfloat16) training.

Usage:
    /usr/bin/python3 tests/oracle/measure_sem.py [--models resnet18,gpt_like]
        [--batches 1,8] [--opts sgd,adam] [--losses ce,mean,sum,mse,none]
        [--amp] [--out golden/truth/sem]

Writes golden/truth/sem/<model>.json (cells merged into an existing file of
the same torch version), one cell per "b<batch>/<opt>/<loss>[/amp_bf16]".

Method: tests/oracle/measure_memory.py's (its measure(), Phase, baselines,
models, inputs and seeds are imported, not copied; its "how" text is stored
in every file). A cell is two training steps, each profiled on its own:
    out = model(*inputs); loss; backward; opt.step(); opt.zero_grad(set_to_none=True)
with the model in train() mode, optimizer SGD(lr=0.01) or Adam(lr=1e-3).
Losses (what --loss NAME means):
    ce    F.cross_entropy(out, target), target int64 [B] in [0, C); on
          logits of rank 3 ([B, T, V]) flattened as HF does:
          F.cross_entropy(out.view(-1, V), labels.view(-1)), labels int64 [B, T]
    mean  out.mean()
    sum   out.sum()
    mse   F.mse_loss(out, target), target float [out's shape] randn (seed 2)
    none  out.backward(grad), grad = torch.ones_like(out) made by the user
          inside the step (after the forward)
Targets (ce, mse) exist before the step: they are in the baseline like the
inputs. amp_bf16: forward and loss inside torch.autocast("cpu",
dtype=torch.bfloat16), backward and step outside it (measure_memory.py's
train_*_amp_bf16 modes).
"""
import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure_memory as mm  # noqa: E402  (the method; owned by another file)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

OUT_DIR = os.path.join(mm.ROOT, "golden", "truth", "sem")


class LmTiny(torch.nn.Module):
    """A small language model whose logits ([B, 128, 4096], 2 MiB a sample)
    outweigh its activations, so that what each loss allocates moves the
    peak (gpt_like takes ten minutes a cell on this machine)."""

    def __init__(self, vocab=4096, d=128):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(4 * d, d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, ids):
        h = self.emb(ids)
        h = h + self.fc2(self.act(self.fc1(h)))
        return self.head(h)


mm.LOCAL["lm_tiny"] = (LmTiny, [("input_ids", (128,), torch.int64)])
mm.VOCAB["lm_tiny"] = 4096
# models measured here that memest reads from golden/truth/sem/NAME.onnx
# (exported by this script; weights left out: memest reads shapes only)
EXPORT = {"lm_tiny"}


def export(name, path):
    """torch.onnx.export of the model at opset 17, dynamic batch, then every
    initializer's data dropped (marked external, in a file that does not
    exist): the file keeps names, shapes and dtypes."""
    import onnx
    ctor, spec = mm.registry(name)
    torch.manual_seed(0)
    model = ctor().train()
    xs = mm.make_inputs(name, spec, 1)
    names = [n for n, _, _ in spec]
    torch.onnx.export(model, tuple(xs), path, opset_version=17, input_names=names, output_names=["logits"],
                      dynamic_axes={n: {0: "batch"} for n in names + ["logits"]},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    m = onnx.load(path)
    for t in m.graph.initializer:
        t.ClearField("raw_data")
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        e = t.external_data.add()
        e.key, e.value = "location", "weights-not-kept.bin"
    onnx.save(m, path)
LOSSES = ("ce", "mean", "sum", "mse", "none")
LOSS_TEXT = {
    "ce": "F.cross_entropy(out, target) (rank 2) or F.cross_entropy(out.view(-1, V), labels.view(-1)) (rank 3)",
    "mean": "out.mean().backward()",
    "sum": "out.sum().backward()",
    "mse": "F.mse_loss(out, target), target = randn like out (made before the step)",
    "none": "out.backward(torch.ones_like(out)) (the gradient made inside the step)",
}


def make_target(loss, out_shape, batch):
    g = torch.Generator().manual_seed(2)
    if loss == "ce":
        if len(out_shape) == 2:
            return torch.randint(0, out_shape[1], (batch,), generator=g)
        return torch.randint(0, out_shape[-1], tuple(out_shape[:-1]), generator=g)
    if loss == "mse":
        return torch.randn(tuple(out_shape), generator=g)
    return None


def run_cell(name, batch, opt_name, loss, amp):
    ctor, spec = mm.registry(name)
    torch.manual_seed(0)
    model = ctor().train()
    xs = mm.make_inputs(name, spec, batch)
    with torch.no_grad():
        out_shape = list(mm.first_tensor(model(*xs)).shape)
    mm.release()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01) if opt_name == "sgd" else torch.optim.Adam(params, lr=1e-3)
    target = make_target(loss, out_shape, batch)
    steps = {}
    for step in (1, 2):
        def fn():
            with mm.Phase("forward"), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                out = mm.first_tensor(model(*xs))
                if loss == "ce":
                    lo = F.cross_entropy(out.view(-1, out.shape[-1]), target.view(-1)) if out.dim() > 2 \
                        else F.cross_entropy(out, target)
                elif loss == "mean":
                    lo = out.mean()
                elif loss == "sum":
                    lo = out.sum()
                elif loss == "mse":
                    lo = F.mse_loss(out, target)
                else:
                    lo = None
            with mm.Phase("backward"):
                if lo is None:
                    out.backward(torch.ones_like(out))
                else:
                    lo.backward()
            with mm.Phase("optimizer_step"):
                opt.step()
            with mm.Phase("zero_grad"):
                opt.zero_grad(set_to_none=True)

        r, _ = mm.measure(fn, mm.baseline_list(model, opt, xs, target))
        steps["step%d" % step] = {k: r[k] for k in ("peak", "baseline", "peak_relative", "end", "peak_phase", "seconds")}
    model = opt = xs = target = None
    mm.release()
    return {"step1": steps["step1"], "step2": steps["step2"], "out_shape": out_shape,
            "loss": LOSS_TEXT[loss], "optimizer": "SGD(lr=0.01)" if opt_name == "sgd" else "Adam(lr=1e-3)",
            "autocast": "torch.autocast('cpu', dtype=torch.bfloat16)" if amp else "off",
            "measured": datetime.datetime.now().isoformat(timespec="seconds")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,lm_tiny,gpt_like")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--opts", default="sgd,adam")
    ap.add_argument("--losses", default=",".join(LOSSES))
    ap.add_argument("--amp", action="store_true", help="under torch.autocast('cpu', bfloat16)")
    ap.add_argument("--out", default=OUT_DIR)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        if name in EXPORT:
            export(name, os.path.join(a.out, name + ".onnx"))
        path = os.path.join(a.out, name + ".json")
        doc = {}
        if os.path.exists(path):
            with open(path) as f:
                doc = json.load(f)
            if doc.get("torch") != torch.__version__:
                doc = {}
        doc.update({"how": mm.HOW, "script": "tests/oracle/measure_sem.py",
                    "what": __doc__.split("Method:")[1].strip(),
                    "torch": torch.__version__, "threads": torch.get_num_threads(), "device": "cpu",
                    "model": name, "source": mm.model_source(name)})
        cells = doc.setdefault("cells", {})
        for b in [int(x) for x in a.batches.split(",")]:
            for o in a.opts.split(","):
                for lo in a.losses.split(","):
                    key = "b%d/%s/%s%s" % (b, o, lo, "/amp_bf16" if a.amp else "")
                    t0 = time.time()
                    cells[key] = run_cell(name, b, o, lo, a.amp)
                    print("%-10s %-28s step1 %12d step2 %12d  %.1fs" % (
                        name, key, cells[key]["step1"]["peak"], cells[key]["step2"]["peak"], time.time() - t0), flush=True)
                    with open(path, "w") as f:
                        json.dump(doc, f, indent=1, sort_keys=True)
                        f.write("\n")


if __name__ == "__main__":
    main()
