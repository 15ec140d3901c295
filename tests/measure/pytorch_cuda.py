#!/usr/bin/python3
"""PyTorch on a CUDA GPU: the truth memest's CUDA figures are checked against.

Usage (on a machine with an NVIDIA GPU and a CUDA build of PyTorch):
    /usr/bin/python3 tests/measure/pytorch_cuda.py [--models resnet18,resnet50,mobilenet_v2,bert_like]
        [--batches 1,32] [--modes infer_nograd,infer_grad,train_sgd,train_adam] [--amp fp16|bf16]
        [--input 3x512x512] [--jobs N] [--device 0] [--out golden/truth/cuda]

Writes golden/truth/cuda/<gpu>_<model>[_amp_<dtype>][_<input>].json,
labelled with the GPU, driver, CUDA, cuDNN and torch versions, the date and
the options. Without a CUDA GPU
(torch.cuda.is_available() is False, or no torch at all) it says so and
exits 77: nothing measured, nothing written.

Method (also in the "how" field of every file). Every (model, batch, mode)
runs in a fresh child process of this script, so the CUDA context and the
caching allocator start empty. The child makes the context
(torch.zeros(1, device="cuda")), reads what the context costs (nvidia-smi's
used memory of this process, and total - free from torch.cuda.mem_get_info),
builds the model from tests/zoo/models.py MODELS with torch.manual_seed(0)
(random weights, never downloaded), moves it and random inputs to the GPU,
then measures steps:

  infer_nograd  model.eval(); with torch.no_grad(): out = model(*inputs)
  infer_grad    model.eval(); out = model(*inputs) without no_grad, the
                previous step's out (and its autograd graph) still held
                while the next call runs: the seed's inference loop
  train_sgd     model.train(); out = model(*inputs); loss; loss.backward();
                SGD(lr=0.01).step(); zero_grad(set_to_none=True)
  train_adam    the same with Adam(lr=1e-3)

--amp DTYPE runs the forward and the loss under torch.autocast("cuda",
dtype) (no GradScaler: it adds a scalar and unscales in place). --input
replaces the first input's per-sample shape (the seed's 3x512x512).
--jobs N runs N children at once: each has its own context and allocator,
so the memory figures are its own; step_time_s is then shared-GPU time.

Losses: cross_entropy against random labels for [B, classes] outputs;
token models' [B, T, V] logits flattened; anything else out.float().pow(2).mean()
(memest's --loss mse). For each step: torch.cuda.reset_peak_memory_stats()
first, then max_memory_allocated() and max_memory_reserved() after a
synchronize, nvidia-smi's used memory of the process and of the GPU, and
total - free. "step1" is the first step (cuBLAS and cuDNN set up inside it,
optimizer state created), "steady" the third. step_time_s: mean of five more
steps between CUDA events. cudnn.benchmark stays False (PyTorch's default),
TF32 as PyTorch's defaults have it (reported), and the optimizer's
implementation as this torch picks it (its foreach and fused defaults,
reported with each run).
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "bert_like"]
MODES = ["infer_nograd", "infer_grad", "train_sgd", "train_adam"]
AMP = {"fp16": "float16", "bf16": "bfloat16"}
SKIP = 77


def skip(msg):
    print("pytorch_cuda.py: " + msg + "; nothing measured, nothing written", file=sys.stderr)
    sys.exit(SKIP)


def nvidia_smi(args):
    try:
        p = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def smi_gpu(device, field):
    out = nvidia_smi(["--query-gpu=" + field, "--format=csv,noheader,nounits", "-i", str(device)])
    return out.splitlines()[0].strip() if out else None


def smi_used_bytes(device):
    v = smi_gpu(device, "memory.used")
    return int(float(v)) << 20 if v and re.match(r"^[0-9.]+$", v) else None


def smi_process_bytes(pid):
    out = nvidia_smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
    if out is None:
        return None
    total = None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid) and re.match(r"^[0-9.]+$", parts[1]):
            total = (total or 0) + (int(float(parts[1])) << 20)
    return total


# --------------------------------------------------------------------------
# one measurement, in a child process


def parse_shape(text):
    dims = text.split("x")
    if not dims or not all(d.isdigit() and int(d) > 0 for d in dims):
        raise ValueError("--input %r: expected positive dims joined by x, e.g. 3x512x512" % text)
    return tuple(int(d) for d in dims)


def child(name, batch, mode, device, amp=None, shape=None):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
    from models import MODELS, VOCAB
    from zoo_common import first_tensor, random_inputs

    torch.cuda.set_device(device)
    dev = torch.device("cuda", device)
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info(device)
    context = {"nvidia_smi_process_bytes": smi_process_bytes(os.getpid()), "device_used_bytes": total - free,
               "nvidia_smi_gpu_used_bytes": smi_used_bytes(device)}

    ctor, spec = MODELS[name]
    torch.manual_seed(0)
    model = ctor().to(dev)
    if shape is not None:
        spec = [(spec[0][0], shape, spec[0][2])] + list(spec[1:])
    xs = [x.to(dev) for x in random_inputs(spec, batch, 1, VOCAB.get(name, 1000))]
    autocast = (lambda: torch.autocast("cuda", dtype=getattr(torch, AMP[amp]))) if amp else None

    def loss_of(out):
        out = first_tensor(out)
        gl = torch.Generator().manual_seed(2)
        if out.dim() == 2:
            t = torch.randint(0, out.shape[1], (out.shape[0],), generator=gl).to(dev)
            return F.cross_entropy(out, t), "cross_entropy"
        if name in VOCAB and out.dim() == 3 and out.shape[-1] == VOCAB[name]:
            t = torch.randint(0, out.shape[-1], tuple(out.shape[:-1]), generator=gl).to(dev)
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1)), "cross_entropy (tokens)"
        return out.float().pow(2).mean(), "out.float().pow(2).mean()"

    train = mode.startswith("train")
    opt = None
    if mode == "train_sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    elif mode == "train_adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train(train)
    loss_text = None
    held = {}

    def forward():
        if autocast is None:
            return model(*xs)
        with autocast():
            return model(*xs)

    def one_step():
        nonlocal loss_text
        if mode == "infer_nograd":
            with torch.no_grad():
                out = forward()
            return out
        if mode == "infer_grad":
            # rebound only when the call returns: the last step's graph lives through it
            held["out"] = forward()
            return held["out"]
        out = forward()
        if autocast is None:
            loss, loss_text = loss_of(out)
        else:
            with autocast():
                loss, loss_text = loss_of(out)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return None

    torch.cuda.synchronize()
    baseline = torch.cuda.memory_allocated(device)
    steps = {}
    for k in range(3):
        torch.cuda.reset_peak_memory_stats(device)
        out = one_step()  # kept until the figures are read, as memest keeps the output
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info(device)
        rec = {"max_memory_allocated": torch.cuda.max_memory_allocated(device),
               "max_memory_reserved": torch.cuda.max_memory_reserved(device),
               "memory_allocated_after": torch.cuda.memory_allocated(device),
               "nvidia_smi_process_bytes": smi_process_bytes(os.getpid()),
               "nvidia_smi_gpu_used_bytes": smi_used_bytes(device),
               "device_used_bytes": total - free,
               "output_kept": out is not None}
        del out
        if k == 0:
            steps["step1"] = rec
        elif k == 2:
            steps["steady"] = rec
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(5):
        one_step()
    b.record()
    torch.cuda.synchronize()
    impl = None
    if opt is not None:
        impl = {k: opt.defaults.get(k) for k in ("foreach", "fused")}
        try:  # what foreach=None resolves to on these tensors (torch >= 2.0)
            from torch.optim.optimizer import _default_to_fused_or_foreach
            fused, foreach = _default_to_fused_or_foreach(list(model.parameters()), False, False)
            impl["resolved"] = {"fused": bool(fused), "foreach": bool(foreach)}
        except (ImportError, TypeError):
            pass
    return {"baseline_allocated": baseline, "context": context, **steps, "step_time_s": a.elapsed_time(b) / 5e3,
            "loss": loss_text, "params": sum(p.numel() for p in model.parameters()), "optimizer_defaults": impl}


# --------------------------------------------------------------------------
# the parent: one child per measurement, files per model


def slug(s):
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--amp", choices=sorted(AMP), help="torch.autocast(\"cuda\", dtype) around forward and loss")
    ap.add_argument("--input", help="the first input's per-sample shape, e.g. 3x512x512")
    ap.add_argument("--jobs", type=int, default=1, help="children at once (default 1)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "cuda"))
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "BATCH", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        shape = parse_shape(args.input) if args.input else None
    except ValueError as e:
        print("pytorch_cuda.py: %s" % e, file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("pytorch_cuda.py: --jobs %d: at least 1" % args.jobs, file=sys.stderr)
        return 2

    try:
        import torch
    except ImportError as e:
        skip("cannot import torch (%s)" % e)
    if not torch.cuda.is_available():
        skip("torch.cuda.is_available() is False (torch %s, built for CUDA %s): no CUDA GPU to measure on"
             % (torch.__version__, torch.version.cuda))

    if args.one:
        name, batch, mode = args.one[0], int(args.one[1]), args.one[2]
        json.dump(child(name, batch, mode, args.device, args.amp, shape), sys.stdout)
        return 0

    sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
    from models import MODELS
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            print("pytorch_cuda.py: unknown model %r (tests/zoo/models.py has %s)" % (m, ", ".join(sorted(MODELS))), file=sys.stderr)
            return 2
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            print("pytorch_cuda.py: unknown mode %r (%s)" % (m, ", ".join(MODES)), file=sys.stderr)
            return 2
    batches = [int(b) for b in args.batches.split(",") if b]

    props = torch.cuda.get_device_properties(args.device)
    label = {
        "gpu": props.name,
        "gpu_memory_bytes": props.total_memory,
        "compute_capability": "%d.%d" % (props.major, props.minor),
        "sms": props.multi_processor_count,
        "driver": smi_gpu(args.device, "driver_version"),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "settings": {"cudnn.benchmark": torch.backends.cudnn.benchmark,
                     "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                     "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32},
        "amp": args.amp,
        "input": list(shape) if shape else None,
        "jobs": args.jobs,
    }
    extra = ["--device", str(args.device)] + (["--amp", args.amp] if args.amp else []) + \
        (["--input", args.input] if args.input else [])

    def measure(run):
        name, batch, mode = run
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, str(batch), mode] + extra,
                           capture_output=True, text=True)
        if p.returncode == 0:
            return json.loads(p.stdout), None
        oom = "out of memory" in p.stderr
        return {"error": "out of memory" if oom else p.stderr.strip().splitlines()[-1:] or ["failed"]}, oom

    # a fresh child per run; with --jobs several at once, each its own process
    runs = [(name, batch, mode) for name in models for batch in batches for mode in modes]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = dict(zip(runs, pool.map(measure, runs)))
    os.makedirs(args.out, exist_ok=True)
    suffix = ("_amp_" + args.amp if args.amp else "") + ("_" + args.input if args.input else "")
    failed = 0
    for name in models:
        doc = dict(label)
        doc.update({"model": name, "source": "tests/zoo/models.py:MODELS[%r]" % name,
                    "how": __doc__.split("\n\n", 3)[3].strip(), "batches": {}})
        for batch in batches:
            doc["batches"][str(batch)] = {}
            for mode in modes:
                r, oom = results[(name, batch, mode)]
                doc["batches"][str(batch)][mode] = r
                if oom is None:
                    s = r["steady"]
                    print("%s batch %d %s: allocated %.1f MiB, reserved %.1f MiB, nvidia-smi %s" % (
                        name, batch, mode, s["max_memory_allocated"] / 2**20, s["max_memory_reserved"] / 2**20,
                        "%.0f MiB" % (s["nvidia_smi_process_bytes"] / 2**20) if s["nvidia_smi_process_bytes"] else "-"))
                else:
                    print("%s batch %d %s: %s" % (name, batch, mode, r["error"]), file=sys.stderr)
                    failed += not oom
        path = os.path.join(args.out, "%s_%s%s.json" % (slug(props.name), name, suffix))
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", os.path.relpath(path, ROOT))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
