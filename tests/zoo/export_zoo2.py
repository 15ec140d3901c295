#!/usr/bin/python3
"""Export the extended zoo (tests/zoo/models.py) to graph-only ONNX and record truth.

Usage:
    /usr/bin/python3 tests/zoo/export_zoo2.py [--models a,b] [--full-weights DIR]

--full-weights DIR: write DIR/<name>.onnx with its weights inline (for
tests/bench/bench.sh; no truth, nothing under models/).

For each model in models.MODELS, one ONNX export at opset 17 with a dynamic
"batch" axis on every input and output:
    models/onnx/zoo/<name>.onnx     graph only: tensors above 1 KiB point to a
                                    .data file that is deleted on purpose
    golden/truth/zoo/<name>.json    params (exact, from PyTorch), output shapes
                                    (PyTorch), value shapes (onnx.shape_inference)
                                    and MACs from an independent dispatch-level
                                    counter in PyTorch, at batch 1 and 8

Export mode: training-mode export (model.train(), TrainingMode.TRAINING,
do_constant_folding=False) where it works, so BatchNorm stays unfolded and the
parameter truth is sum(p.numel()); otherwise (stochastic depth -> Bernoulli)
eval mode with TrainingMode.PRESERVE, do_constant_folding=False, and if the
exporter folded BatchNorm into Conv the truth is the parameter count of
torch.fx.experimental.optimization.fuse(model.eval()).

Runs with Debian's python3-torch / python3-torchvision / python3-onnx; always
call it as /usr/bin/python3. Weights are random (weights=None), seeded.
"""
import argparse
import copy
import datetime
import hashlib
import os
import sys
import tempfile
import time
import traceback
import warnings

import torch
import torch.fx.experimental.optimization as fx_opt
from torch.utils._python_dispatch import TorchDispatchMode
import torchvision
import onnx
import onnx.shape_inference
import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MODELS, VOCAB  # noqa: E402
from zoo_common import count_params, dump_json, make_graph_only, random_inputs, shape_list  # noqa: E402

torch.set_num_threads(2)
warnings.filterwarnings("ignore", category=UserWarning)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONNX_DIR = os.path.join(ROOT, "models", "onnx", "zoo")
TRUTH_DIR = os.path.join(ROOT, "golden", "truth", "zoo")
OPSET = 17
BATCHES = (1, 8)
EXPORT_BATCH = 2  # dummy batch for tracing: not 1, so nothing specialises on it
FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE,
               TensorProto.BFLOAT16}


# --------------------------------------------------------------------------
# Model construction

def build_model(name):
    """Seeded random-weight model; constant-valued float tensors perturbed."""
    ctor, _ = MODELS[name]
    torch.manual_seed(0)
    model = ctor()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        tensors = list(model.named_parameters()) + [
            (n, b) for n, b in model.named_buffers() if b.is_floating_point()]
        for _, t in tensors:
            if t.numel() > 1 and bool((t == t.reshape(-1)[0]).all()):
                v = float(t.reshape(-1)[0])
                noise = 0.01 * torch.randn(t.shape, generator=g)
                if v != 0.0:
                    t.mul_(1.0 + noise)  # keeps sign (running_var stays > 0)
                else:
                    t.add_(noise)
        # no two float tensors of the same shape may be equal (the exporter
        # could merge them). Equal buffers (each layer's copy of the same
        # RoPE cos/sin table) get a tiny relative perturbation: values only,
        # every shape and count stays; equal parameters are an error.
        seen = {}
        params = {n for n, _ in model.named_parameters()}
        for n, t in tensors:
            if t.numel() <= 1:
                continue
            h = hashlib.sha1(t.detach().contiguous().numpy().tobytes()).hexdigest()
            key = (tuple(t.shape), h)
            if key in seen and n not in params:
                t.mul_(1.0 + 1e-3 * torch.randn(t.shape, generator=g))
                h = hashlib.sha1(t.detach().contiguous().numpy().tobytes()).hexdigest()
                key = (tuple(t.shape), h)
            if key in seen:
                raise RuntimeError("equal tensors %s and %s" % (seen[key], n))
            seen[key] = n
    return model


