#!/usr/bin/python3
"""PyTorch's no_grad peak of the zoo's Whisper-style encoder with some of
its layer's Python names dropped (issue 10, helper whisper).

Usage: /usr/bin/python3 tests/oracle/measure_whisper_unnamed.py [--out FILE]

tests/zoo/models.py's WhisperLayer binds h, q, k, v, the attention
probabilities w and o to names; CPython frees a frame's locals when it
returns, so under no_grad each outlives its last reader until the layer
returns. An ONNX export cannot show which values the source named.
memest takes the names every Python attention binds (q, k, v and the
weights: canon/attn.c) and o (a container's functional result that a child
reads: doc/memory.md, "Python holds"); h, the layer norm's result the
projections read, is the zoo's own name, which HF's layer re-binds.
Each layer here runs the same ops on the same weights (the zoo's model,
seed 0, the layers' class swapped), in two variants:
  infer_nograd          h deleted after its last reader, the rest kept
                        (what memest's rules describe)
  unnamed_infer_nograd  h, q, k, v and w deleted after their last reader
                        (the rules before canon/attn.c)
beside the named model (named_infer_nograd), each measured with
tests/oracle/measure_memory.py's method (its run_infer: the profiler's
allocation events, same seeds, 2 threads) and written to
golden/truth/whisper/unnamed.json.
"""
import argparse
import datetime
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure_memory as mm  # noqa: E402  (sets 2 threads, puts tests/zoo on the path)
import models as zoo  # noqa: E402


def projections(layer, x):
    """The zoo's layer's q, k and v; h, the layer norm's result, dies when
    this returns (after its last reader, v_proj)."""
    b, s, _ = x.shape
    h = layer.self_attn_layer_norm(x)
    q = (layer.q_proj(h) * layer.hd ** -0.5).view(b, s, layer.heads, layer.hd).transpose(1, 2)
    k = layer.k_proj(h).view(b, s, layer.heads, layer.hd).transpose(1, 2)
    v = layer.v_proj(h).view(b, s, layer.heads, layer.hd).transpose(1, 2)
    return q, k, v


class UnnamedLayer(zoo.WhisperLayer):
    """h, q, k, v and w deleted after their last reader."""
    def forward(self, x):
        q, k, v = projections(self, x)
        w = torch.matmul(q, k.transpose(2, 3))
        del q, k
        w = torch.softmax(w, dim=-1)  # the re-bound name frees the scores as a temporary is
        o = torch.matmul(w, v)
        del w, v
        o = o.transpose(1, 2).reshape(x.shape)
        x = x + self.out_proj(o)
        return x + self.fc2(self.act(self.fc1(self.final_layer_norm(x))))


class AttnNamedLayer(zoo.WhisperLayer):
    """The zoo's layer with only h deleted after its last reader."""
    def forward(self, x):
        q, k, v = projections(self, x)
        w = torch.softmax(torch.matmul(q, k.transpose(2, 3)), dim=-1)
        o = torch.matmul(w, v).transpose(1, 2).reshape(x.shape)
        x = x + self.out_proj(o)
        return x + self.fc2(self.act(self.fc1(self.final_layer_norm(x))))


def swapped(cls):
    def make():
        m = zoo.WhisperEncoder()
        for layer in m.layers:
            layer.__class__ = cls
        return m
    return make


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(mm.ROOT, "golden", "truth", "whisper", "unnamed.json"))
    a = ap.parse_args()
    ctor, spec = zoo.MODELS["whisper_encoder"]
    batches = {}
    for b in (1, 8):
        cells = {}
        for tag, make in (("infer_nograd", swapped(AttnNamedLayer)), ("unnamed_infer_nograd", swapped(UnnamedLayer)),
                          ("named_infer_nograd", ctor)):
            mm.ZOO["whisper_encoder"] = (make, spec)
            r, _ = mm.run_infer("whisper_encoder", spec, b, "infer_nograd")
            cells[tag] = {k: r[k] for k in ("peak", "peak_relative", "baseline", "end")}
            cells[tag]["counter_check_agrees"] = r["counter_check"]["agrees"]
        cells["measured"] = datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
        batches[str(b)] = cells
        print("b%d: h unnamed %d, unnamed %d, named %d" % (b, cells["infer_nograd"]["peak"], cells["unnamed_infer_nograd"]["peak"],
                                                         cells["named_infer_nograd"]["peak"]))
    out = {
        "what": "no_grad peak of tests/zoo/models.py's whisper_encoder with each layer's h deleted after its "
                "last reader (same ops, same weights); unnamed_infer_nograd: h, q, k, v and w deleted; "
                "named_infer_nograd: the model as written",
        "how": "tests/oracle/measure_whisper_unnamed.py: tests/oracle/measure_memory.py's run_infer "
               "(profiler allocation events, torch.manual_seed(0) model, seed 1 inputs, 2 threads)",
        "torch": torch.__version__, "device": "cpu", "model": "whisper_encoder",
        "inputs": [{"name": n, "shape": list(s), "dtype": str(dt).replace("torch.", "")} for n, s, dt in spec],
        "batches": batches,
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
