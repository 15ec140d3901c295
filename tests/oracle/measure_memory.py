#!/usr/bin/python3
"""PyTorch (CPU) oracle: real peak allocated bytes of one inference or training step.

Usage:
    /usr/bin/python3 tests/oracle/measure_memory.py [--models a,b] [--batches 1,8]
        [--modes m1,m2] [--out golden/truth/memory] [--validate-only] [--list]

--models new10: issue 10's models (NEW10 below), each measured with
--modes infer_nograd,infer_grad,train_sgd,train_adam.

Writes golden/truth/memory/<model>.json (merged per batch with an existing file
of the same torch version) and, for resnet18 batch 1, the event list
golden/truth/memory/resnet18_events_nograd_b1.txt. Run it with Debian's
python3-torch 1.13 (always /usr/bin/python3); weights are random, never
downloaded; torch.set_num_threads(2).

Method (the same text goes into the "how" field of every truth file)
------
One measured region (a forward, or one training step) runs inside
torch.profiler.profile(activities=[CPU], profile_memory=True,
record_shapes=False). Every allocation and free of the c10 CPU allocator
that the profiler saw is taken from the profiler's event tree
(prof.profiler.kineto_results.experimental_event_tree(), nodes whose tag is
_EventType.Allocation; each carries ptr, alloc_size (+ for an allocation,
- for a free), a nanosecond timestamp and the allocator's running counter
total_allocated). `prof._memory_profile()` does not exist in 1.13, and the
flat kineto events() only have microsecond timestamps and no pointer, so the
tree is used. Events are sorted by timestamp (stable; ties keep tree order),
their deltas are summed in that order and the maximum of the running sum is
the relative peak (peak_relative = max(0, running max)). Check of the order:
the allocator's own counter (total_allocated, updated under its mutex)
minus its value before the first event must equal the running sum of the
reported sizes after every single event ("counter_check.agrees"); it has
held for every region measured.

Frees of blocks that were not allocated inside the region: such a free is
reported only when the block had been allocated while some earlier profiler
session was running (c10 keeps a ptr->size table only then); blocks made
with the profiler off are freed silently. A free of a block not allocated in
the region is counted (with the size of the storage we know) only when its
pointer is the data_ptr of one of the baseline storages; any other such free
is left out of the running sum and listed in "untracked_frees". Only the
seed check meets one: the 8-byte wrapped scalar 5 that MulBackward saved in
the y = 5*x region is freed in the backward region; it was in no baseline,
so it is left out. Every model region starts with the previous step's
outputs already dead and gc.collect() + malloc_trim(0) run (outside the
region; trimming only keeps the process RSS down), and shows none.

baseline = bytes alive before the region that the region can see: parameters,
buffers, existing .grad tensors, existing optimizer state tensors (Adam's
step counters included), input and target tensors, summed as
storage.nbytes() (= numel*element_size for these contiguous tensors)
over storages deduplicated by data_ptr. Absolute peak = baseline +
peak_relative; end = baseline + running sum after the last event (bytes alive
when the region ends); "end_tensors" re-counts the live tensors we know at
the end (params, buffers, grads, optimizer state, inputs, kept output) as a
cross-check of "end".

Regions. infer_nograd: `with torch.no_grad(): out = model(*inputs)`;
infer_grad: `out = model(*inputs)`; out is kept alive to the end of the
region (so for infer_grad its autograd graph and saved tensors are alive at
"end"). Training (train_sgd: SGD(lr=0.01); train_sgd_momentum: SGD(lr=0.01,
momentum=0.9); train_adam: Adam(lr=1e-3)): two steps, each profiled on its
own with its own baseline: out = model(*inputs); loss; loss.backward();
opt.step(); opt.zero_grad(set_to_none=True); the step's out and loss are
locals that die when the step function returns, i.e. inside the region, so
"end" of a training step holds no activations and no grads. Extra training modes
for some models: train_sgd_freeze / train_adam_freeze (parameters of the
top-level modules in FREEZE get requires_grad_(False), the optimizer gets the
rest); train_sgd_amp_bf16 / train_adam_amp_bf16 (forward and loss inside
torch.autocast("cpu", dtype=torch.bfloat16), backward and step outside it). Phases inside a
step (forward incl. loss, backward, optimizer_step, zero_grad) are marked with profiler RecordFunction scopes (the _new variant: the
plain torch.profiler.record_function allocates a 288-byte handle tensor in
1.13) and give per-phase peaks; blocks live at the peak are grouped by the
op that allocated them and labelled [grad] / [optimizer_state] when their
pointer is a .grad after backward / a state tensor after opt.step. Models are fresh per mode (same seed),
train() for training and eval() for inference; torch.manual_seed(0) before
building, seed 1 before making inputs; float inputs torch.randn, token ids
uniform in [0, vocab), class targets uniform.

Bytes are what the CPU allocator was asked for (no CUDA-style 512 B
rounding or caching). ideep/oneDNN buffers (reordered weights, blocked-layout
outputs) are allocated through c10's CPU allocator and are counted; anything
a library mallocs on its own (OpenBLAS buffers) is not. Only allocations on
the profiling thread are seen (CPU autograd runs there; an allocation made
inside an OpenMP worker would be missed: the end-of-region cross-checks,
"end_tensors" and saved_for_backward, found nothing missing). See each file's
"notes" and "runtime_notes".
"""
import argparse
import collections
import ctypes
import datetime
import gc
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile
from torch._C._profiler import _EventType

torch.set_num_threads(2)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
try:
    import models as zoo  # noqa: E402  (tests/zoo/models.py)
    ZOO = zoo.MODELS
    VOCAB = getattr(zoo, "VOCAB", {})
