#!/usr/bin/python3
"""Writes zoo exports in the layout of torch.onnx's torch.export-based
exporter (torch.onnx.export(..., dynamo=True), its default since torch 2.9),
which Debian's torch 1.13 does not have, for tests/test_dynamo_layout.py.

What that exporter writes (torch/onnx/_internal/exporter/_core.py,
_set_node_metadata and the graph signature; checked against a file torch
2.9.0 wrote): node names are the FX node's ("node_conv2d"), not a module
path, and each node carries metadata_props (NodeProto field 9, ONNX >= 1.16)
    namespace                      ": pkg.Net/layer1: torch...Sequential/.../conv2d: aten.conv2d.default"
    pkg.torch.onnx.class_hierarchy "['pkg.Net', 'torch.nn.modules.container.Sequential', ..., 'aten.conv2d.default']"
    pkg.torch.onnx.name_scopes     "['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d']"
(the modules of the node's nn_module_stack by qualified name, root first,
then the FX node's name: a module called twice appears twice under one
name; a ModuleList iterated by its parent never appears); ModelProto's
metadata_props holds the ExportedProgram's graph signature
    "# inputs\\np_conv1_weight: PARAMETER target='conv1.weight'\\n
     b_bn1_running_mean: BUFFER target='bn1.running_mean' persistent=True\\n
     x: USER_INPUT\\n\\n# outputs\\nlinear: USER_OUTPUT\\n"
and each stored tensor a value_info whose metadata_props (ValueInfoProto
field 4) repeat its kind.

What this script does not reproduce: the ops. It rewrites a TorchScript
export (models/onnx/variants/*_train_dynamic.onnx: no constant folding, so
stored tensors keep their state_dict names), whose node names give each
node's module path: "/layer1/layer1.0/relu_1/Relu" is the second call of
layer1.0.relu. The rewritten file keeps every op, value and stored tensor
and spells those facts the new exporter's way, from the PyTorch module
tree (tests/zoo/models.py): the memory PyTorch allocates is the same model's,
so memest must give the same figures for both files. The torch.export
exporter's own op spellings (its decompositions, opset 18 and later) need
files that torch >= 2.9 wrote; this does not test them.

Usage (repo root): /usr/bin/python3 tests/zoo/dynamo_layout.py
"""
import os
import re
import sys

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from models import MODELS  # noqa: E402

SRC = os.path.join(ROOT, "models", "onnx", "variants")
OUT = os.path.join(ROOT, "models", "onnx", "dynamo")
# model -> its TorchScript training export (dynamic batch)
FILES = {
    "resnet18": "resnet18__op13_train_dynamic.onnx",       # self.relu called twice a block
    "vit_b_16": "vit_b_16__op13_train_dynamic.onnx",       # nn.MultiheadAttention, encoder Sequential
    "whisper_encoder": "whisper_encoder__op13_train_dynamic.onnx",  # a register_buffer position table
    "gpt2_hf": "gpt2_hf__op13_train_dynamic.onnx",         # an iterated ModuleList (h), tied head
    "diffusion_unet": "diffusion_unet__op13_train_dynamic.onnx",  # loops that keep skips
    "llama_like": "llama_like__op14_train_dynamic.onnx",   # RMSNorm, RoPE, GQA
}


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(num, payload):
    return _varint((num << 3) | 2) + _varint(len(payload)) + payload


def _entries(field, props):
    """metadata_props entries (StringStringEntryProto: key 1, value 2) as
    field `field` of their message: Debian's onnx 1.12 has no such field on
    NodeProto or ValueInfoProto, so they are merged in as wire bytes, which
    protobuf keeps as unknown fields and writes back."""
    return b"".join(_field(field, _field(1, k.encode()) + _field(2, v.encode())) for k, v in props)


def _qual(cls):
    return cls.__module__ + "." + cls.__qualname__


def resolve(path, rel, modules):
    """The qualified name of module rel below path. TorchScript names a
    module below the nearest module that was called ("/wte/Gather" for
    self.transformer.wte when forward reads self.transformer without calling
    it); nn_module_stack names it in full ("transformer.wte")."""
    full = path + "." + rel if path else rel
    if full in modules:
        return full
    found = [p for p in modules if p.endswith("." + rel) and (not path or p.startswith(path + "."))]
    return found[0] if len(found) == 1 else None


