#!/usr/bin/python3
"""Convert PyTorch models to memest JSON layer graphs (doc/json-format.md).

Usage:
    /usr/bin/python3 tests/zoo/make_json.py

Writes
    models/resnet18.json         torchvision resnet18, input x [3, 224, 224]
    models/resnet50.json         torchvision resnet50, input x [3, 224, 224]
    models/seed_sequential.json  a small nn.Sequential, input [3, 682, 700]
    golden/truth/json_models.json  params, output shape and leaf-module output
                                   shapes at batch 1, from PyTorch

The graph comes from torch.fx.symbolic_trace: every call_module node is a
layer named by its qualified module name (a module called twice appears
twice), every supported call_function node (x + y, torch.flatten, torch.cat)
is a functional layer named by its fx node name. Anything else is an error.

Always run with /usr/bin/python3 (Debian's python3-torch, python3-torchvision).
"""
import json
import operator
import os
import sys

import torch
import torch.fx
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zoo_common import dump_json  # noqa: E402

torch.set_num_threads(2)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS_DIR = os.path.join(ROOT, "models")
TRUTH_DIR = os.path.join(ROOT, "golden", "truth")


class ConversionError(Exception):
    pass


def _pair(v, what):
    """(3, 3) -> 3, (3, 5) -> [3, 5], 3 -> 3."""
    if isinstance(v, int):
        return v
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return v[0] if v[0] == v[1] else [v[0], v[1]]
    raise ConversionError("%s: expected an int or a pair of ints, got %r" % (what, v))


def _conv_attrs(m, qn):
    return {
        "in_channels": m.in_channels,
        "out_channels": m.out_channels,
        "kernel_size": _pair(m.kernel_size, qn + ".kernel_size"),
        "stride": _pair(m.stride, qn + ".stride"),
        "padding": _pair(m.padding, qn + ".padding"),
        "dilation": _pair(m.dilation, qn + ".dilation"),
        "groups": m.groups,
        "bias": m.bias is not None,
    }


def _conv2d(m, qn):
    if m.padding_mode != "zeros":
        raise ConversionError("%s: padding_mode %r not supported" % (qn, m.padding_mode))
    return _conv_attrs(m, qn)


def _convtranspose2d(m, qn):
    a = _conv_attrs(m, qn)
    a["output_padding"] = _pair(m.output_padding, qn + ".output_padding")
    return a


def _batchnorm(m, qn):
    if not m.track_running_stats:
        raise ConversionError("%s: track_running_stats=False not supported" % qn)
    return {"num_features": m.num_features, "eps": m.eps, "affine": m.affine}


def _layernorm(m, qn):
    ns = list(m.normalized_shape)
    return {"normalized_shape": ns[0] if len(ns) == 1 else ns, "eps": m.eps,
            "elementwise_affine": m.elementwise_affine}


def _inplace(m, qn):
    return {"inplace": m.inplace}


def _leaky(m, qn):
    return {"negative_slope": m.negative_slope, "inplace": m.inplace}


def _none(m, qn):
    return {}


def _gelu(m, qn):
    if m.approximate != "none":
        raise ConversionError("%s: GELU approximate=%r not supported" % (qn, m.approximate))
    return {}


def _maxpool2d(m, qn):
    if m.return_indices:
        raise ConversionError("%s: MaxPool2d return_indices=True not supported" % qn)
    return {
        "kernel_size": _pair(m.kernel_size, qn + ".kernel_size"),
        "stride": _pair(m.stride, qn + ".stride"),
        "padding": _pair(m.padding, qn + ".padding"),
        "dilation": _pair(m.dilation, qn + ".dilation"),
        "ceil_mode": m.ceil_mode,
    }


def _avgpool2d(m, qn):
    if m.divisor_override is not None:
        raise ConversionError("%s: AvgPool2d divisor_override not supported" % qn)
    return {
        "kernel_size": _pair(m.kernel_size, qn + ".kernel_size"),
        "stride": _pair(m.stride, qn + ".stride"),
        "padding": _pair(m.padding, qn + ".padding"),
        "ceil_mode": m.ceil_mode,
        "count_include_pad": m.count_include_pad,
    }


def _adaptiveavgpool2d(m, qn):
    os_ = m.output_size
    if isinstance(os_, (tuple, list)) and any(x is None for x in os_):
        raise ConversionError("%s: output_size with None not supported" % qn)
    return {"output_size": _pair(os_, qn + ".output_size")}


def _linear(m, qn):
    return {"in_features": m.in_features, "out_features": m.out_features,
            "bias": m.bias is not None}


def _dropout(m, qn):
    return {"p": m.p, "inplace": m.inplace}