except ImportError:  # the zoo file is written by someone else; fall back
    zoo = None
    ZOO = {}
    VOCAB = {}
from zoo_common import first_tensor, random_inputs  # noqa: E402  (tests/zoo/zoo_common.py)

OUT_DIR = os.path.join(ROOT, "golden", "truth", "memory")
try:
    _LIBC = ctypes.CDLL("libc.so.6")
except OSError:
    _LIBC = None


def release():
    """gc + malloc_trim: glibc otherwise keeps freed tensor memory and the
    process RSS grew to 24 GB (OOM) over a full run. Outside measured regions
    only; it does not change what the profiler counts."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
MIB = 1024.0 * 1024.0

HOW = " ".join(l.strip() for l in __doc__.split("Method (the same text goes into the \"how\" field of every truth file)\n------\n")[1].split("\n")).strip()

INFER_MODES = ("infer_nograd", "infer_grad")
TRAIN_MODES = ("train_sgd", "train_sgd_momentum", "train_adam")
MODES = INFER_MODES + TRAIN_MODES


# --------------------------------------------------------------------------
# Models defined here (the zoo file has the rest).

def seed_seq():
    """The seed 001 Sequential (input 3x682x700)."""
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2), nn.Conv2d(64, 128, 3, padding=1))


class ResBlock(nn.Module):
    def __init__(self, d=512):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc2(self.relu(self.fc1(x)))


def resmlp100():
    """100 residual blocks x + Linear(512,512)(ReLU(Linear(512,512)(x)))."""
    return nn.Sequential(*[ResBlock(512) for _ in range(100)])


F32 = torch.float32
LOCAL = {
    "seed_seq": (seed_seq, [("input", (3, 682, 700), F32)]),
    "resmlp100": (resmlp100, [("input", (512,), F32)]),
}
TV_FALLBACK = ["resnet18", "resnet50", "mobilenet_v2", "vgg16", "densenet121",
               "efficientnet_b0", "vit_b_16"]
DEFAULT_MODELS = ["seed_seq", "resmlp100"] + TV_FALLBACK + ["bert_like", "gpt_like"]
# issue 10's wider zoo (tests/zoo/models.py: NEW10): --models new10 runs them,
# cheapest first; the registry below finds them in the zoo file
NEW10 = ["shufflenet_v2_x1_0", "mobilenet_v3_large", "regnet_y_400mf", "diffusion_unet",
         "whisper_encoder", "gpt2_tanh", "t5_like", "googlenet", "llama_tied", "llama_like",
         "deeplabv3_mbv3", "r3d_18", "efficientnet_v2_s", "swin_t"]
# models with their own batch list (ignores --batches unless --force-batches)
MODEL_BATCHES = {"seed_seq": [1], "resmlp100": [64, 2048]}
EXTRA_MODES = {"resmlp100": ("train_sgd_inputgrad", "train_sgd_ckpt10", "train_adam_freeze",
                             "train_sgd_amp_bf16", "train_adam_amp_bf16"),
               "resnet18": ("train_sgd_freeze", "train_adam_freeze", "train_sgd_amp_bf16", "train_adam_amp_bf16")}
# train_*_freeze: parameters of these top-level modules get requires_grad
# False before the optimizer is made (a fine-tuning setup: a frozen stem and
# first stages; BatchNorm stays in train mode and keeps its batch statistics).
FREEZE = {"resnet18": ("conv1", "bn1", "layer1", "layer2"),
          "resmlp100": tuple(str(i) for i in range(50))}
# (model, batch) -> the only modes run there. resmlp100 at batch 64 is
# dominated by parameters + grads (activations ~25 MiB vs 400 MiB), so
# checkpointing cannot change its peak; batch 2048 makes activations dominate.
BATCH_MODES = {("resmlp100", 2048): ("train_sgd", "train_sgd_inputgrad", "train_sgd_ckpt10", "train_adam_freeze",
                                     "train_sgd_amp_bf16", "train_adam_amp_bf16"),
               # a training forward raises at batch 1: the ASPP pooling's
               # BatchNorm sees one value per channel
               ("deeplabv3_mbv3", 1): ("infer_nograd", "infer_grad")}


def registry(name):
    if name in LOCAL:
        return LOCAL[name]
    if name in ZOO:
        return ZOO[name]
    if name in TV_FALLBACK or hasattr(torchvision.models, name):
        fn = lambda: getattr(torchvision.models, name)(weights=None)  # noqa: E731
        return fn, [("input", (3, 224, 224), F32)]
    raise KeyError(name)


def model_source(name):
    if name in LOCAL:
        return "tests/oracle/measure_memory.py:" + LOCAL[name][0].__name__
    if name in ZOO:
        return "tests/zoo/models.py:MODELS[%r]" % name
    return "torchvision.models.%s(weights=None)" % name


# --------------------------------------------------------------------------
# Byte counting.

def storage_key(t):
    st = t.storage()
    return st.data_ptr(), st.nbytes()


def tensors_bytes(tensors):
    """Sum of storage bytes over distinct storages (by data_ptr)."""
    seen = {}
    for t in tensors:
        if t is None or not isinstance(t, torch.Tensor):
            continue
        if t.is_sparse or t.numel() == 0:
            continue
        ptr, nb = storage_key(t)
        seen[ptr] = max(seen.get(ptr, 0), nb)
    return sum(seen.values()), seen


def opt_state_tensors(opt):
    out = []
    if opt is None:
        return out
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, torch.Tensor):
                out.append(v)
    return out


def flat_tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in flat_tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in flat_tensors(o)]
    return []


# --------------------------------------------------------------------------
# Profiling.

class Phase:
    """RecordFunction scope that allocates nothing (record_function does)."""

    def __init__(self, name):
        self.name = "memest::" + name

    def __enter__(self):
        self.h = torch.ops.profiler._record_function_enter_new(self.name, None)

    def __exit__(self, *a):
        torch.ops.profiler._record_function_exit._RecordFunction(self.h)


FACTORY = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::zeros",
           "aten::zeros_like", "aten::ones_like", "aten::new_empty",
           "aten::new_empty_strided", "aten::new_zeros", "aten::resize_",
           "aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous",
           "aten::full", "aten::scalar_tensor", "aten::ones", "aten::full_like",
           "aten::lift_fresh", "aten::detach_", "aten::empty_memory_format"}


def collect(prof):
    """Allocation events and phase windows from the profiler's event tree."""
    roots = prof.profiler.kineto_results.experimental_event_tree()
    allocs, phases, opnames = [], {}, set()
    stack = list(reversed(roots))
    order = 0
    while stack:
        n = stack.pop()
        if n.tag == _EventType.Allocation:
            ef = n.extra_fields
            if ef.device.type != "cpu":
                continue
            chain = []
            p = n.parent
            while p is not None:
                if not p.name.startswith("memest::"):
                    chain.append(p.name)
                p = p.parent
            allocs.append({"t": n.start_time_ns, "ord": order, "ptr": ef.ptr,
                           "size": ef.alloc_size, "total": ef.total_allocated,
                           "chain": chain,
                           "op_end": n.parent.end_time_ns if n.parent is not None else None})
            order += 1
        else:
            if n.name.startswith("memest::"):
                phases[n.name[8:]] = (n.start_time_ns, n.end_time_ns)
            elif n.tag == _EventType.TorchOp:
                opnames.add(n.name)
            stack.extend(reversed(n.children))
    allocs.sort(key=lambda e: (e["t"], e["ord"]))
    return allocs, phases, opnames