def module_stack(name, modules):
    """The module paths of a TorchScript node name, outermost first."""
    segs = [s for s in name.split("/")[1:-1] if s]
    path, prev, stack = "", None, []
    for seg in segs:
        led = prev is not None and seg.startswith(prev + ".") and len(seg) > len(prev) + 1
        rel = seg[len(prev) + 1:] if led else seg
        full = resolve(path, rel, modules)
        if full is None:
            m = re.match(r"(.*)_(\d+)$", rel)  # a later call of the module: "relu_1"
            full = resolve(path, m.group(1), modules) if m else None
            if full is None:
                raise SystemExit("%s: no module %r in the model" % (name, rel))
        stack.append(full)
        path, prev = full, seg
    return stack


def convert(model, src, dst):
    m = onnx.load(src, load_external_data=False)
    modules = dict(model.named_modules())
    counts = {}
    for node in m.graph.node:
        stack = module_stack(node.name, modules) if node.name.startswith("/") else []
        op = node.op_type.lower()
        k = counts.get(op, 0)
        counts[op] = k + 1
        fx = op if not k else "%s_%d" % (op, k)
        target = "aten.%s.default" % op
        if node.name.startswith("/"):
            scopes = [""] + stack + [fx]
            classes = [_qual(type(model))] + [_qual(type(modules[p])) for p in stack] + [target]
            namespace = "/".join("%s: %s" % (p, c) for p, c in zip(scopes, classes))
        else:  # no module stack: the exporter writes the FX node alone
            scopes, classes, namespace = [fx], [target], "%s: %s" % (fx, target)
        node.name = "node_" + fx
        node.MergeFromString(_entries(9, [("namespace", namespace),
                                          ("pkg.torch.onnx.class_hierarchy", repr(classes)),
                                          ("pkg.torch.onnx.name_scopes", repr(scopes))]))
    inits = {t.name: t for t in m.graph.initializer}
    params = [n for n, _ in model.named_parameters() if n in inits]
    buffers = [n for n, _ in model.named_buffers() if n in inits]
    lines = ["# inputs"]
    kinds = {}
    for n in params:
        lines.append("p_%s: PARAMETER target='%s'" % (n.replace(".", "_"), n))
        kinds[n] = "PARAMETER"
    for n in buffers:
        lines.append("b_%s: BUFFER target='%s' persistent=True" % (n.replace(".", "_"), n))
        kinds[n] = "BUFFER"
    lines += ["%s: USER_INPUT" % i.name for i in m.graph.input if i.name not in inits]
    lines += ["", "# outputs"] + ["%s: USER_OUTPUT" % o.name for o in m.graph.output]
    for n, kind in kinds.items():
        t = inits[n]
        vi = onnx.helper.make_tensor_value_info(n, t.data_type, list(t.dims))
        vi.MergeFromString(_entries(4, [("pkg.torch.export.graph_signature.InputSpec.kind", kind),
                                        ("pkg.torch.onnx.original_node_name", "p_" + n.replace(".", "_"))]))
        m.graph.value_info.append(vi)
    p = m.metadata_props.add()
    p.key, p.value = "pkg.torch.export.ExportedProgram.graph_signature", "\n".join(lines) + "\n"
    # the producer stays the source's (pytorch 1.13.0): the ops are torch
    # 1.13's, and a producer_version of 2 or later makes memest follow
    # torch 2's code (memest_model_torch), as a real 2.9 file does
    m.producer_name, m.producer_version = "pytorch", onnx.load(src, load_external_data=False).producer_version
    onnx.save(m, dst)
    return len(params), len(buffers)


def main():
    import torch
    os.makedirs(OUT, exist_ok=True)
    for name, f in FILES.items():
        torch.manual_seed(0)
        model = MODELS[name][0]()
        np_, nb = convert(model, os.path.join(SRC, f), os.path.join(OUT, name + ".onnx"))
        print(name, "written:", np_, "parameters,", nb, "buffers in the signature")


if __name__ == "__main__":
    main()
