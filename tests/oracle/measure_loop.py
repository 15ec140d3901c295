#!/usr/bin/python3
"""PyTorch (CPU) truth for the seed's inference loop (issue 10): the model
called again and again without torch.no_grad(),

    for _ in range(n):
        outputs = model(inputs)

keeps the previous iteration's output, and through its grad_fn the whole
autograd graph with every tensor the forward saved, alive while the next
forward runs: `outputs` is re-bound only when the call returns. The steady
state therefore holds two graphs at its peak.

Method: tests/oracle/measure_memory.py's (imported, not copied: its
measure(), baseline_list(), registry(), make_inputs(); its docstring says
how a region is profiled and counted). The model is built in eval() mode
(torch.manual_seed(0), inputs seed 1, torch.set_num_threads(2)); three
regions are profiled one after the other, each `hold["out"] = model(*xs)`
with the previous output still held:
  step 1: baseline = parameters, buffers and inputs; peak and end absolute.
  step 2: starts where step 1 ended (its output and autograd graph alive:
          end of step 1); peak = end of step 1 + the region's relative peak.
          The old graph's frees (after the call returns) come after that
          peak and do not lower it.
  step 3: the same again, a check that step 2 is the steady state (its
          relative peak equals step 2's).
Writes golden/truth/loop/<model>_b<batch>.json.

Run: nice -n 10 /usr/bin/python3 tests/oracle/measure_loop.py [--models a,b] [--batches 1,8]"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure_memory as mm  # noqa: E402

OUT = os.path.join(mm.ROOT, "golden", "truth", "loop")


def measure_loop(name, batch):
    ctor, spec = mm.registry(name)
    torch.manual_seed(0)
    model = ctor().eval()
    xs = mm.make_inputs(name, spec, batch)
    hold = {}

    def fn():
        hold["out"] = model(*xs)

    base = mm.baseline_list(model, None, xs, None)
    r1, _ = mm.measure(fn, base)
    steps = [{"step": 1, "baseline": r1["baseline"], "peak": r1["peak"], "end": r1["end"]}]
    graph = r1["end"] - r1["baseline"]
    for k in (2, 3):
        r, _ = mm.measure(fn, base)
        steps.append({"step": k, "baseline": r1["end"], "peak": r1["end"] + r["peak_relative"],
                      "peak_relative": r["peak_relative"], "untracked_frees": len(r["untracked_frees"])})
    return {
        "model": name, "source": mm.model_source(name), "batch": batch, "mode": "infer_grad_loop",
        "torch": torch.__version__, "how": " ".join(__doc__.split("Method: ")[1].split("Writes")[0].split()),
        "graph_bytes_after_step1": graph, "steps": steps,
        "steady_state_check": steps[1]["peak_relative"] == steps[2]["peak_relative"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,bert_like")
    ap.add_argument("--batches", default="1,8")
    a = ap.parse_args()
    torch.set_num_threads(2)
    os.makedirs(OUT, exist_ok=True)
    for name in a.models.split(","):
        for b in map(int, a.batches.split(",")):
            r = measure_loop(name, b)
            with open(os.path.join(OUT, f"{name}_b{b}.json"), "w") as fh:
                json.dump(r, fh, indent=1)
                fh.write("\n")
            print(name, b, [(s["step"], s["peak"]) for s in r["steps"]], "steady" if r["steady_state_check"] else "NOT STEADY", flush=True)


if __name__ == "__main__":
    main()