def op_label(chain):
    """outermost op / innermost non-factory op of an allocation."""
    if not chain:
        return "<python>"
    outer = chain[-1]
    inner = next((c for c in chain if c not in FACTORY), chain[0])
    if inner == outer:
        return outer
    return "%s > %s" % (outer, inner)


def analyze(allocs, phases, baseline_map, labels=None):
    """Running sum, peak, live set at the peak, temporaries.

    labels: {"grad": ptrs, "optimizer_state": ptrs} collected inside the region
    (grads right after backward, state right after opt.step); a block is
    labelled when its pointer is in the set and it is still alive at that
    moment (phase end), which rules out an earlier block at the same address.
    """
    labels = labels or {}
    live = {}               # ptr -> (size, event index) for blocks alive now
    running, peak, peak_i = 0, 0, -1
    untracked = []
    deltas = []
    for i, e in enumerate(allocs):
        size = e["size"]
        if size > 0:
            live[e["ptr"]] = (size, i)
            d = size
        else:
            if e["ptr"] in live:
                d = -live.pop(e["ptr"])[0]
                if d != size:
                    untracked.append(("size_mismatch", e["ptr"], size, d))
            elif e["ptr"] in baseline_map:
                d = -baseline_map.pop(e["ptr"])
            else:
                untracked.append(("unknown_free", e["ptr"], size, op_label(e["chain"])))
                d = 0
        e["delta"] = d
        running += d
        e["running"] = running
        deltas.append(d)
        if running > peak:
            peak, peak_i = running, i
    end = running

    # allocator counter: total_allocated after each event, minus the counter
    # before the first event. It moves by the reported size of every event,
    # excluded frees included, so compare it with the raw running sum of the
    # reported sizes in our order: equality event by event means our order
    # is the allocator's order.
    counter_ok = None
    counter_peak = counter_end = None
    if allocs:
        c0 = allocs[0]["total"] - allocs[0]["size"]
        raw = 0
        counter_ok = True
        for e in allocs:
            raw += e["size"]
            if e["total"] - c0 != raw:
                counter_ok = False
        counter_peak = max(0, max(e["total"] for e in allocs) - c0)
        counter_end = allocs[-1]["total"] - c0

    # free time of every allocation (None: alive at the end of the region)
    open_ = {}
    for e in allocs:
        if e["size"] > 0:
            e["freed_t"] = None
            open_[e["ptr"]] = e
        else:
            a = open_.pop(e["ptr"], None)
            if a is not None:
                a["freed_t"] = e["t"]
    label_at = {"grad": "backward", "optimizer_state": "optimizer_step"}

    def kind_of(e):
        for lab, ptrs in labels.items():
            if e["ptr"] in ptrs:
                ph = phases.get(label_at.get(lab, ""))
                when = ph[1] if ph else None
                if when is None or (e["t"] <= when and (e["freed_t"] is None or e["freed_t"] > when)):
                    return lab
        return None

    # blocks live at the peak (replay up to peak_i)
    at_peak = {}
    if peak_i >= 0:
        lv = {}
        for e in allocs[:peak_i + 1]:
            if e["size"] > 0:
                lv[e["ptr"]] = e
            else:
                lv.pop(e["ptr"], None)
        for e in lv.values():
            at_peak[e["ord"]] = e
    by_op = collections.defaultdict(lambda: [0, 0])
    by_kind = collections.Counter()
    for e in at_peak.values():
        k = kind_of(e)
        lab = op_label(e["chain"]) + (" [%s]" % k if k else "")
        by_op[lab][0] += e["size"]
        by_op[lab][1] += 1
        by_kind[k or "other"] += e["size"]
    top_live = sorted(({"op": k, "bytes": v[0], "blocks": v[1]} for k, v in by_op.items()),
                      key=lambda r: -r["bytes"])[:8]
    largest_live = max(at_peak.values(), key=lambda e: e["size"], default=None)

    # op-internal temporaries: freed before the op that allocated them ended
    alloc_at = {}
    temps = collections.defaultdict(lambda: [0, 0, 0])  # op -> max, count, total
    for e in allocs:
        if e["size"] > 0:
            alloc_at[e["ptr"]] = e
        else:
            a = alloc_at.pop(e["ptr"], None)
            if a is not None and a["op_end"] is not None and e["t"] <= a["op_end"]:
                lab = op_label(a["chain"])
                r = temps[lab]
                r[0] = max(r[0], a["size"])
                r[1] += 1
                r[2] += a["size"]
    top_temps = sorted(({"op": k, "max_bytes": v[0], "count": v[1], "total_bytes": v[2]}
                        for k, v in temps.items()), key=lambda r: -r["max_bytes"])[:5]

    # per phase: peak of the running sum inside the window, running sum at end
    ph = {}
    for name, (t0, t1) in sorted(phases.items(), key=lambda kv: kv[1][0]):
        inside = [e for e in allocs if t0 <= e["t"] <= t1]
        before = [e for e in allocs if e["t"] < t0]
        start_val = before[-1]["running"] if before else 0
        pk = max([start_val] + [e["running"] for e in inside])
        endv = inside[-1]["running"] if inside else start_val
        ph[name] = {"peak_relative": pk, "end_relative": endv}
    peak_phase = None
    if peak_i >= 0:
        t = allocs[peak_i]["t"]
        for name, (t0, t1) in phases.items():
            if t0 <= t <= t1:
                peak_phase = name
    return {
        "peak_relative": peak, "end_relative": end, "peak_event_index": peak_i,
        "n_events": len(allocs), "n_allocs": sum(1 for e in allocs if e["size"] > 0),
        "counter_check": {"peak_relative": counter_peak, "end_relative": counter_end,
                          "agrees": counter_ok,
                          "what": "allocator counter total_allocated relative to region start; "
                                  "agrees = equals the running sum of reported sizes after every event"},
        "untracked_frees": [list(u) for u in untracked][:20],
        "peak_phase": peak_phase, "phases": ph,
        "top_live_at_peak": top_live,
        "live_at_peak_by_kind": dict(by_kind),
        "largest_block_at_peak": ({"bytes": largest_live["size"],
                                   "op": op_label(largest_live["chain"]),
                                   "kind": kind_of(largest_live)}
                                  if largest_live else None),
        "op_internal_temporaries": top_temps,
    }