def make_inputs(name, batch, seed):
    return random_inputs(MODELS[name][1], batch, seed, VOCAB.get(name))


def dtype_name(dt):
    return str(dt).replace("torch.", "")


# --------------------------------------------------------------------------
# Export

def export(model, name, mode, path):
    """mode 'train': TRAINING export; 'eval_preserve': eval + PRESERVE."""
    m = copy.deepcopy(model)  # a train-mode trace updates BN running stats
    if mode == "train":
        m.train()
        training = torch.onnx.TrainingMode.TRAINING
    else:
        m.eval()
        training = torch.onnx.TrainingMode.PRESERVE
    _, specs = MODELS[name]
    xs = make_inputs(name, EXPORT_BATCH, 2)
    in_names = [s[0] for s in specs]
    out_names = ["output"]
    dyn = {n: {0: "batch"} for n in in_names + out_names}
    torch.manual_seed(5)
    torch.onnx.export(
        m, tuple(xs), path, input_names=in_names, output_names=out_names,
        dynamic_axes=dyn, opset_version=OPSET, training=training,
        do_constant_folding=False, verbose=False)


def initializer_stats(g):
    """Float / non-float initializer elements, big-initializer shapes, Constant floats."""
    flt, other, shapes = 0, {}, []
    for t in g.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type in FLOAT_TYPES:
            flt += n
            shapes.append(tuple(t.dims))
        else:
            key = TensorProto.DataType.Name(t.data_type)
            other[key] = other.get(key, 0) + n
    const_float = 0
    for node in g.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and a.t.data_type in FLOAT_TYPES:
                    n = 1
                    for d in a.t.dims:
                        n *= d
                    const_float += n
    return flt, other, shapes, const_float


FOLD_MAX = 1 << 16  # fold only small integer/bool shape tensors


def _const_array(t):
    """numpy value of an inline TensorProto, None if its data was external."""
    if t.data_location == TensorProto.EXTERNAL or len(t.external_data):
        return None
    return numpy_helper.to_array(t)


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _norm_axes(axes, rank):
    return [int(a) + rank if int(a) < 0 else int(a) for a in axes]


