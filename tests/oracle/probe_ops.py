"""Prints every CPU allocation and free inside one op's forward and backward,
with the op that made it (the method of measure_memory.py). Used to work out
the runtime profile 'cpu' in src/memory.c (doc/memory.md); not a test.

usage: /usr/bin/python3 tests/oracle/probe_ops.py conv|conv1|convfirst|linear|bn|maxpool|relu|adaptive
"""
import sys

import torch
import torch.nn as nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from measure_memory import collect, op_label  # noqa: E402

torch.set_num_threads(2)
torch.manual_seed(0)

CASES = {
    "conv": (lambda: nn.Conv2d(64, 128, 3, padding=1, bias=False), (1, 64, 56, 56), True),
    "conv1": (lambda: nn.Conv2d(64, 256, 1, bias=False), (1, 64, 56, 56), True),
    "convfirst": (lambda: nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), (1, 3, 224, 224), False),
    "convb8": (lambda: nn.Conv2d(64, 128, 3, padding=1, bias=False), (8, 64, 56, 56), True),
    "linear": (lambda: nn.Linear(512, 1000), (8, 512), True),
    "bn": (lambda: nn.BatchNorm2d(64), (1, 64, 56, 56), True),
    "maxpool": (lambda: nn.MaxPool2d(3, 2, 1), (1, 64, 112, 112), True),
    "relu": (lambda: nn.ReLU(inplace=True), (1, 64, 56, 56), True),
    "adaptive": (lambda: nn.AdaptiveAvgPool2d(1), (1, 512, 7, 7), True),
}


def show(title, fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    allocs, _, _ = collect(prof)
    run = peak = 0
    print(title)
    for e in allocs:
        run += e["size"]
        peak = max(peak, run)
        print(f"  {e['size']:>+12d}  sum {run:>11d}  {op_label(e['chain'])}")
    print(f"  peak {peak}\n")


def main():
    make, shape, rg = CASES[sys.argv[1]]
    m = make().train()
    x = torch.randn(*shape, requires_grad=rg)
    print("input bytes", x.numel() * 4, "weight bytes", sum(p.numel() * 4 for p in m.parameters()))
    with torch.no_grad():
        show("forward, no_grad", lambda: m(x if not rg else x.detach()))
    out = {}
    show("forward, grad", lambda: out.setdefault("y", m(x)))
    y = out.pop("y")
    g = torch.ones_like(y)
    print("output bytes", y.numel() * 4)
    show("backward (grad_output preallocated)", lambda: y.backward(g))


main()