def measure(fn, baseline_tensors, labels=None):
    """Profile fn(); return (result dict, allocs). labels: see analyze()."""
    release()
    base, bmap = tensors_bytes(baseline_tensors)
    gc.disable()
    t0 = time.time()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                     record_shapes=False) as prof:
            fn()
    finally:
        gc.enable()
    secs = time.time() - t0
    allocs, phases, opnames = collect(prof)
    r = analyze(allocs, phases, dict(bmap), labels)
    r["baseline"] = base
    r["peak"] = base + r["peak_relative"]
    r["end"] = base + r["end_relative"]
    r["seconds"] = round(secs, 2)
    r["foreach_ops"] = sorted(o for o in opnames if o.startswith("aten::_foreach"))
    r["_opnames"] = opnames
    del prof
    return r, allocs


# --------------------------------------------------------------------------
# Seed 004 check: y = 5*x scaled down to 3 MiB.

def validate_seed(verbose=True):
    unit = 3 * 64 * 64 * 64 * 4
    tol = 4096
    res = {}

    def near(v, k):
        return abs(v - k * unit) <= tol

    x = torch.zeros(3, 64, 64, 64, requires_grad=True)
    h = {}
    r1, _ = measure(lambda: h.__setitem__("y", 5 * x), [x])
    y = h["y"]
    r2, _ = measure(lambda: torch.mean(y).backward(), [x, y])
    res["unfused"] = {"after_x": r1["baseline"], "after_y": r1["end"],
                      "end": r2["end"], "peak": max(r1["peak"], r2["peak"]),
                      "counter_agrees": r1["counter_check"]["agrees"] and r2["counter_check"]["agrees"]}
    x = y = h = None
    x = torch.zeros(3, 64, 64, 64, requires_grad=True)
    r3, _ = measure(lambda: torch.mean(5 * x).backward(), [x])
    res["fused"] = {"after_x": r3["baseline"], "end": r3["end"], "peak": r3["peak"],
                    "counter_agrees": r3["counter_check"]["agrees"]}
    x = None
    u, f = res["unfused"], res["fused"]
    units = {k: round(v / unit, 4) for k, v in u.items() if k != "counter_agrees"}
    funits = {k: round(v / unit, 4) for k, v in f.items() if k != "counter_agrees"}
    res["units"] = {"unfused": units, "fused": funits, "unit_bytes": unit}
    if verbose:
        print("seed 004 check (unit = %d B): y=5x: after x %.4f, after y %.4f, end %.4f, "
              "peak %.4f; fused mean(5x): end %.4f, peak %.4f; counter agrees: %s/%s"
              % (unit, units["after_x"], units["after_y"], units["end"], units["peak"],
                 funits["end"], funits["peak"], u["counter_agrees"], f["counter_agrees"]),
              flush=True)
    assert near(u["after_x"], 1) and near(u["after_y"], 2), res
    assert near(u["end"], 3) and near(u["peak"], 4), res
    assert near(f["after_x"], 1) and near(f["end"], 2) and near(f["peak"], 3), res
    assert u["counter_agrees"] and f["counter_agrees"], res
    res["passed"] = True
    return res


# --------------------------------------------------------------------------
# Inputs, losses, steps.

def make_inputs(name, spec, batch):
    return random_inputs(spec, batch, 1, VOCAB.get(name, 1000))


