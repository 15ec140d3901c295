#!/usr/bin/python3
"""Export a small torchvision zoo to graph-only ONNX files and record truth.

Usage:
    /usr/bin/python3 tests/zoo/export_zoo.py [--models a,b] [--full-weights DIR]

Default mode: for each model, opset (13, 17) and mode (eval, train) write
    models/onnx/<model>_op<opset>_<mode>.onnx   graph only: tensors above 1 KiB
                                                point to a .data file that is
                                                deleted on purpose
    golden/truth/<model>_op<opset>_<mode>.json  params and shapes from PyTorch
                                                and onnx.shape_inference

--full-weights DIR: write ordinary ONNX files with inline weights (no truth)
for resnet18 and vgg16 at opset 17, eval mode, into DIR (for tests/bench).

Runs with Debian's python3-torch / python3-torchvision / python3-onnx; always
call it as /usr/bin/python3. Weights are random (weights=None), seeded.
"""
import argparse
import copy
import datetime
import os
import sys
import tempfile
import traceback
import warnings

import torch
import torch.fx.experimental.optimization as fx_opt
import torchvision
import onnx
import onnx.shape_inference

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo_common import count_params, dump_json, make_graph_only, shape_list  # noqa: E402

torch.set_num_threads(2)
# The exporter warns once per BatchNorm about num_batches_tracked mutation and
# about training-mode export; the warnings say nothing we act on.
warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONNX_DIR = os.path.join(ROOT, "models", "onnx")
TRUTH_DIR = os.path.join(ROOT, "golden", "truth")

MODELS = ["resnet18", "resnet50", "vgg16", "mobilenet_v2", "squeezenet1_0"]
OPSETS = (13, 17)
MODES = ("eval", "train")
BATCHES = (1, 8)
FULL_WEIGHT_MODELS = ["resnet18", "vgg16"]
INPUT_CHW = (3, 224, 224)


def build_model(name):
    """Construct a seeded random-weight model with no two equal initializers."""
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                n = mod.num_features
                if mod.weight is not None:
                    mod.weight.add_(0.01 * torch.randn(n, generator=g))
                if mod.bias is not None:
                    mod.bias.add_(0.01 * torch.randn(n, generator=g))
                if mod.running_mean is not None:
                    mod.running_mean.add_(0.01 * torch.randn(n, generator=g))
                    mod.running_var.mul_(1.0 + 0.01 * torch.rand(n, generator=g))
        # Constant-initialised parameters (zero conv/linear biases in vgg,
        # squeezenet, mobilenet) would also be merged by the exporter's
        # deduplicate-by-value pass under constant folding: perturb them too.
        for p in model.parameters():
            if p.numel() > 1 and bool((p == p.reshape(-1)[0]).all()):
                p.add_(0.01 * torch.randn(p.shape, generator=g))
    return model


def export(model, mode, opset, path):
    m = copy.deepcopy(model)  # a train-mode trace would update BN running stats
    dummy = torch.randn(1, *INPUT_CHW, generator=torch.Generator().manual_seed(2))
    if mode == "eval":
        m.eval()
        training, folding = torch.onnx.TrainingMode.EVAL, True
    else:
        m.train()
        training, folding = torch.onnx.TrainingMode.TRAINING, False
    torch.onnx.export(
        m, dummy, path,
        input_names=["input"], output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
        opset_version=opset, training=training, do_constant_folding=folding,
        verbose=False)


