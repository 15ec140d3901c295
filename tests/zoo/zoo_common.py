"""Helpers the truth scripts share (export_zoo.py, export_zoo2.py,
make_json.py, tests/oracle/measure_memory.py, tests/measure/pytorch_cuda.py):
JSON as the golden files keep it, parameter counts, output shapes, random
inputs, the tensor a loss reads, and graph-only ONNX files."""
import json
import os
import re

SIZE_THRESHOLD = 1024  # tensors above this many bytes go to the (deleted) data file


def dump_json(obj):
    """json.dumps with indent 1, but lists of numbers kept on one line."""
    text = json.dumps(obj, indent=1)

    def one_line(m):
        items = [x.strip() for x in m.group(1).split(",") if x.strip()]
        return "[" + ", ".join(items) + "]"
    return re.sub(r"\[([-0-9.e,\s]*)\]", one_line, text) + "\n"


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def shape_list(t):
    """Shapes of a tensor, or of a (nested) tuple or list of them."""
    import torch
    if isinstance(t, torch.Tensor):
        return list(t.shape)
    if isinstance(t, (tuple, list)):
        return [shape_list(x) for x in t]
    raise TypeError("unexpected output type %s" % type(t))


def random_inputs(spec, batch, seed, vocab):
    """One batch for [(name, shape, dtype)] (dtype a torch dtype or its
    name): floats from randn, integers (token ids) uniform in [0, vocab),
    all from one generator seeded with seed, in input order."""
    import torch
    g = torch.Generator().manual_seed(seed)
    xs = []
    for _, shape, dtype in spec:
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype)
        shp = (batch,) + tuple(shape)
        if dtype.is_floating_point:
            xs.append(torch.randn(shp, generator=g, dtype=dtype))
        else:
            xs.append(torch.randint(0, vocab, shp, generator=g, dtype=dtype))
    return xs


def first_tensor(out):
    """The tensor a loss reads: a model's output, or the first one of a
    tuple, list or dict of them, or a HuggingFace-style .logits."""
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return first_tensor(out[0])
    if hasattr(out, "logits"):
        return out.logits
    raise TypeError(type(out))


def make_graph_only(src, dst):
    """Re-save src as dst with big tensors external, then delete the data
    file; returns the bytes the weights took."""
    import onnx
    m = onnx.load(src)
    loc = os.path.splitext(os.path.basename(dst))[0] + ".data"
    data_path = os.path.join(os.path.dirname(dst), loc)
    for p in (dst, data_path):
        if os.path.exists(p):
            os.remove(p)
    onnx.save_model(m, dst, save_as_external_data=True,
                    all_tensors_to_one_file=True, location=loc,
                    size_threshold=SIZE_THRESHOLD)
    data_size = os.path.getsize(data_path) if os.path.exists(data_path) else 0
    if os.path.exists(data_path):
        os.remove(data_path)
    return data_size


def export_graph_only(model, x, dst, train, opset=17, dynamic=True):
    """torch.onnx.export of model on x (a dynamic batch, or x's own when
    not dynamic; a training export without constant folding when train,
    else torch.onnx's default eval export), written graph-only to dst."""
    import tempfile
    import torch
    kw = dict(opset_version=opset, input_names=["input"], output_names=["output"])
    if dynamic:
        kw["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
    if train:
        kw.update(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, os.path.basename(dst))
        torch.onnx.export(model, (x,), full, **kw)
        make_graph_only(full, dst)