SEGMENTATION = {"unet_like", "deeplabv3_mbv3"}


def loss_kind(name, out):
    out = first_tensor(out)
    if name in VOCAB and out.dim() == 3 and out.shape[-1] == VOCAB[name]:
        return "lm_ce"
    if out.dim() == 2:
        return "ce"
    # per-pixel class scores: the loss segmentation training uses
    # (torchvision's references/segmentation/train.py: F.cross_entropy)
    if out.dim() == 4 and name in SEGMENTATION:
        return "seg_ce"
    return "pow2_mean"


LOSS_TEXT = {
    "ce": "F.cross_entropy(out, target), target int64 [B] uniform in [0, classes)",
    "lm_ce": "F.cross_entropy(out.reshape(-1, V), labels.reshape(-1)), labels int64 [B, T] uniform in [0, V)",
    "seg_ce": "F.cross_entropy(out, target), target int64 [B, H, W] uniform in [0, classes)",
    "pow2_mean": "out.float().pow(2).mean()",
}


def make_target(kind, out, batch):
    g = torch.Generator().manual_seed(2)
    if kind == "ce":
        return torch.randint(0, out.shape[1], (batch,), generator=g)
    if kind == "lm_ce":
        return torch.randint(0, out.shape[-1], tuple(out.shape[:-1]), generator=g)
    if kind == "seg_ce":
        return torch.randint(0, out.shape[1], (out.shape[0],) + tuple(out.shape[2:]), generator=g)
    return None


def compute_loss(kind, out, target):
    out = first_tensor(out)
    if kind in ("ce", "seg_ce"):
        return F.cross_entropy(out, target)
    if kind == "lm_ce":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return out.float().pow(2).mean()


def output_meta(name, spec, batch):
    """Output shape/dtype via a no-grad forward on a fresh model (not profiled)."""
    ctor, _ = registry(name)
    torch.manual_seed(0)
    m = ctor().eval()
    xs = make_inputs(name, spec, batch)
    with torch.no_grad():
        o = first_tensor(m(*xs))
    kind = loss_kind(name, o)
    meta = {"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", ""),
            "loss_kind": kind}
    del m, xs, o
    gc.collect()
    return meta


def saved_for_backward(name, spec, batch, train):
    """Bytes of distinct storages autograd saves in one forward (+ loss for
    train), not counting parameters, buffers and inputs. Measured in a separate,
    unprofiled forward with torch.autograd.graph.saved_tensors_hooks (pack
    returns a detached alias, which keeps the storage alive while counting). A cross-check for estimators, not truth."""
    ctor, _ = registry(name)
    torch.manual_seed(0)
    m = ctor().train(train)
    xs = make_inputs(name, spec, batch)
    known = set(storage_key(t)[0] for t in list(m.parameters()) + list(m.buffers()) + xs)
    saved = {}
    by_dtype = collections.Counter()

    def pack(t):
        if isinstance(t, torch.Tensor) and t.numel() > 0 and not t.is_sparse:
            ptr, nb = storage_key(t)
            if ptr not in known and ptr not in saved:
                saved[ptr] = nb
                by_dtype[str(t.dtype).replace("torch.", "")] += nb
        # detach: returning t itself makes a grad_fn -> t -> grad_fn cycle for
        # saved outputs that no gc can break (1.2 GB leaked per bert_like b8 call)
        return t.detach() if isinstance(t, torch.Tensor) else t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(*xs)
        if train:
            kind = loss_kind(name, out)
            tgt = make_target(kind, _OUT_META[name, batch], batch)
            compute_loss(kind, out, tgt)
    r = {"bytes": sum(saved.values()), "storages": len(saved), "by_dtype": dict(by_dtype),
         "mode": "train() forward + loss" if train else "eval() forward"}
    del m, xs, out
    gc.collect()
    return r


def summarize_tensors(model, opt, xs, target, extra=()):
    params = list(model.parameters())
    buffers = list(model.buffers())
    grads = [p.grad for p in params if p.grad is not None]
    state = opt_state_tensors(opt)
    pb, _ = tensors_bytes(params)
    bb, _ = tensors_bytes(buffers)
    gb, _ = tensors_bytes(grads)
    sb, _ = tensors_bytes(state)
    ib, _ = tensors_bytes(list(xs) + ([target] if target is not None else []))
    allb, _ = tensors_bytes(params + buffers + grads + state + list(xs)
                            + ([target] if target is not None else []) + list(extra))
    return {"params_bytes": pb, "buffers_bytes": bb, "grads_bytes": gb,
            "optimizer_state_bytes": sb, "inputs_bytes": ib, "all_bytes": allb}


def baseline_list(model, opt, xs, target):
    ts = list(model.parameters()) + list(model.buffers())
    ts += [p.grad for p in model.parameters() if p.grad is not None]
    ts += opt_state_tensors(opt)
    ts += list(xs)
    if target is not None:
        ts.append(target)
    return ts


def clean(r):
    return {k: v for k, v in r.items() if not k.startswith("_")}


def run_infer(name, spec, batch, mode):
    ctor, _ = registry(name)
    torch.manual_seed(0)
    model = ctor().eval()
    xs = make_inputs(name, spec, batch)
    hold = {}

    def fn():
        with Phase("forward"):
            if mode == "infer_nograd":
                with torch.no_grad():
                    hold["out"] = model(*xs)
            else:
                hold["out"] = model(*xs)

    r, allocs = measure(fn, baseline_list(model, None, xs, None))
    outs = flat_tensors(hold["out"])
    s = summarize_tensors(model, None, xs, None, extra=outs)
    r["params_bytes"] = s["params_bytes"]
    r["buffers_bytes"] = s["buffers_bytes"]
    r["inputs_bytes"] = s["inputs_bytes"]
    r["output_bytes"] = tensors_bytes(outs)[0]
    r["grads_bytes_end"] = s["grads_bytes"]
    r["optimizer_state_bytes_end"] = 0
    r["end_tensors"] = s["all_bytes"]
    r["end_unexplained"] = r["end"] - s["all_bytes"]
    hold = model = xs = None
    return r, allocs