def pytorch_shapes(model, batch):
    """Output shape and leaf-module output shapes (last call) at a batch."""
    m = copy.deepcopy(model).eval()
    shapes = {}
    hooks = []
    for qname, mod in m.named_modules():
        if qname and not list(mod.children()):
            def hook(_mod, _inp, out, qname=qname):
                shapes[qname] = shape_list(out)
            hooks.append(mod.register_forward_hook(hook))
    x = torch.randn(batch, *INPUT_CHW, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        y = m(x)
    for h in hooks:
        h.remove()
    return shape_list(y), shapes


def onnx_shapes(path, batch):
    """Shapes of node outputs from onnx.shape_inference at a concrete batch."""
    m = onnx.load(path, load_external_data=False)
    for inp in m.graph.input:
        dims = inp.type.tensor_type.shape.dim
        if inp.name == "input" and dims and dims[0].dim_param:
            dims[0].Clear()
            dims[0].dim_value = batch
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    known = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = tt.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            known[vi.name] = [d.dim_value for d in dims]
    values, missing, missing_names = {}, 0, []
    for node in inferred.graph.node:
        for out in node.output:
            if not out:
                continue  # omitted optional output
            if out in known:
                values[out] = known[out]
            else:
                missing += 1
                missing_names.append("%s (%s)" % (out, node.op_type))
    return values, missing, missing_names


def fused_params(model):
    return count_params(fx_opt.fuse(copy.deepcopy(model).eval()))


def how_string():
    return ("generated by tests/zoo/export_zoo.py with torch %s torchvision %s "
            "onnx %s on %s; params from sum(p.numel()) in PyTorch, shapes from "
            "PyTorch forward hooks and onnx.shape_inference"
            % (torch.__version__, torchvision.__version__, onnx.__version__,
               datetime.date.today().isoformat()))


def run_zoo(models):
    os.makedirs(ONNX_DIR, exist_ok=True)
    os.makedirs(TRUTH_DIR, exist_ok=True)
    failures, summary = [], []
    how = how_string()
    with tempfile.TemporaryDirectory(prefix="export_zoo_") as tmp:
        for name in models:
            model = build_model(name)
            params_unfused = count_params(model)
            params_fused = fused_params(model)
            buffers_float = sum(b.numel() for b in model.buffers()
                                if b.is_floating_point())
            torch_shapes = {b: pytorch_shapes(model, b) for b in BATCHES}
            for opset in OPSETS:
                for mode in MODES:
                    stem = "%s_op%d_%s" % (name, opset, mode)
                    full = os.path.join(tmp, stem + ".onnx")
                    dst = os.path.join(ONNX_DIR, stem + ".onnx")
                    try:
                        export(model, mode, opset, full)
                    except Exception as e:  # noqa: BLE001 - report and go on
                        print("EXPORT FAILED %s: %s: %s" % (stem, type(e).__name__, e))
                        traceback.print_exc(limit=3)
                        failures.append(stem)
                        continue
                    full_size = os.path.getsize(full)
                    data_size = make_graph_only(full, dst)
                    os.remove(full)
                    size = os.path.getsize(dst)
                    g = onnx.load(dst, load_external_data=False)
                    ops = sorted({n.op_type for n in g.graph.node})
                    truth = {
                        "how": how,
                        "model": name,
                        "opset": opset,
                        "mode": mode,
                        "params": params_fused if mode == "eval" else params_unfused,
                        "params_unfused": params_unfused,
                        # float buffers (BatchNorm running_mean/var): a train
                        # export keeps them as initializers, so its initializer
                        # elements are params_unfused + buffers_float
                        "buffers_float": buffers_float,
                        "batches": {},
                    }
                    missing_report = {}
                    for b in BATCHES:
                        out_shape, mod_shapes = torch_shapes[b]
                        vals, missing, missing_names = onnx_shapes(dst, b)
                        truth["batches"][str(b)] = {
                            "output_shape": out_shape,
                            "module_shapes": mod_shapes,
                            "value_shapes": vals,
                            "value_shapes_missing": missing,
                        }
                        missing_report[b] = missing_names
                    tpath = os.path.join(TRUTH_DIR, stem + ".json")
                    with open(tpath, "w") as f:
                        f.write(dump_json(truth))
                    print("wrote %s (%.1f KB; full export %.1f MB, %.1f MB moved "
                          "to the deleted .data) and %s"
                          % (os.path.relpath(dst, ROOT), size / 1024.0,
                             full_size / 1e6, data_size / 1e6,
                             os.path.relpath(tpath, ROOT)))
                    print("  params %d (unfused %d), %d nodes, ops: %s"
                          % (truth["params"], params_unfused, len(g.graph.node),
                             " ".join(ops)))
                    for b in BATCHES:
                        if missing_report[b]:
                            print("  batch %d: no shape for %d node outputs: %s"
                                  % (b, len(missing_report[b]),
                                     ", ".join(missing_report[b][:10])
                                     + (" ..." if len(missing_report[b]) > 10 else "")))
                    if size > 200 * 1024:
                        print("  WARNING: %s is larger than 200 KB" % dst)
                    summary.append((stem, size))
    print("done: %d files written, %d export failures%s"
          % (len(summary), len(failures),
             (": " + ", ".join(failures)) if failures else ""))
    return 1 if failures else 0


def run_full_weights(outdir, models):
    os.makedirs(outdir, exist_ok=True)
    for name in models:
        model = build_model(name)
        path = os.path.join(outdir, "%s_op17_eval.onnx" % name)
        export(model, "eval", 17, path)
        print("wrote %s (%.1f MB, weights inline)" % (path, os.path.getsize(path) / 1e6))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--full-weights", metavar="DIR",
                    help="write full-weight resnet18/vgg16 opset-17 eval files to DIR")
    args = ap.parse_args()
    if args.full_weights:
        default = FULL_WEIGHT_MODELS
    else:
        default = MODELS
    models = args.models.split(",") if args.models else default
    for m in models:
        if m not in MODELS:
            ap.error("unknown model %r (known: %s)" % (m, ", ".join(MODELS)))
    if args.full_weights:
        return run_full_weights(args.full_weights, models)
    return run_zoo(models)


if __name__ == "__main__":
    sys.exit(main())