def _flatten_mod(m, qn):
    return {"start_dim": m.start_dim, "end_dim": m.end_dim}


def _softmax(m, qn):
    if m.dim is None:
        raise ConversionError("%s: %s without dim not supported" % (qn, type(m).__name__))
    return {"dim": m.dim}


# Exact classes only: a subclass may change forward().
MODULES = {
    nn.Conv2d: _conv2d,
    nn.ConvTranspose2d: _convtranspose2d,
    nn.BatchNorm2d: _batchnorm,
    nn.BatchNorm1d: _batchnorm,
    nn.LayerNorm: _layernorm,
    nn.ReLU: _inplace,
    nn.ReLU6: _inplace,
    nn.SiLU: _inplace,
    nn.Hardswish: _inplace,
    nn.Hardsigmoid: _inplace,
    nn.LeakyReLU: _leaky,
    nn.GELU: _gelu,
    nn.Sigmoid: _none,
    nn.Tanh: _none,
    nn.Identity: _none,
    nn.MaxPool2d: _maxpool2d,
    nn.AvgPool2d: _avgpool2d,
    nn.AdaptiveAvgPool2d: _adaptiveavgpool2d,
    nn.Linear: _linear,
    nn.Dropout: _dropout,
    nn.Flatten: _flatten_mod,
    nn.Softmax: _softmax,
    nn.LogSoftmax: _softmax,
}

BINARY = {
    operator.add: "Add", torch.add: "Add",
    operator.sub: "Sub", torch.sub: "Sub",
    operator.mul: "Mul", torch.mul: "Mul",
    operator.truediv: "Div", torch.div: "Div",
}


def fx_to_json(model, name, input_name, input_shape, how):
    """Trace model with torch.fx and return the memest JSON graph as a dict."""
    gm = torch.fx.symbolic_trace(model)
    modules = dict(gm.named_modules())
    layer_of = {}   # fx node -> layer/input name it is referred to by
    latest = {}     # layer/input name -> fx node that defined it last
    layers = []
    inputs = []
    outputs = None
    prev = None     # fx node of the previous layer (or the first input)

    def ref(arg, where):
        if not isinstance(arg, torch.fx.Node):
            raise ConversionError("%s: expected a tensor argument, got %r" % (where, arg))
        if arg not in layer_of:
            raise ConversionError("%s: argument %s is not a layer" % (where, arg.name))
        lname = layer_of[arg]
        if latest[lname] is not arg:
            # the name now means a later call of the same module
            raise ConversionError("%s: reads an earlier call of %r, which a name "
                                  "reference cannot express" % (where, lname))
        return lname

    def add_layer(node, lname, ltype, srcs, attrs, where):
        nonlocal prev
        layer = {"name": lname, "type": ltype}
        refs = [ref(a, where) for a in srcs]
        implicit = prev is not None and len(srcs) == 1 and srcs[0] is prev
        if not implicit:
            layer["inputs"] = refs
        layer.update(attrs)
        layers.append(layer)
        layer_of[node] = lname
        latest[lname] = node
        prev = node

    for node in gm.graph.nodes:
        where = "fx node %s (%s %s)" % (node.name, node.op, getattr(node.target, "__name__", node.target))
        if node.op == "placeholder":
            if inputs:
                raise ConversionError("%s: only one graph input is handled" % where)
            inputs.append({"name": input_name, "shape": list(input_shape), "dtype": "float32"})
            layer_of[node] = input_name
            latest[input_name] = node
            prev = node
        elif node.op == "call_module":
            mod = modules[node.target]
            conv = MODULES.get(type(mod))
            if conv is None:
                raise ConversionError("%s: module type %s is not handled"
                                      % (where, type(mod).__name__))
            if len(node.args) != 1 or node.kwargs:
                raise ConversionError("%s: expected a single tensor argument" % where)
            add_layer(node, node.target, type(mod).__name__, [node.args[0]],
                      conv(mod, node.target), where)
        elif node.op == "call_function":
            fn = node.target
            if fn in BINARY:
                a, b = node.args[0], node.args[1]
                if node.kwargs or len(node.args) != 2:
                    raise ConversionError("%s: extra arguments (alpha=...) not handled" % where)
                if isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node):
                    add_layer(node, node.name, BINARY[fn], [a, b], {}, where)
                elif BINARY[fn] == "Mul" and isinstance(a, torch.fx.Node) and isinstance(b, (int, float)):
                    add_layer(node, node.name, "Scale", [a], {"factor": b, "functional": True}, where)
                elif BINARY[fn] == "Mul" and isinstance(b, torch.fx.Node) and isinstance(a, (int, float)):
                    add_layer(node, node.name, "Scale", [b], {"factor": a, "functional": True}, where)
                else:
                    raise ConversionError("%s: arguments %r not handled" % (where, node.args))
            elif fn is torch.flatten:
                args = list(node.args) + [None] * (3 - len(node.args))
                start = node.kwargs.get("start_dim", args[1] if args[1] is not None else 0)
                end = node.kwargs.get("end_dim", args[2] if args[2] is not None else -1)
                add_layer(node, node.name, "Flatten", [args[0]],
                          {"start_dim": start, "end_dim": end, "functional": True}, where)
            elif fn is torch.cat:
                tensors = node.args[0]
                dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
                if not isinstance(tensors, (list, tuple)):
                    raise ConversionError("%s: torch.cat of a non-list" % where)
                lname = node.name
                # all tensors are listed explicitly: Concat always names its inputs
                layer = {"name": lname, "type": "Concat",
                         "inputs": [ref(t, where) for t in tensors], "dim": dim}
                layers.append(layer)
                layer_of[node] = lname
                latest[lname] = node
                prev = node
            else:
                raise ConversionError("%s: function %s is not handled" % (where, fn))
        elif node.op == "output":
            out = node.args[0]
            if isinstance(out, (list, tuple)):
                outputs = [ref(o, where) for o in out]
            else:
                outputs = [ref(out, where)]
        else:
            raise ConversionError("%s: fx op %s is not handled" % (where, node.op))

    # names must be unique among layers that are referenced later; check that
    # the output refers to the last definition (ref() did that)
    return {
        "format": "memest-graph",
        "version": 1,
        "name": name,
        "how": how,
        "inputs": inputs,
        "layers": layers,
        "outputs": outputs,
    }