def make_opt(mode, params):
    if mode in ("train_sgd", "train_sgd_inputgrad", "train_sgd_ckpt10", "train_sgd_freeze", "train_sgd_amp_bf16"):
        return torch.optim.SGD(params, lr=0.01)
    if mode == "train_sgd_momentum":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if mode in ("train_adam", "train_adam_freeze", "train_adam_amp_bf16"):
        return torch.optim.Adam(params, lr=1e-3)
    raise ValueError(mode)


def run_train(name, spec, batch, mode, kind):
    ctor, _ = registry(name)
    torch.manual_seed(0)
    model = ctor().train()
    xs = make_inputs(name, spec, batch)
    if mode.endswith("_freeze"):
        for pn, pp in model.named_parameters():
            if pn.split(".")[0] in FREEZE[name]:
                pp.requires_grad_(False)
    opt = make_opt(mode, [pp for pp in model.parameters() if pp.requires_grad])
    target = make_target(kind, _OUT_META[name, batch], batch) if kind != "pow2_mean" else None
    ckpt = mode == "train_sgd_ckpt10"
    amp = mode.endswith("_amp_bf16")
    if mode in ("train_sgd_inputgrad", "train_sgd_ckpt10"):
        for x in xs:
            x.requires_grad_(True)
    steps = {}
    info = {}
    for step in (1, 2):
        grads_before_zero = {}

        def fn():
            with Phase("forward"), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                if ckpt:
                    out = torch.utils.checkpoint.checkpoint_sequential(model, 10, xs[0])
                else:
                    out = model(*xs)
                loss = compute_loss(kind, out, target)
            with Phase("backward"):
                loss.backward()
            gbytes, gmap = tensors_bytes(
                [p.grad for p in model.parameters() if p.grad is not None])
            grads_before_zero["bytes"] = gbytes
            labels["grad"] = set(gmap)
            with Phase("optimizer_step"):
                opt.step()
            labels["optimizer_state"] = set(tensors_bytes(opt_state_tensors(opt))[1])
            with Phase("zero_grad"):
                opt.zero_grad(set_to_none=True)
                for x in xs:
                    if x.requires_grad:
                        x.grad = None

        labels = {}
        r, allocs = measure(fn, baseline_list(model, opt, xs, target), labels)
        s = summarize_tensors(model, opt, xs, target)
        r["params_bytes"] = s["params_bytes"]
        r["buffers_bytes"] = s["buffers_bytes"]
        r["inputs_bytes"] = s["inputs_bytes"]
        r["grads_bytes_before_zero_grad"] = grads_before_zero.get("bytes")
        r["grads_bytes_end"] = s["grads_bytes"]
        r["optimizer_state_bytes_end"] = s["optimizer_state_bytes"]
        r["end_tensors"] = s["all_bytes"]
        r["end_unexplained"] = r["end"] - s["all_bytes"]
        steps["step%d" % step] = r
    info["foreach_used"] = bool(steps["step1"]["foreach_ops"] or steps["step2"]["foreach_ops"])
    info["optimizer"] = repr(opt).replace("\n", " ")
    model = opt = xs = target = None
    return steps, info


_OUT_META = {}


class _Shape:
    def __init__(self, shape):
        self.shape = tuple(shape)


# --------------------------------------------------------------------------
# Notes.

def rss_mib():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB
    except (OSError, ValueError):
        return float("nan")


def fmt_b(b):
    return "%d B (%.2f MiB)" % (b, b / MIB)


def notes_for(tag, r, mode, batch, psizes):
    """(tag, text) pairs; texts are grouped over tags by group_notes."""
    notes = []
    if r["counter_check"]["agrees"] is False:
        notes.append((tag, "running sum and allocator counter disagree (%s)" % r["counter_check"]))
    if r["untracked_frees"]:
        notes.append((tag, "%d frees not matched to a region allocation or baseline storage "
                      "(left out of the running sum): %s"
                      % (len(r["untracked_frees"]), r["untracked_frees"][:3])))
    if mode == "infer_grad":
        notes.append((tag, "end holds %s more than params+buffers+inputs+output: the autograd "
                      "graph's saved tensors, alive while out is" % fmt_b(r["end_unexplained"])))
    elif abs(r.get("end_unexplained", 0)) > 1024:
        notes.append((tag, "end %s differs from the live tensors we can name (%s) by %s"
                      % (fmt_b(r["end"]), fmt_b(r["end_tensors"]), fmt_b(r["end_unexplained"]))))
    lb = r["largest_block_at_peak"]
    if lb and r["peak_relative"] > 0 and lb["bytes"] > 0.25 * r["peak_relative"]:
        same = psizes.get(lb["bytes"])
        what = ""
        if lb.get("kind") == "grad":
            what = "; it is the gradient of parameter %s" % same if same else "; a gradient"
        elif lb.get("kind"):
            what = "; it is %s" % lb["kind"]
        elif same and "mkldnn" in lb["op"]:
            what = "; same size as parameter %s: a reordered weight copy" % same
        notes.append((tag, "relative peak %s: largest live block %s from %s (%.0f%%)%s"
                      % (fmt_b(r["peak_relative"]), fmt_b(lb["bytes"]), lb["op"],
                         100.0 * lb["bytes"] / r["peak_relative"], what)))
    for t in r["op_internal_temporaries"][:2]:
        if t["max_bytes"] >= 1 << 20:
            notes.append((tag, "op-internal temporaries (freed before the op returns) up to %s in %s "
                          "(%d blocks, %s in all)" % (fmt_b(t["max_bytes"]), t["op"], t["count"],
                                                    fmt_b(t["total_bytes"]))))
    return notes


