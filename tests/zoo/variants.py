#!/usr/bin/python3
"""Issue 10's export variant matrix: every zoo model exported the ways users
meet it, and the parameter truth of each file.

Usage:
    /usr/bin/python3 tests/zoo/variants.py [--models a,b] [--opsets 11,13,14,17]
        [--modes eval,train] [--batch-kinds static,dynamic] [--out DIR]
        [--committed] [--manifest FILE]

Matrix: model (tests/zoo/models.py: MODELS) x opset (11, 13, 14, 17) x mode
x batch kind, where
  mode eval   model.eval(), TrainingMode.EVAL, do_constant_folding=True
              (torch.onnx.export's default: BatchNorm folded into Conv, a
              tied head's transpose written as its own initializer, shape
              subgraphs folded)
  mode train  model.train(), TrainingMode.TRAINING, do_constant_folding=False
              (BatchNorm and Dropout nodes kept)
  mode preserve  model.eval(), TrainingMode.PRESERVE, do_constant_folding=
              False: BatchNorm kept, Dropout gone; only in the committed set,
              in place of a train export that torch 1.13 refuses (stochastic
              depth: "ONNX export of operator Bernoulli")
  static      the dummy input has batch 1 and there are no dynamic_axes
              (torch.onnx.export's default: dim 0 is the literal 1)
  dynamic     batch 2 dummy input, dynamic_axes {0: "batch"} on inputs and
              the output
Files are graph-only (tensors above 1 KiB point to a deleted .data file),
named <model>__op<opset>_<mode>_<batchkind>.onnx. Without --committed they
go to --out (default build-variants/, git-ignored) and the manifest to
DIR/variants.json. --committed writes only the committed subset into
models/onnx/variants/ and its manifest into golden/truth/variants.json: per
model the opset-13 eval static and the opset-13 train dynamic export, and
the opset-11 eval static one too for the models in OPSET11_TOO; an export
refused because the opset lacks an op (aten::triu before 14) is replaced by
the same export at opset 14.

Manifest per file: model, opset, mode, batch kind, inputs, params (the
count PyTorch gives for what the file holds: sum(p.numel()) over
model.parameters() -- a tied weight counted once -- when the export keeps
every parameter; the parameter count of torch.fx.experimental.optimization.
fuse(model.eval()) when the exporter folded BatchNorm into Conv),
params_rule, bn_modules / bn_nodes (BatchNorm modules in the model and
BatchNormalization nodes in the file), bn_folded, tied (the model shares a
parameter between modules), macs per batch (the dispatch-level count from
golden/truth/zoo/<model>.json, eval mode, as it was when the manifest was
made; tests/zoo/check_variants.py reads that file itself), and "skipped": every
combination torch 1.13 could not export with the exporter's error.

Weights random (seeded as tests/zoo/export_zoo2.py does), nothing downloaded;
always /usr/bin/python3 (Debian's torch 1.13).
"""
import argparse
import copy
import datetime
import json
import os
import sys
import tempfile
import time
import warnings

import torch
import torchvision
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from models import MODELS, VOCAB  # noqa: E402
from zoo_common import count_params, dump_json, make_graph_only, random_inputs  # noqa: E402
import export_zoo2  # noqa: E402  (build_model: the seeded weights of the zoo truth)

torch.set_num_threads(2)
warnings.filterwarnings("ignore")

ROOT = os.path.dirname(os.path.dirname(HERE))
OPSETS = (11, 13, 14, 17)
MODES = ("eval", "train")
BATCH_KINDS = ("static", "dynamic")
COMMITTED_DIR = os.path.join(ROOT, "models", "onnx", "variants")
COMMITTED_MANIFEST = os.path.join(ROOT, "golden", "truth", "variants.json")


# models whose opset-11 eval export spells something differently from opset
# 13 (Softmax over a non-last axis is 2-D coerced below 13, Split/Squeeze/
# ReduceSum axes are attributes below 13): committed at opset 11 as well
OPSET11_TOO = ("vit_b_16", "bert_like", "gpt2_tanh", "llama_like", "t5_like",
               "mobilenet_v3_large", "whisper_encoder", "diffusion_unet", "vit_timm_p8", "nanogpt", "yolov5s", "gpt2_hf")


def committed_set(name):
    """The committed subset for one model: (opset, mode, batch kind)."""
    s = [(13, "eval", "static"), (13, "train", "dynamic")]
    if name in OPSET11_TOO:
        s.append((11, "eval", "static"))
    return s


def file_name(name, opset, mode, kind):
    return "%s__op%d_%s_%s.onnx" % (name, opset, mode, kind)