def _eval_node(node, ins, in_shape0):
    """numpy evaluation of one shape-subgraph node; None if not supported."""
    op, at = node.op_type, _attrs(node)
    if op == "Shape":
        if in_shape0 is None:
            return None
        s = np.array(in_shape0, dtype=np.int64)
        return s[at.get("start", 0):at.get("end", len(s))]
    if op == "Constant":
        if "value" in at:
            return _const_array(at["value"])
        for k, dt in (("value_int", np.int64), ("value_ints", np.int64),
                      ("value_float", np.float32), ("value_floats", np.float32)):
            if k in at:
                return np.array(at[k], dtype=dt)
        return None
    if any(x is None for x in ins[:1]) or any(
            x is None for i, x in enumerate(ins) if node.input[i]):
        return None
    if op == "Gather":
        return np.take(ins[0], ins[1], axis=at.get("axis", 0))
    if op == "Unsqueeze":
        x = ins[0]
        for ax in sorted(_norm_axes(ins[1].reshape(-1), x.ndim + ins[1].size)):
            x = np.expand_dims(x, ax)
        return x
    if op == "Squeeze":
        if len(ins) > 1 and node.input[1]:
            return np.squeeze(ins[0], axis=tuple(_norm_axes(ins[1].reshape(-1), ins[0].ndim)))
        return np.squeeze(ins[0])
    if op == "Concat":
        return np.concatenate(ins, axis=at["axis"])
    if op == "Slice":
        x = ins[0]
        starts, ends = ins[1].reshape(-1), ins[2].reshape(-1)
        axes = ins[3].reshape(-1) if len(ins) > 3 and node.input[3] else range(len(starts))
        steps = ins[4].reshape(-1) if len(ins) > 4 and node.input[4] else [1] * len(starts)
        sl = [slice(None)] * x.ndim
        for st, en, ax, sp in zip(starts, ends, _norm_axes(axes, x.ndim), steps):
            sl[ax] = slice(int(st), int(en), int(sp))
        return x[tuple(sl)]
    if op == "Cast":
        return ins[0].astype(mapping.TENSOR_TYPE_TO_NP_TYPE[at["to"]])
    if op in ("Add", "Sub", "Mul"):
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](ins[0], ins[1])
    if op == "Div":
        a, b = ins
        if np.issubdtype(a.dtype, np.integer):
            return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)
        return a / b
    if op == "Equal":
        return np.equal(ins[0], ins[1])
    if op == "Not":
        return np.logical_not(ins[0])
    if op == "Where":
        return np.where(ins[0], ins[1], ins[2])
    if op == "ConstantOfShape":
        v = _const_array(at["value"]) if "value" in at else np.zeros(1, np.float32)
        shape = tuple(int(d) for d in ins[0].reshape(-1))
        if int(np.prod(shape)) > FOLD_MAX:
            return None
        return np.full(shape, v.reshape(-1)[0], dtype=v.dtype)
    if op == "Expand":
        shape = np.broadcast_shapes(ins[0].shape, tuple(int(d) for d in ins[1]))
        if int(np.prod(shape)) > FOLD_MAX:
            return None
        return np.broadcast_to(ins[0], shape).copy()
    if op == "Range":
        return np.arange(ins[0].item(), ins[1].item(), ins[2].item(), dtype=ins[0].dtype)
    if op == "Reshape":
        shape = [int(d) for d in ins[1].reshape(-1)]
        if not at.get("allowzero", 0):
            shape = [ins[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return ins[0].reshape(shape)
    if op == "Identity":
        return ins[0]
    if op == "Mod":
        # fmod=0: the sign of the divisor (Python's %); fmod=1: C's fmod
        return (np.fmod if at.get("fmod", 0) else np.mod)(ins[0], ins[1])
    if op == "Transpose":
        return np.transpose(ins[0], at.get("perm"))
    return None


def _known_shapes(model):
    known = {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            known[vi.name] = [d.dim_value for d in tt.shape.dim]
    for t in g.initializer:
        known[t.name] = list(t.dims)
    return known


def _infer(m):
    try:
        return onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True), "strict"
    except Exception as e:  # noqa: BLE001
        print("  strict shape inference failed (%s); non-strict" % str(e)[:200])
        return onnx.shape_inference.infer_shapes(m, data_prop=True), "non-strict"


def onnx_shapes(path, batch):
    """Fully known shapes of node outputs from onnx.shape_inference at a batch.

    infer_shapes(strict_mode=True, data_prop=True) alone leaves shapes unknown
    behind shape subgraphs it cannot propagate (Shape -> Div -> Reshape in
    vit, Range in bert/gpt). So, repeatedly, nodes of such subgraphs whose
    inputs are known (small integer/bool tensors, or a Shape of a tensor whose
    shape is inferred) are evaluated with numpy and replaced by Constant nodes
    of the same output name, and inference is run again, until nothing changes.
    """
    m = onnx.load(path, load_external_data=False)
    orig_nodes = [(list(n.output), n.op_type) for n in m.graph.node]
    del m.graph.value_info[:]  # infer from scratch
    for vi in list(m.graph.input) + list(m.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param == "batch":
                d.Clear()
                d.dim_value = batch
    values0 = {}
    for t in m.graph.initializer:
        v = _const_array(t)
        if v is not None and v.size <= FOLD_MAX and not np.issubdtype(v.dtype, np.floating):
            values0[t.name] = v
    folded_ops = {}
    for _ in range(200):
        inferred, mode = _infer(m)
        shapes = _known_shapes(inferred)
        values = dict(values0)
        new_nodes, changed = [], False
        for node in m.graph.node:
            val = None
            if len(node.output) == 1 and node.op_type in FOLDABLE:
                ins = [values.get(i) if i else None for i in node.input]
                try:
                    val = _eval_node(node, ins, shapes.get(node.input[0]) if node.input else None)
                except Exception:  # noqa: BLE001 - leave it to onnx
                    val = None
            if val is not None and val.size <= FOLD_MAX and (
                    node.op_type == "Constant" or not np.issubdtype(val.dtype, np.floating)
                    or val.size <= 64):
                val = np.asarray(val)
                values[node.output[0]] = val
                if node.op_type != "Constant":
                    folded_ops[node.op_type] = folded_ops.get(node.op_type, 0) + 1
                    new_nodes.append(helper.make_node(
                        "Constant", [], [node.output[0]], name=node.name + "_folded",
                        value=numpy_helper.from_array(val, node.output[0])))
                    changed = True
                    continue
            new_nodes.append(node)
        if not changed:
            break
        del m.graph.node[:]
        m.graph.node.extend(new_nodes)
        del m.graph.value_info[:]
    known = _known_shapes(inferred)
    out_shapes = [known.get(o.name) for o in inferred.graph.output]
    vals, missing, missing_names = {}, 0, []
    for outs, op in orig_nodes:
        for out in outs:
            if not out:
                continue
            if out in known:
                vals[out] = known[out]
            else:
                missing += 1
                missing_names.append("%s (%s)" % (out, op))
    return vals, missing, missing_names, mode, folded_ops, out_shapes


FOLDABLE = {"Shape", "Constant", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice",
            "Cast", "Add", "Sub", "Mul", "Div", "Equal", "Not", "Where",
            "ConstantOfShape", "Expand", "Range", "Reshape", "Identity", "Transpose", "Mod"}


# --------------------------------------------------------------------------
# Independent MAC counter (aten dispatch level)

def _numel(t):
    return t.numel() if isinstance(t, torch.Tensor) else 0


def _prod(xs):
    p = 1
    for x in xs:
        p *= int(x)
    return p


def _conv_macs(name, args, kwargs, out):
    inp, w = args[0], args[1]
    if name in ("aten.convolution", "aten._convolution",
                "aten.convolution_overrideable"):
        transposed = bool(args[6]) if len(args) > 6 else bool(kwargs.get("transposed", False))
    else:
        transposed = "transpose" in name
    # non-transposed weight [C_out, C_in/g, k...]; transposed [C_in, C_out/g, k...]
    per = int(w.shape[1]) * _prod(w.shape[2:])
    o = out[0] if isinstance(out, (tuple, list)) else out
    return (_numel(inp) if transposed else _numel(o)) * per


def _mha_macs(args, kwargs, out):
    # _native_multi_head_attention(query, key, value, embed_dim, num_head,
    #   qkv_weight, qkv_bias, proj_weight, proj_bias, mask, need_weights, ...)
    q, k, v = args[0], args[1], args[2]
    e = int(args[3])
    lq = _numel(q) // e   # B*L
    lk = _numel(k) // e   # B*S
    lv = _numel(v) // e
    b = q.shape[0] if q.dim() == 3 else 1
    L = q.shape[-2]
    S = k.shape[-2]
    return (lq * e * e + lk * e * e + lv * e * e   # in-projections
            + b * L * S * e                         # Q K^T over all heads
            + b * L * S * e                         # attn @ V
            + lq * e * e)                           # out-projection


def op_macs(name, args, kwargs, out):
    """MACs of one aten call; None if the op does no contraction."""
    if "conv" in name and name not in ("aten.convert_element_type",):
        if isinstance(args[1], torch.Tensor) and args[1].dim() >= 3:
            return _conv_macs(name, args, kwargs, out)
    if name == "aten.mm":
        return _numel(out) * int(args[0].shape[-1])
    if name == "aten.addmm":
        return _numel(out) * int(args[1].shape[-1])
    if name == "aten.bmm":
        return _numel(out) * int(args[0].shape[-1])
    if name == "aten.baddbmm":
        return _numel(out) * int(args[1].shape[-1])
    if name == "aten.addbmm":
        return int(args[1].shape[0]) * _numel(out) * int(args[1].shape[-1])
    if name == "aten.matmul":
        return _numel(out) * int(args[0].shape[-1])
    if name == "aten.linear":
        return _numel(out) * int(args[1].shape[-1])
    if name == "aten.mv":
        return _numel(args[0])
    if name == "aten.addmv":
        return _numel(args[1])
    if name in ("aten.dot", "aten.vdot"):
        return _numel(args[0])
    if name == "aten._native_multi_head_attention":
        return _mha_macs(args, kwargs, out)
    return None


CONTRACTION_HINTS = ("conv", "mm", "matmul", "linear", "einsum", "lstm", "gru",
                     "rnn", "attention", "dot", "mv", "tensordot", "bilinear",
                     "transformer")


class MacCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = {}
        self.macs = {}
        self.unhandled = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func.overloadpacket)
        self.calls[name] = self.calls.get(name, 0) + 1
        n = op_macs(name, args, kwargs, out)
        if n is not None:
            self.macs[name] = self.macs.get(name, 0) + int(n)
        elif any(h in name.lower() for h in CONTRACTION_HINTS):
            self.unhandled.add(name)
        return out


def count_macs(model, name, batch, train_mode, seed):
    """One forward under no_grad with the counter; returns (counter, output)."""
    m = copy.deepcopy(model)
    m.train(train_mode)
    xs = make_inputs(name, batch, seed)
    torch.manual_seed(4)
    with torch.no_grad(), MacCounter() as c:
        y = m(*xs)
    return c, y


def output_shapes(y):
    return [shape_list(y)] if isinstance(y, torch.Tensor) else [shape_list(x) for x in y]


# --------------------------------------------------------------------------

def has_bn(model):
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
               for m in model.modules())


def how_string(mode, params_rule):
    return ("generated by tests/zoo/export_zoo2.py with torch %s torchvision %s "
            "onnx %s on %s; export mode %s at opset %d with do_constant_folding="
            "False; params %s; output_shapes from a seeded PyTorch forward in the "
            "export mode under no_grad; value_shapes from onnx.shape_inference on "
            "the graph-only file with the batch dim set (strict_mode, data_prop, "
            "after numpy constant-folding of shape subgraphs such as Shape->Div->"
            "Reshape or Range, see value_shapes_folded_nodes); macs from a "
            "TorchDispatchMode counter over aten ops (convolution, mm, addmm, "
            "bmm, baddbmm, _native_multi_head_attention, ...) on one eval-mode "
            "no_grad forward"
            % (torch.__version__, torchvision.__version__, onnx.__version__,
               datetime.date.today().isoformat(), mode, OPSET, params_rule))


def process(name, tmp):
    t0 = time.time()
    model = build_model(name)
    params_unfused = count_params(model)
    buffers_float = sum(b.numel() for b in model.buffers() if b.is_floating_point())
    full = os.path.join(tmp, name + ".onnx")
    dst = os.path.join(ONNX_DIR, name + ".onnx")
    notes = []
    mode = "train"
    try:
        export(model, name, "train", full)
    except Exception as e:  # noqa: BLE001
        msg = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])
        print("  training-mode export failed (%s); eval + PRESERVE" % msg)
        notes.append("training-mode export failed: " + msg)
        mode = "eval_preserve"
        if os.path.exists(full):
            os.remove(full)
        export(model, name, "eval_preserve", full)
    make_graph_only(full, dst)
    os.remove(full)
    size = os.path.getsize(dst)
    g = onnx.load(dst, load_external_data=False)
    op_types = sorted({n.op_type for n in g.graph.node})
    flt, other_init, init_shapes, const_float = initializer_stats(g)
    bn_nodes = sum(1 for n in g.graph.node if n.op_type == "BatchNormalization")

    # parameter truth
    if mode == "train":
        params = params_unfused
        params_rule = "= sum(p.numel() for p in model.parameters())"
        expected_init = params_unfused + buffers_float
        init_rule = "params + float buffers (BatchNorm running stats)"
    elif has_bn(model) and bn_nodes == 0:
        params = count_params(fx_opt.fuse(copy.deepcopy(model).eval()))
        params_rule = ("= parameter count of torch.fx.experimental.optimization."
                       "fuse(model.eval()) (the exporter folded BatchNorm into Conv)")
        expected_init = params
        init_rule = "fused params"
    else:
        params = params_unfused
        params_rule = "= sum(p.numel() for p in model.parameters())"
        expected_init = params_unfused + buffers_float
        init_rule = "params + float buffers"
    init_ok = flt == expected_init
    if not init_ok:
        notes.append("float initializer elements %d != %s %d (diff %d)"
                     % (flt, init_rule, expected_init, flt - expected_init))

    truth = {
        "how": how_string(mode, params_rule),
        "model": name,
        "opset": OPSET,
        "export_mode": mode,
        "inputs": [{"name": n, "shape": list(s), "dtype": dtype_name(d)}
                   for n, s, d in MODELS[name][1]],
        "params": params,
        "params_unfused": params_unfused,
        "buffers_float": buffers_float,
        "float_initializer_elements": flt,
        "nonfloat_initializer_elements": other_init,
        "onnx_op_types": op_types,
        "batches": {},
    }
    truth["notes"] = notes  # filled further below; removed if empty

    per_batch_print = []
    for b in BATCHES:
        # PyTorch forward in the export mode (output shapes + MAC cross-check)
        try:
            c_exp, y = count_macs(model, name, b, mode == "train", 3)
        except ValueError as e:
            # torch raises for a training forward whose BatchNorm sees one
            # value per channel (DeepLabV3's ASPP pooling at batch 1): such a
            # step does not exist; the export-mode cross-check runs in eval
            if mode != "train" or "more than 1 value per channel" not in str(e):
                raise
            notes.append("batch %d: a training forward raises in PyTorch (%s); the export-mode MAC "
                         "cross-check ran in eval mode" % (b, e))
            c_exp, y = count_macs(model, name, b, False, 3)
        outs = output_shapes(y)
        del y
        # primary MAC count: eval mode, no_grad
        if mode == "train":
            c, y2 = count_macs(model, name, b, False, 3)
            del y2
        else:
            c = c_exp
        macs = sum(c.macs.values())
        macs_exp = sum(c_exp.macs.values())
        entry = {"output_shapes": outs}
        vals, missing, missing_names, si_mode, folded_ops, onnx_outs = onnx_shapes(dst, b)
        entry["value_shapes"] = vals
        entry["value_shapes_missing"] = missing
        entry["value_shapes_folded_nodes"] = dict(sorted(folded_ops.items()))
        if si_mode != "strict":
            entry["shape_inference"] = si_mode
        if onnx_outs != outs:
            msg = ("batch %d: ONNX-inferred output shapes %s != PyTorch %s"
                   % (b, onnx_outs, outs))
            print("  WARNING " + msg)
            notes.append(msg)
        entry["macs"] = macs
        entry["macs_by_op"] = dict(sorted(c.macs.items()))
        entry["aten_ops"] = dict(sorted(c.calls.items()))
        if c.unhandled:
            entry["unhandled_contraction_ops"] = sorted(c.unhandled)
        if macs_exp != macs:
            entry["macs_export_mode"] = macs_exp
            entry["macs_export_mode_by_op"] = dict(sorted(c_exp.macs.items()))
            print("  WARNING batch %d: MACs in export mode %d != eval %d"
                  % (b, macs_exp, macs))
        truth["batches"][str(b)] = entry
        per_batch_print.append((b, macs, macs_exp, outs, missing, missing_names,
                                sorted(c.calls), sorted(c.unhandled),
                                sum(folded_ops.values())))

    if not notes:
        del truth["notes"]
    tpath = os.path.join(TRUTH_DIR, name + ".json")
    with open(tpath, "w") as f:
        f.write(dump_json(truth))

    print("  mode %s, %s %.1f KB, %d nodes, truth %s"
          % (mode, os.path.relpath(dst, ROOT), size / 1024.0, len(g.graph.node),
             os.path.relpath(tpath, ROOT)))
    print("  ops: %s" % " ".join(op_types))
    print("  params %d (unfused %d, float buffers %d); float initializer elements "
          "%d (expected %s = %d: %s); non-float initializers %s; Constant-node "
          "floats %d"
          % (params, params_unfused, buffers_float, flt, init_rule, expected_init,
             "OK" if init_ok else "MISMATCH", other_init, const_float))
    big = sorted(init_shapes, key=_prod, reverse=True)[:3]
    print("  largest float initializers: %s" % big)
    for (b, macs, macs_exp, outs, missing, missing_names, calls, unh,
         folded) in per_batch_print:
        print("  batch %d: MACs %d (export-mode pass %d%s), outputs %s, "
              "value shapes missing %d%s; folded %s"
              % (b, macs, macs_exp, "" if macs == macs_exp else " DIFFERS", outs,
                 missing, (": " + ", ".join(missing_names[:8])) if missing else "",
                 folded))
        if b == 1:
            print("  aten ops: %s" % " ".join(calls))
        if unh:
            print("  WARNING unhandled contraction-like aten ops: %s" % unh)
    if size > 200 * 1024:
        print("  WARNING: %s is larger than 200 KB" % dst)
    print("  %.1f s" % (time.time() - t0))
    return {"mode": mode, "params": params, "float_init": flt,
            "macs1": truth["batches"]["1"]["macs"], "ops": op_types,
            "init_ok": init_ok}