def group_notes(pairs):
    order, tags = [], {}
    for tag, text in pairs:
        if text not in tags:
            order.append(text)
            tags[text] = []
        tags[text].append(tag)
    return ["%s: %s" % (", ".join(tags[t]), t) for t in order]


def maxpool_index_note(allocs, tag):
    idx = [e for e in allocs if e["size"] > 0 and any("max_pool2d_with_indices" in c for c in e["chain"][:3])]
    if not idx:
        return None
    return (tag, "max_pool2d_with_indices allocated %d blocks, %s (values plus int64 indices)"
            % (len(idx), fmt_b(sum(e["size"] for e in idx))))


# --------------------------------------------------------------------------

def dump_events(path, allocs, title):
    with open(path, "w") as f:
        f.write("# %s\n" % title)
        f.write("# sorted by profiler timestamp; delta in bytes (+alloc/-free); running = "
                "running sum (relative to baseline); op = outermost op > innermost non-factory op\n")
        f.write("# idx\tt_us\tdelta\trunning\tptr\top\n")
        t0 = allocs[0]["t"] if allocs else 0
        for i, e in enumerate(allocs):
            f.write("%d\t%.3f\t%d\t%d\t0x%x\t%s\n" % (i, (e["t"] - t0) / 1000.0, e["delta"],
                                                    e["running"], e["ptr"], op_label(e["chain"])))


def cpu_isa():
    """The vector ISA oneDNN runs its kernels on here, as memest's --cpu-isa
    names it: avx512 (avx512_core: avx512f, bw, vl and dq) or avx2; the
    blocked layouts' channel block follows it (16 or 8)."""
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512"
    return "avx2" if "avx2" in flags else "other"