def export(model, name, opset, mode, kind, path):
    m = copy.deepcopy(model)
    if mode == "train":
        m.train()
        training, fold = torch.onnx.TrainingMode.TRAINING, False
    elif mode == "preserve":
        m.eval()
        training, fold = torch.onnx.TrainingMode.PRESERVE, False
    else:
        m.eval()
        training, fold = torch.onnx.TrainingMode.EVAL, True
    specs = MODELS[name][1]
    xs = random_inputs(specs, 1 if kind == "static" else 2, 2, VOCAB.get(name))
    in_names = [s[0] for s in specs]
    dyn = {n: {0: "batch"} for n in in_names + ["output"]} if kind == "dynamic" else None
    torch.manual_seed(5)
    torch.onnx.export(m, tuple(xs), path, input_names=in_names, output_names=["output"],
                      dynamic_axes=dyn, opset_version=opset, training=training,
                      do_constant_folding=fold, verbose=False)


def bn_modules(model):
    return sum(1 for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm))


def is_tied(model):
    seen, tied = set(), False
    for mod in model.modules():
        for _, p in mod.named_parameters(recurse=False):
            if id(p) in seen:
                tied = True
            seen.add(id(p))
    return tied


_FUSED = {}


def fused_params(name, model):
    """Parameter count after Conv+BatchNorm folding, found in PyTorch: one
    eval forward with hooks; a BatchNorm whose input is the output of a Conv
    module is folded (torch.onnx's eval peephole, like fx's fuse(), which
    cannot trace every model here): its weight and bias go, the Conv gains a
    bias if it had none. Returns (params, folded BatchNorm count)."""
    if name in _FUSED:
        return _FUSED[name]
    m = copy.deepcopy(model).eval()
    made, folded, hooks = {}, [], []

    def conv_hook(mod, inp, out):
        made[id(out)] = (mod, out)  # out kept alive: a freed tensor's id is reused

    def bn_hook(mod, inp):
        hit = made.get(id(inp[0]))
        if hit is not None and hit[1] is inp[0]:
            folded.append((hit[0], mod))
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.conv._ConvNd):
            hooks.append(mod.register_forward_hook(conv_hook))
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            hooks.append(mod.register_forward_pre_hook(bn_hook))
    xs = random_inputs(MODELS[name][1], 1, 2, VOCAB.get(name))
    with torch.no_grad():
        m(*xs)
    for h in hooks:
        h.remove()
    n = count_params(m)
    for conv, bn in {id(b): (c, b) for c, b in folded}.values():
        n -= sum(p.numel() for p in bn.parameters())
        if conv.bias is None:
            n += conv.out_channels
    _FUSED[name] = (n, len({id(b) for _, b in folded}))
    return _FUSED[name]


def zoo_macs(name):
    p = os.path.join(ROOT, "golden", "truth", "zoo", name + ".json")
    if not os.path.exists(p):
        return None
    with open(p) as f:
        t = json.load(f)
    return {b: e["macs"] for b, e in t["batches"].items()}