def run_full_weights(outdir, models):
    """The same exports with weights inline: same graph, real file sizes."""
    os.makedirs(outdir, exist_ok=True)
    for name in models:
        model = build_model(name)
        path = os.path.join(outdir, name + ".onnx")
        try:
            export(model, name, "train", path)
        except Exception:  # noqa: BLE001 - as process(): stochastic depth
            export(model, name, "eval_preserve", path)
        print("wrote %s (%.1f MB)" % (path, os.path.getsize(path) / 1e6), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated subset of " + ",".join(MODELS))
    ap.add_argument("--full-weights", metavar="DIR", help="write full-weight files into DIR only")
    args = ap.parse_args()
    models = args.models.split(",") if args.models else list(MODELS)
    for m in models:
        if m not in MODELS:
            ap.error("unknown model %r (known: %s)" % (m, ", ".join(MODELS)))
    if args.full_weights:
        return run_full_weights(args.full_weights, models)
    os.makedirs(ONNX_DIR, exist_ok=True)
    os.makedirs(TRUTH_DIR, exist_ok=True)
    failures, summary = [], {}
    with tempfile.TemporaryDirectory(prefix="export_zoo2_") as tmp:
        for name in models:
            print("== %s" % name, flush=True)
            try:
                summary[name] = process(name, tmp)
            except Exception as e:  # noqa: BLE001 - report and go on
                print("FAILED %s: %s: %s" % (name, type(e).__name__, e))
                traceback.print_exc(limit=5)
                failures.append(name)
            sys.stdout.flush()
    print("\n%-16s %-14s %12s %12s %4s %16s" % ("model", "mode", "params",
                                                "float_init", "ok", "MACs@1"))
    for n, s in summary.items():
        print("%-16s %-14s %12d %12d %4s %16d" % (n, s["mode"], s["params"],
              s["float_init"], "yes" if s["init_ok"] else "NO", s["macs1"]))
    print("done: %d models written, %d failures%s"
          % (len(summary), len(failures),
             (": " + ", ".join(failures)) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
