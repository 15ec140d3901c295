#!/usr/bin/python3
"""What autograd saves, and what each kernel allocates, in one forward of a
zoo model, under whatever torch runs this script (Debian's 1.13 on the CPU
here, a CUDA build on a GPU machine). Truth for the rules memest's timeline
takes from derivatives.yaml, never from memest.

Usage (repo root):
    python3 tests/measure/saved_tensors.py --models vit_b_16,llama_like
        [--batches 1,8] [--device cpu|cuda] [--amp bf16|fp16] [--modes eval,train]
        [--trace] [--out DIR]

Method. The model comes from tests/zoo/models.py MODELS (torch.manual_seed(0),
random weights), its inputs from zoo_common.random_inputs (seed 1), as
tests/measure/pytorch_cuda.py and tests/oracle make them. One forward runs
with autograd on, in eval() ("eval": the seed's inference loop) or train()
("train": Dropout masks, batch statistics). Then the autograd graph is walked
from the output: every node's `_saved_*` attributes (the SavedVariables
derivatives.yaml declares) are read, and each tensor is recorded with its
node, attribute, shape, dtype and storage (data pointer, bytes). Storages of
parameters, buffers and inputs are marked, so "saved_bytes" is the distinct
storage autograd keeps beyond them (the output included when a node saves
it). With --trace, a TorchDispatchMode records every kernel of the forward
(below autograd): its name, the bytes of its outputs, and on CUDA the
allocator's allocated bytes after it and its peak inside it
(reset_peak_memory_stats before each kernel), under no_grad and with
autograd on. Writes DIR/saved_<torch>_<device>[_<amp>]_<model>.json.
"""
import argparse
import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from models import MODELS, VOCAB  # noqa: E402
from zoo_common import first_tensor, random_inputs  # noqa: E402

AMP = {"fp16": torch.float16, "bf16": torch.bfloat16}


def storage_of(t):
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return st.data_ptr(), st.nbytes()


def tensors_in(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in tensors_in(x)]
    return []


def walk(out, known):
    """Every saved tensor reachable from out's grad_fn, each storage once."""
    roots = [t.grad_fn for t in tensors_in(out) if t.grad_fn is not None]
    seen, order, stack = set(), [], list(roots)
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        for nxt, _ in n.next_functions:
            stack.append(nxt)
    entries, storages = [], {}
    per_node = collections.defaultdict(lambda: [0, 0])
    for n in order:
        name = type(n).__name__
        per_node[name][0] += 1
        for attr in sorted(a for a in dir(n) if a.startswith("_saved_")):
            try:
                v = getattr(n, attr)
            except Exception:  # a saved value that is not a tensor accessor
                continue
            for t in tensors_in(v):
                if t.numel() == 0 or t.is_sparse:
                    continue
                ptr, nb = storage_of(t)
                kind = known.get(ptr, "")
                first = ptr not in storages
                if first:
                    storages[ptr] = (nb, kind)
                    if not kind:
                        per_node[name][1] += nb
                entries.append([name, attr[len("_saved_"):], list(t.shape),
                                str(t.dtype).replace("torch.", ""), nb, kind or "act", first])
    saved = sum(nb for nb, kind in storages.values() if not kind)
    return {"saved_bytes": saved, "saved_storages": sum(1 for _, k in storages.values() if not k),
            "nodes": len(order),
            "per_node": {k: {"count": v[0], "bytes": v[1]} for k, v in sorted(per_node.items())},
            "entries": entries}


class Trace(TorchDispatchMode):
    def __init__(self, cuda):
        super().__init__()
        self.cuda, self.rows = cuda, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = torch.cuda.memory_allocated() if self.cuda else 0
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        r = func(*args, **(kwargs or {}))
        outs = [t for t in tensors_in(r)]
        ob = sum(t.numel() * t.element_size() for t in outs)
        row = [str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else str(func), ob,
               [list(t.shape) for t in outs][:3]]
        if self.cuda:
            row += [before, torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated() - before]
        self.rows.append(row)
        return r


def one(name, batch, mode, dev, amp, trace):
    ctor, spec = MODELS[name]
    torch.manual_seed(0)
    m = ctor().to(dev).train(mode == "train")
    xs = [x.to(dev) for x in random_inputs(spec, batch, 1, VOCAB.get(name, 1000))]
    known = {}
    for p in m.parameters():
        known[storage_of(p)[0]] = "param"
    for b in m.buffers():
        known[storage_of(b)[0]] = "buffer"
    for x in xs:
        known[storage_of(x)[0]] = "input"
    cuda = dev.type == "cuda"
    ctx = (lambda: torch.autocast(dev.type, dtype=AMP[amp])) if amp else None
    res = {"batch": batch, "mode": mode}
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    if ctx:
        with ctx():
            out = m(*xs)
    else:
        out = m(*xs)
    if cuda:
        torch.cuda.synchronize()
        res["forward_allocated"] = torch.cuda.memory_allocated() - base
        res["forward_peak"] = torch.cuda.max_memory_allocated() - base
    o = first_tensor(out)
    res["output"] = [list(o.shape), str(o.dtype).replace("torch.", ""), o.numel() * o.element_size()]
    res.update(walk(out, known))
    del out, o
    if trace:
        for grad in (False, True):
            t = Trace(cuda)
            with torch.set_grad_enabled(grad):
                if ctx:
                    with ctx(), t:
                        out = m(*xs)
                else:
                    with t:
                        out = m(*xs)
            del out
            res["trace_grad" if grad else "trace_nograd"] = t.rows
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--amp", choices=sorted(AMP))
    ap.add_argument("--modes", default="eval,train")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "saved"))
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("saved_tensors.py: no CUDA device; nothing measured", file=sys.stderr)
        sys.exit(77)
    if a.device == "cpu":
        torch.set_num_threads(min(4, os.cpu_count() or 1))
    dev = torch.device(a.device)
    os.makedirs(a.out, exist_ok=True)
    tv = torch.__version__.split("+")[0]
    for name in a.models.split(","):
        doc = {"model": name, "torch": torch.__version__, "device": a.device, "amp": a.amp,
               "gpu": torch.cuda.get_device_name() if a.device == "cuda" else None,
               "source": "tests/zoo/models.py:MODELS[%r]" % name,
               "how": __doc__.split("Method. ")[1].split("\nWrites")[0], "runs": []}
        for b in (int(x) for x in a.batches.split(",")):
            for mode in a.modes.split(","):
                try:
                    doc["runs"].append(one(name, b, mode, dev, a.amp, a.trace))
                except Exception as e:  # record, go on with the next run
                    doc["runs"].append({"batch": b, "mode": mode, "error": repr(e)[:300]})
                if a.device == "cuda":
                    torch.cuda.empty_cache()
        fn = "saved_%s_%s%s_%s.json" % (tv, a.device, "_" + a.amp if a.amp else "", name)
        with open(os.path.join(a.out, fn), "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        print(fn, " ".join("b%d/%s:%s" % (r["batch"], r["mode"], r.get("saved_bytes", r.get("error")))
                           for r in doc["runs"]), flush=True)


if __name__ == "__main__":
    main()
