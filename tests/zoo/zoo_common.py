"""Helpers the truth scripts share (export_zoo.py, export_zoo2.py,
make_json.py): JSON as the golden files keep it, parameter counts, output
shapes, and graph-only ONNX files."""
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
