#!/usr/bin/python3
"""PyTorch on a CUDA GPU: the truth memest's CUDA figures are checked against.

Usage (on a machine with an NVIDIA GPU and a CUDA build of PyTorch):
    /usr/bin/python3 tests/measure/pytorch_cuda.py [--models resnet18,resnet50,mobilenet_v2,bert_like]
        [--batches 1,32] [--modes infer_nograd,train_sgd,train_adam] [--device 0] [--out golden/truth/cuda]

Writes golden/truth/cuda/<gpu>_<model>.json, labelled with the GPU, driver,
CUDA, cuDNN and torch versions and the date. Without a CUDA GPU
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
  train_sgd     model.train(); out = model(*inputs); loss; loss.backward();
                SGD(lr=0.01).step(); zero_grad(set_to_none=True)
  train_adam    the same with Adam(lr=1e-3)

Losses: cross_entropy against random labels for [B, classes] outputs;
token models' [B, T, V] logits flattened; anything else out.float().pow(2).mean()
(memest's --loss mse). For each step: torch.cuda.reset_peak_memory_stats()
first, then max_memory_allocated() and max_memory_reserved() after a
synchronize, nvidia-smi's used memory of the process and of the GPU, and
total - free. "step1" is the first step (cuBLAS and cuDNN set up inside it,
optimizer state created), "steady" the third. step_time_s: mean of five more
steps between CUDA events. cudnn.benchmark stays False (PyTorch's default),
TF32 as PyTorch's defaults have it (reported).
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "bert_like"]
MODES = ["infer_nograd", "train_sgd", "train_adam"]
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


def child(name, batch, mode, device):
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
    xs = [x.to(dev) for x in random_inputs(spec, batch, 1, VOCAB.get(name, 1000))]

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

    def one_step():
        nonlocal loss_text
        if not train:
            with torch.no_grad():
                out = model(*xs)
            return out
        out = model(*xs)
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
    return {"baseline_allocated": baseline, "context": context, **steps, "step_time_s": a.elapsed_time(b) / 5e3,
            "loss": loss_text, "params": sum(p.numel() for p in model.parameters())}


# --------------------------------------------------------------------------
# the parent: one child per measurement, files per model


def slug(s):
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "cuda"))
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "BATCH", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    try:
        import torch
    except ImportError as e:
        skip("cannot import torch (%s)" % e)
    if not torch.cuda.is_available():
        skip("torch.cuda.is_available() is False (torch %s, built for CUDA %s): no CUDA GPU to measure on"
             % (torch.__version__, torch.version.cuda))

    if args.one:
        name, batch, mode = args.one[0], int(args.one[1]), args.one[2]
        json.dump(child(name, batch, mode, args.device), sys.stdout)
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
    }
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for name in models:
        doc = dict(label)
        doc.update({"model": name, "source": "tests/zoo/models.py:MODELS[%r]" % name,
                    "how": __doc__.split("\n\n", 3)[3].strip(), "batches": {}})
        for batch in batches:
            runs = {}
            for mode in modes:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, str(batch), mode,
                                    "--device", str(args.device)], capture_output=True, text=True)
                if p.returncode == 0:
                    runs[mode] = json.loads(p.stdout)
                    s = runs[mode]["steady"]
                    print("%s batch %d %s: allocated %.1f MiB, reserved %.1f MiB, nvidia-smi %s" % (
                        name, batch, mode, s["max_memory_allocated"] / 2**20, s["max_memory_reserved"] / 2**20,
                        "%.0f MiB" % (s["nvidia_smi_process_bytes"] / 2**20) if s["nvidia_smi_process_bytes"] else "-"))
                else:
                    oom = "out of memory" in p.stderr
                    runs[mode] = {"error": "out of memory" if oom else p.stderr.strip().splitlines()[-1:] or ["failed"]}
                    print("%s batch %d %s: %s" % (name, batch, mode, runs[mode]["error"]), file=sys.stderr)
                    failed += not oom
            doc["batches"][str(batch)] = runs
        path = os.path.join(args.out, "%s_%s.json" % (slug(props.name), name))
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", os.path.relpath(path, ROOT))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