def run_model(name, batches, out_dir, summary, modes_filter=None):
    ctor, spec = registry(name)
    torch.manual_seed(0)
    m = ctor()
    nparams = sum(p.numel() for p in m.parameters())
    pbytes = tensors_bytes(list(m.parameters()))[0]
    bbytes = tensors_bytes(list(m.buffers()))[0]
    del m
    path = os.path.join(out_dir, name + ".json")
    doc = None
    if os.path.exists(path):
        try:
            with open(path) as f:
                doc = json.load(f)
            if doc.get("torch") != torch.__version__:
                doc = None
        except ValueError:
            doc = None
    if doc is None:
        doc = {"batches": {}, "notes": []}
    doc.update({
        "how": HOW, "torch": torch.__version__, "torchvision": torchvision.__version__,
        "threads": torch.get_num_threads(), "device": "cpu", "cpu_isa": cpu_isa(),
        "model": name, "source": model_source(name),
        "inputs": [{"name": n, "shape": list(s), "dtype": str(d).replace("torch.", "")}
                   for n, s, d in spec],
        "params": nparams, "params_bytes": pbytes, "buffers_bytes": bbytes,
    })
    modes = list(MODES) + list(EXTRA_MODES.get(name, ()))
    if modes_filter:
        modes = [m for m in modes if m in modes_filter]
    for b in batches:
        bmodes = [m for m in modes if m in BATCH_MODES.get((name, b), modes)]
        meta = output_meta(name, spec, b)
        _OUT_META[name, b] = _Shape(meta["shape"])
        doc["output"] = {"shape_per_sample": meta["shape"][1:], "dtype": meta["dtype"]}
        doc["loss"] = LOSS_TEXT[meta["loss_kind"]]
        entry = {"measured": datetime.datetime.now().isoformat(timespec="seconds")}
        if bmodes != modes:
            entry["modes_note"] = "only %s at this batch (BATCH_MODES)" % ", ".join(bmodes)
        entry["saved_for_backward"] = {
            "what": "distinct storages saved by autograd in one forward (not params, buffers, "
                    "inputs), from an unprofiled forward with saved_tensors_hooks",
            "eval": saved_for_backward(name, spec, b, False)}
        if any(m_.startswith("train") for m_ in bmodes):  # a train() forward may not exist (BATCH_MODES)
            entry["saved_for_backward"]["train"] = saved_for_backward(name, spec, b, True)
        bnotes = []
        psizes = {}
        torch.manual_seed(0)
        for pn, pp in ctor().named_parameters():
            psizes.setdefault(pp.numel() * pp.element_size(), pn)
        for mode in bmodes:
            tag = "b%d/%s" % (b, mode)
            t0 = time.time()
            if mode in INFER_MODES:
                r, allocs = run_infer(name, spec, b, mode)
                if name == "resnet18" and b == 1 and mode == "infer_nograd":
                    dump_events(os.path.join(out_dir, "resnet18_events_nograd_b1.txt"), allocs,
                                "resnet18 batch 1 infer_nograd (torch %s, CPU); baseline %d B, "
                                "peak_relative %d B, peak %d B"
                                % (torch.__version__, r["baseline"], r["peak_relative"], r["peak"]))
                n = maxpool_index_note(allocs, tag)
                if n:
                    bnotes.append(n)
                bnotes += notes_for(tag, r, mode, b, psizes)
                r.pop("foreach_ops", None)
                entry[mode] = clean(r)
                summary.append((name, b, mode, "", r["peak"], r["baseline"], r["seconds"]))
            else:
                steps, info = run_train(name, spec, b, mode, meta["loss_kind"])
                for sk in ("step1", "step2"):
                    bnotes += notes_for(tag + "/" + sk, steps[sk], mode, b, psizes)
                    summary.append((name, b, mode, sk, steps[sk]["peak"], steps[sk]["baseline"],
                                    steps[sk]["seconds"]))
                e = {"step1": clean(steps["step1"]), "step2": clean(steps["step2"]),
                     "peak": max(steps["step1"]["peak"], steps["step2"]["peak"])}
                e.update(info)
                if mode == "train_sgd_ckpt10":
                    e["checkpoint"] = ("torch.utils.checkpoint.checkpoint_sequential(model, 10, x) "
                                       "(use_reentrant=True, the 1.13 default); input requires_grad "
                                       "so the first segment's parameters get grads")
                if mode.endswith("_freeze"):
                    e["frozen"] = ("requires_grad_(False) on the parameters of top-level modules %s; "
                                   "the optimizer gets the others" % ", ".join(FREEZE[name]))
                if mode == "train_sgd_inputgrad":
                    e["checkpoint"] = "none; input requires_grad (comparison for train_sgd_ckpt10)"
                entry[mode] = e
            rss_hi = rss_mib()
            release()
            print("  %-16s b%-3d %-22s %8.1fs  rss %6.0f -> %6.0f MiB" % (
                name, b, mode, time.time() - t0, rss_hi, rss_mib()), flush=True)
        entry["notes"] = group_notes(bnotes)
        doc["batches"][str(b)] = entry
    doc["notes"] = [n for bk in sorted(doc["batches"], key=int)
                    for n in doc["batches"][bk].get("notes", [])]
    doc["runtime_notes"] = RUNTIME_NOTES
    os.makedirs(out_dir, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    return doc


RUNTIME_NOTES = [
    "CPU allocator: sizes are the bytes requested (64-byte aligned malloc underneath); no "
    "512-byte rounding, no block splitting, no caching: a CUDA run's memory_allocated rounds "
    "every block up to 512 B and a caching allocator's reserved memory is larger still.",
    "ideep/oneDNN allocates through c10's CPU allocator, so its reordered weights and "
    "blocked-layout buffers are in these numbers; cuDNN/cuBLAS workspaces of a CUDA run are "
    "different in size (see the caching-allocator facts in REFERENCE.md).",
    "max_pool2d (torch 1.13, CPU) goes through max_pool2d_with_indices and allocates int64 "
    "indices (2x the output bytes) even under no_grad; they are freed when max_pool2d returns "
    "unless autograd saves them. Not checked here whether a CUDA build of the same version "
    "does the same.",
    "oneDNN convolution (aten::mkldnn_convolution, used for fp32 conv on CPU) allocates "
    "op-internal temporaries: a reordered copy of the weight and an extra output-sized "
    "buffer, both freed before the op returns; ConvolutionBackward does the same. At small "
    "batch the largest weight copy can set the inference peak. A CUDA (cuDNN) run has "
    "workspaces instead, of a different size.",
    "CPU backward and autograd create small scalar tensors (4-8 B) for wrapped numbers; "
    "these are counted.",
    "Autograd runs CPU backward on the calling thread, so all of backward is inside the "
    "profiled region.",
]


def toy_main(models, onnx_out, truth_out, export, modes):
    """The command line of a script of toy models (measure_strided_grad.py,
    measure_split.py): `export|measure [names]`, every model by default.
    measure runs run_model on each name, batches 1 and 8, the given modes,
    into truth_out; export is the script's own."""
    def measure_names(names):
        LOCAL.update(models)
        summary = []
        for name in names:
            run_model(name, [1, 8], truth_out, summary, modes_filter=modes)
            print(name, "measured", flush=True)

    torch.set_num_threads(2)
    os.makedirs(onnx_out, exist_ok=True)
    os.makedirs(truth_out, exist_ok=True)
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(models)
    {"export": export, "measure": measure_names}[sys.argv[1]](names)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--modes", default="", help="comma list; default all")
    ap.add_argument("--out", default=OUT_DIR)
    ap.add_argument("--validate-only", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("default:", ",".join(DEFAULT_MODELS))
        print("new10:", ",".join(NEW10))
        print("available:", ",".join(sorted(set(LOCAL) | set(ZOO) | set(TV_FALLBACK))))
        return
    print("torch %s, torchvision %s, threads %d, zoo %s" % (
        torch.__version__, torchvision.__version__, torch.get_num_threads(),
        "tests/zoo/models.py" if zoo else "missing (torchvision fallback)"), flush=True)
    val = validate_seed()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "seed004_check.json"), "w") as f:
        json.dump({"how": HOW, "torch": torch.__version__,
                   "what": "seed 004 scaled down: x = zeros(3,64,64,64, requires_grad) "
                           "(3 MiB); y = 5*x; mean(y).backward(); and mean(5*x).backward()",
                   "result": val}, f, indent=1)
        f.write("\n")
    if a.validate_only:
        return
    batches = [int(b) for b in a.batches.split(",") if b]
    modes_filter = [m for m in a.modes.split(",") if m] or None
    summary = []
    t0 = time.time()
    names = [m for m in a.models.split(",") if m]
    names = [n for m in names for n in (NEW10 if m == "new10" else [m])]
    for name in names:
        bs = MODEL_BATCHES.get(name, batches)
        print("%s (batches %s)" % (name, bs), flush=True)
        run_model(name, bs, a.out, summary, modes_filter)
    print("\n%-16s %5s %-22s %-6s %12s %12s %8s" % ("model", "batch", "mode", "step",
                                                     "peak MiB", "base MiB", "sec"))
    for name, b, mode, step, peak, base, secs in summary:
        print("%-16s %5d %-22s %-6s %12.2f %12.2f %8.1f" % (name, b, mode, step, peak / MIB,
                                                            base / MIB, secs))
    print("total %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