def one(model, name, opset, mode, kind, out_dir, tmp):
    fn = file_name(name, opset, mode, kind)
    full = os.path.join(tmp, fn)
    export(model, name, opset, mode, kind, full)
    dst = os.path.join(out_dir, fn)
    make_graph_only(full, dst)
    os.remove(full)
    g = onnx.load(dst, load_external_data=False)
    nbn = bn_modules(model)
    bn_nodes = sum(1 for n in g.graph.node if n.op_type == "BatchNormalization")
    folded = nbn > 0 and bn_nodes < nbn
    entry = {"model": name, "opset": opset, "mode": mode, "batch": kind,
             "inputs": [{"name": n, "shape": list(s), "dtype": str(d).replace("torch.", "")}
                        for n, s, d in MODELS[name][1]],
             "bn_modules": nbn, "bn_nodes": bn_nodes, "bn_folded": folded,
             "tied": is_tied(model), "nodes": len(g.graph.node),
             "op_types": sorted({n.op_type for n in g.graph.node})}
    if folded:
        p, nfold = fused_params(name, model)
        entry["params"] = p
        entry["params_rule"] = ("sum(p.numel()) minus the weight and bias of each BatchNorm "
                                "module whose input is a Conv module's output (%d, found by "
                                "forward hooks), plus a bias for each such Conv that had none; "
                                "the file keeps %d of %d BatchNormalization nodes"
                                % (nfold, bn_nodes, nbn))
        if nbn - bn_nodes != nfold:
            entry["params_warning"] = ("the exporter folded %d BatchNorms, the hooks found %d "
                                       "Conv->BatchNorm pairs: params may be off" % (nbn - bn_nodes, nfold))
    else:
        entry["params"] = count_params(model)
        entry["params_rule"] = "sum(p.numel() for p in model.parameters()) (a tied weight once)"
    entry["macs"] = zoo_macs(name)
    entry["size_bytes"] = os.path.getsize(dst)
    return fn, entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated subset of MODELS")
    ap.add_argument("--opsets", default=",".join(map(str, OPSETS)))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--batch-kinds", default=",".join(BATCH_KINDS))
    ap.add_argument("--out", default=os.path.join(ROOT, "build-variants"))
    ap.add_argument("--manifest")
    ap.add_argument("--committed", action="store_true",
                    help="only the committed subset, into models/onnx/variants/")
    ap.add_argument("--recount-params", action="store_true",
                    help="recompute params of the manifest's folded-BatchNorm entries "
                         "(no export)")
    a = ap.parse_args()
    models = a.models.split(",") if a.models else list(MODELS)
    for m in models:
        if m not in MODELS:
            ap.error("unknown model %r" % m)
    out_dir = COMMITTED_DIR if a.committed else a.out
    manifest = a.manifest or (COMMITTED_MANIFEST if a.committed
                              else os.path.join(out_dir, "variants.json"))
    os.makedirs(out_dir, exist_ok=True)
    doc = {"variants": {}, "skipped": []}
    if os.path.exists(manifest):  # merge: a run over some models keeps the rest
        with open(manifest) as f:
            doc = json.load(f)
    doc["how"] = ("generated by tests/zoo/variants.py%s with torch %s torchvision %s onnx %s on "
                  "%s; see the script's docstring for the matrix, the export settings and the "
                  "params rule" % (" --committed" if a.committed else "", torch.__version__,
                                   torchvision.__version__, onnx.__version__,
                                   datetime.date.today().isoformat()))
    if a.recount_params:
        for fn, e in doc["variants"].items():
            if e["model"] in models and e["bn_folded"]:
                model = export_zoo2.build_model(e["model"])
                entry = dict(e)
                p, nfold = fused_params(e["model"], model)
                entry["params"] = p
                entry.pop("params_warning", None)
                if e["bn_modules"] - e["bn_nodes"] != nfold:
                    entry["params_warning"] = ("the exporter folded %d BatchNorms, the hooks "
                                               "found %d Conv->BatchNorm pairs: params may be off"
                                               % (e["bn_modules"] - e["bn_nodes"], nfold))
                entry["params_rule"] = e["params_rule"].split("(")[0] + "(%d, found by " % nfold \
                    + e["params_rule"].split("found by ", 1)[1]
                print("%s: params %s -> %s" % (fn, e["params"], p))
                doc["variants"][fn] = entry
        with open(manifest, "w") as f:
            f.write(dump_json(doc))
        return
    combos = [(o, md, k) for o in map(int, a.opsets.split(",")) for md in a.modes.split(",")
              for k in a.batch_kinds.split(",")]
    with tempfile.TemporaryDirectory(prefix="variants_") as tmp:
        for name in models:
            model = export_zoo2.build_model(name)
            todo = committed_set(name) if a.committed else combos
            refused = set()
            if a.committed:  # a refused train export is replaced by a preserve one
                todo = todo + [(o, "preserve", k) for o, md, k in todo if md == "train"]
            for opset, mode, kind in todo:
                if mode == "preserve" and (opset, "train", kind) not in refused:
                    continue
                fn = file_name(name, opset, mode, kind)
                doc["skipped"] = [s for s in doc["skipped"] if s.get("file") != fn]
                doc["variants"].pop(fn, None)
                t0 = time.time()
                try:
                    fn, entry = one(model, name, opset, mode, kind, out_dir, tmp)
                    doc["variants"][fn] = entry
                    print("%-52s %6.1fs params %d%s" % (fn, time.time() - t0, entry["params"] or -1,
                          " (BN folded)" if entry["bn_folded"] else ""), flush=True)
                except Exception as e:  # noqa: BLE001 - what torch 1.13 cannot export
                    msg = "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:400])
                    doc["skipped"].append({"file": fn, "model": name, "opset": opset,
                                           "mode": mode, "batch": kind, "error": msg})
                    print("%-52s SKIPPED %s" % (fn, msg[:160]), flush=True)
                    refused.add((opset, mode, kind))
                    # committed set: an op the opset lacks (aten::triu before
                    # 14) moves that export to opset 14
                    if (a.committed and opset < 14 and "opset version" in msg
                            and (14, mode, kind) not in todo):
                        todo.append((14, mode, kind))
                    for p in (os.path.join(out_dir, fn), os.path.join(tmp, fn)):
                        if os.path.exists(p):
                            os.remove(p)
            del model
    doc["variants"] = dict(sorted(doc["variants"].items()))
    doc["skipped"] = sorted(doc["skipped"], key=lambda s: s["file"])
    with open(manifest, "w") as f:
        f.write(dump_json(doc))
    print("%d variants, %d skipped -> %s" % (len(doc["variants"]), len(doc["skipped"]),
                                             os.path.relpath(manifest, ROOT)))


if __name__ == "__main__":
    main()
