#!/usr/bin/python3
"""PyTorch (CPU) oracle for how torch.einsum runs: what one call allocates,
what autograd keeps, and the output's strides.

Usage: /usr/bin/python3 tests/oracle/measure_einsum.py > golden/truth/einsum/plans.json

For each case below (an equation and its operands, each a fresh float32
tensor of a physical shape, permuted: a strided view when the permutation is
not the identity, requires_grad on its base) one forward call
torch.einsum(equation, *operands) runs inside torch.profiler.profile(
profile_memory=True); the CPU allocator's allocations and frees are read from
the profiler's event tree (the method of tests/oracle/measure_memory.py:
collect) in time order, as byte sizes, + for an allocation and - for a free
of a block the call allocated (the previous case's tensors are deleted and
collected before the region).
"saved" lists what autograd keeps for the call's backward: every tensor
saved by a node of the call's autograd graph (walking grad_fn through
next_functions down to the operands), as the operand index whose storage it
shares, or as the byte size of a storage the call made. "out_strides" is
out.stride(). Run with Debian's python3-torch 1.13; weights are random.
Read by tests/unit/test_einsum_plan.c.
"""
import gc
import json
import os
import sys

import torch
from torch.profiler import profile, ProfilerActivity

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_memory import collect  # noqa: E402

torch.set_num_threads(1)
torch.manual_seed(0)

# (equation, [(physical shape, permutation or None), ...])
B, N, D, H, E = 2, 12, 16, 4, 8
CASES = [
    ("ij,jk->ik", [((6, 5), None), ((5, 7), None)]),
    ("ij,jk", [((5, 6), (1, 0)), ((5, 7), None)]),
    ("bij,bjk->bik", [((3, 6, 5), None), ((3, 5, 7), None)]),
    ("bij,bkj->bik", [((3, 6, 5), None), ((3, 7, 5), None)]),
    ("bij,bjk->bik", [((1, 6, 5), None), ((3, 5, 7), None)]),
    ("i,i->", [((9,), None), ((9,), None)]),
    ("ij->ji", [((6, 5), None)]),
    ("ij->j", [((6, 5), None)]),
    ("bij->", [((3, 6, 5), None)]),
    ("bi,bj->bij", [((3, 6), None), ((3, 5), None)]),
    ("ij,ij->ij", [((6, 5), None), ((6, 5), None)]),
    ("ij,jk->i", [((6, 5), None), ((5, 7), None)]),
    ("abc,cd,de->abe", [((3, 4, 5), None), ((5, 6), None), ((6, 7), None)]),
    ("ijk,ikl->ijl", [((4, 3, 5), (1, 0, 2)), ((3, 5, 6), None)]),
    ("b i d, b j d -> b i j", [((B, N, D), None), ((B, N, D), None)]),
    ("bnd,hde->bhne", [((B, N, D), None), ((H, D, E), None)]),
    ("bhie,bhje->bhij", [((B, N, H, E), (0, 2, 1, 3)), ((B, N, H, E), (0, 2, 1, 3))]),
    ("bhid,bhjd->bhij", [((B, H, N, E), None), ((B, H, N, E), None)]),
    ("bhij,bhjd->bhid", [((B, H, N, N), None), ((B, N, H, E), (0, 2, 1, 3))]),
    ("bhne,hed->bnd", [((B, H, N, E), None), ((H, E, D), None)]),
    ("...nd,de->...ne", [((B, N, D), None), ((D, E), None)]),
    ("...nd,de->...ne", [((N, D), None), ((D, E), None)]),
    ("bnhd,bnhe->bhde", [((B, N, H, E), None), ((B, N, H, E), None)]),
    ("bnhd,bhd->bnh", [((B, N, H, E), None), ((B, H, E), None)]),
    ("bnhd,bhde,bnh->bnhe", [((B, N, H, E), None), ((B, H, E, E), None), ((B, N, H), None)]),
    ("bnd,n", [((B, N, D), None), ((N,), None)]),
    ("nbd,bnd->bn", [((B, N, D), (1, 0, 2)), ((B, N, D), None)]),
]


def operand(shape, perm):
    base = torch.randn(*shape, requires_grad=True)
    return base, (base.permute(*perm) if perm else base)


def storage_ptr(t):
    return t.storage().data_ptr()


def saved_of(out, bases):
    ptrs = {storage_ptr(b): i for i, b in enumerate(bases)}
    seen, found, stack = set(), [], [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen or type(fn).__name__ == "AccumulateGrad":
            continue
        seen.add(fn)
        for a in dir(fn):
            if not a.startswith("_saved_"):
                continue
            v = getattr(fn, a)
            if isinstance(v, torch.Tensor) and v.numel() > 1:
                p = storage_ptr(v)
                key = ("operand", ptrs[p]) if p in ptrs else ("made", v.storage().nbytes(), p)
                if key not in found:
                    found.append(key)
        stack.extend(f for f, _ in fn.next_functions)
    return [{"operand": k[1]} if k[0] == "operand" else {"bytes": k[1]} for k in found]


def main():
    cases = []
    for eq, specs in CASES:
        made = [operand(s, p) for s, p in specs]
        bases, ops = [m[0] for m in made], [m[1] for m in made]
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
            out = torch.einsum(eq, *ops)
        allocs, _, _ = collect(prof)
        mine = {a["ptr"] for a in allocs if a["size"] > 0}
        cases.append({
            "equation": eq,
            "operands": [{"shape": list(o.shape), "strides": list(o.stride())} for o in ops],
            "out_shape": list(out.shape),
            "out_strides": list(out.stride()),
            "events": [a["size"] for a in allocs if a["ptr"] in mine],
            "saved": saved_of(out, bases),
        })
        del out, ops, bases, made, prof
        gc.collect()
    json.dump({"how": __doc__.strip(), "torch": torch.__version__, "cases": cases}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
