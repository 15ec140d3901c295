"""Run the real peer tools (thop, ptflops, torchinfo) on every zoo model and
record their totals as truth: golden/truth/peers/<tool>.json.

Run as:
    /usr/bin/python3 tests/zoo/peer_tools.py [--tools thop,ptflops,torchinfo]
        [--models a,b] [--src .peer_tools] [--out golden/truth/peers]

The tools are not Debian packages: their sources are fetched into the
git-ignored folder .peer_tools/ (never committed), one folder per repository
named owner+name, e.g. from a bare git mirror:
    git -C MIRROR archive HEAD | tar -x -C .peer_tools/Lyken17+pytorch-OpCounter
and imported from there with Debian's python3-torch 1.13 / torchvision 0.14.
Each output file records the commit of the sources it ran (--commits, or
.peer_tools/<repo>/.commit when present), the torch version and how.

Models: tests/zoo/models.py MODELS (the torchvision models of
tests/zoo/export_zoo.py are among them): a model added there is one more run
here. Each is built with torch.manual_seed(0), put in eval mode, and counted
at batch 1 on its registry input (token models: input_ids of 128 tokens).
A model of several inputs (t5_like: input_ids, decoder_input_ids) gets them
in the registry's order from the one generator: positional for thop and
torchinfo, by name for ptflops (its input_constructor's dict; its batch
counter then sees no positional input and takes batch 1, as it prints).
fvcore is not run: it needs iopath, which Debian lacks (memest keeps its
reimplementation, tests/zoo/peer_conventions.py).
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from models import MODELS, VOCAB  # noqa: E402

REPOS = {
    "thop": "Lyken17+pytorch-OpCounter",
    "ptflops": "sovrasov+flops-counter.pytorch",
    "torchinfo": "TylerYep+torchinfo",
}


def make_inputs(name, batch):
    """[(input name, tensor)] in the registry's order, from one generator:
    a single input is drawn exactly as before several were allowed."""
    _, inputs = MODELS[name]
    g = torch.Generator().manual_seed(3)
    xs = []
    for iname, shape, dtype in inputs:
        if dtype == torch.int64:
            x = torch.randint(0, VOCAB.get(name, 1000), (batch,) + tuple(shape), generator=g)
        else:
            x = torch.randn((batch,) + tuple(shape), generator=g, dtype=dtype)
        xs.append((iname, x))
    return xs


def build(name):
    torch.manual_seed(0)
    model = MODELS[name][0]()
    model.eval()
    return model


def run_thop(name, xs):
    import thop
    macs, params = thop.profile(build(name), inputs=tuple(x for _, x in xs), verbose=False)
    return {"macs": int(macs), "params": int(params)}


def run_ptflops(name, xs):
    import contextlib
    import io
    from ptflops import get_model_complexity_info
    # the pytorch backend (module hooks + patched functionals), which memest's
    # --convention ptflops models; MACs as the tool prints them ("GMac")
    # several inputs go by name (ptflops calls model(**dict))
    x = xs[0][1] if len(xs) == 1 else dict(xs)
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        macs, params = get_model_complexity_info(
            build(name), tuple(xs[0][1].shape[1:]), as_strings=False, print_per_layer_stat=False,
            input_constructor=lambda _res: x, backend="pytorch")
    if macs is None:  # ptflops catches its own failure, prints it and returns None
        lines = [l for l in said.getvalue().splitlines() if l.strip()]
        raise RuntimeError("ptflops failed: " + " ".join(lines[-2:]))
    return {"macs": int(macs), "params": int(params)}


def run_torchinfo(name, xs):
    import torchinfo
    s = torchinfo.summary(build(name), input_data=[x for _, x in xs], verbose=0)
    return {"params": int(s.total_params), "trainable_params": int(s.trainable_params),
            "mult_adds": int(s.total_mult_adds)}


RUN = {"thop": run_thop, "ptflops": run_ptflops, "torchinfo": run_torchinfo}


def commit_of(src, tool):
    f = os.path.join(src, REPOS[tool], ".commit")
    if os.path.exists(f):
        return open(f).read().strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", default=",".join(RUN))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--src", default=os.path.join(ROOT, ".peer_tools"))
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "peers"))
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(a.out, exist_ok=True)
    for tool in a.tools.split(","):
        sys.path.insert(0, os.path.join(a.src, REPOS[tool]))
        out = os.path.join(a.out, tool + ".json")
        doc = json.load(open(out)) if os.path.exists(out) else {"models": {}}
        doc.update({
            "tool": tool,
            "source": "github:%s@%s" % (REPOS[tool].replace("+", "/"), commit_of(a.src, tool)),
            "how": ("tests/zoo/peer_tools.py: the tool's own code from its sources (source), run with "
                    "Debian torch %s on tests/zoo/models.py MODELS (torch.manual_seed(0), eval(), "
                    "random input of the registry's shape, seed 3), CPU" % torch.__version__),
            "units": "macs/mult_adds: the tool's total as it returns it; params: its parameter count",
        })
        for name in a.models.split(","):
            xs = make_inputs(name, a.batch)
            try:
                with torch.no_grad():
                    r = RUN[tool](name, xs)
            except Exception as e:  # the tool itself fails on this model: recorded, not hidden
                r = {"error": "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[-1] if str(e).strip() else "")}
            r["input"] = list(xs[0][1].shape) if len(xs) == 1 else {n: list(x.shape) for n, x in xs}
            doc["models"].setdefault(name, {})[str(a.batch)] = r
            print(tool, name, r, flush=True)
        with open(out, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