def dump_graph(g):
    lines = ["{"]
    keys = [k for k in g if k != "layers"]
    for k in keys[:keys.index("inputs") + 1]:
        lines.append(" %s: %s," % (json.dumps(k), json.dumps(g[k])))
    lines.append(' "layers": [')
    for i, layer in enumerate(g["layers"]):
        lines.append("  " + json.dumps(layer) + ("," if i + 1 < len(g["layers"]) else ""))
    lines.append(" ],")
    rest = keys[keys.index("inputs") + 1:]
    for i, k in enumerate(rest):
        lines.append(" %s: %s%s" % (json.dumps(k), json.dumps(g[k]), "," if i + 1 < len(rest) else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def leaf_shapes(model, x):
    model.eval()
    shapes = {}
    hooks = []
    for qname, mod in model.named_modules():
        if qname and not list(mod.children()):
            def hook(_m, _i, out, qname=qname):
                shapes[qname] = list(out.shape)
            hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        y = model(x)
    for h in hooks:
        h.remove()
    return list(y.shape), shapes


def seed_sequential():
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(inplace=True),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(64, 128, 3, padding=1))


def main():
    os.makedirs(MODELS_DIR, exist_ok=True)
    os.makedirs(TRUTH_DIR, exist_ok=True)
    how = "generated by tests/zoo/make_json.py from torchvision %s / torch %s" % (
        torchvision.__version__, torch.__version__)
    specs = [
        ("resnet18", lambda: torchvision.models.resnet18(weights=None), [3, 224, 224]),
        ("resnet50", lambda: torchvision.models.resnet50(weights=None), [3, 224, 224]),
        ("seed_sequential", seed_sequential, [3, 682, 700]),
    ]
    truth = {}
    for name, ctor, shape in specs:
        torch.manual_seed(0)
        model = ctor().eval()
        g = fx_to_json(model, name, "x", shape, how)
        path = os.path.join(MODELS_DIR, name + ".json")
        with open(path, "w") as f:
            f.write(dump_graph(g))
        json.load(open(path))  # round-trip check
        x = torch.randn(1, *shape, generator=torch.Generator().manual_seed(3))
        out_shape, mshapes = leaf_shapes(model, x)
        params = sum(p.numel() for p in model.parameters())
        truth[name] = {
            "how": "from PyTorch: params = sum(p.numel()), shapes from forward hooks "
                   "on leaf modules at batch 1 (last call); " + how,
            "params": params,
            "output_shape": out_shape,
            "module_shapes": mshapes,
        }
        print("wrote %s (%d layers, params %d, output %s)"
              % (os.path.relpath(path, ROOT), len(g["layers"]), params, out_shape))
    tpath = os.path.join(TRUTH_DIR, "json_models.json")
    with open(tpath, "w") as f:
        f.write(dump_json(truth))
    print("wrote %s" % os.path.relpath(tpath, ROOT))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ConversionError as e:
        sys.exit("make_json.py: cannot convert: %s" % e)
