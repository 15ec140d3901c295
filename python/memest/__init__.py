"""memest from Python: pass a torch.nn.Module, get the report.

    import memest, torchvision
    r = memest.estimate(torchvision.models.resnet50(), input_size=(3, 224, 224),
                        batch=32, mode="train", optimizer="adam", gpu="a100-80gb")
    print(r)                      # the table and memory summary
    r.memory.peak, r.memory.at_peak, r.max_batch(), r.plot("timeline.png")

The library (libmemest.so) is found from $MEMEST_LIBRARY, the meson build
recorded when the package was installed, the checkout's build/ folder, or
an installed prefix. torch is imported only by estimate() and export().
"""
from ._export import ExportError, Exported, export, newest_opset
from ._lib import library_path
from .core import (CheckResult, Gpu, MaxBatchResult, MemestError, Memory, MemoryStep, Model, Report, gpu, gpus,
                   version)

__all__ = ["estimate", "export", "Exported", "ExportError", "Model", "Report", "Memory", "MemoryStep",
           "MaxBatchResult", "CheckResult", "MemestError", "Gpu", "gpu", "gpus", "version", "library_path",
           "newest_opset"]


def estimate(model, input_size=None, example_inputs=None, batch=None, mode="infer", optimizer=None, amp=None,
             loss=None, checkpoint=None, freeze=None, runtime="cuda", gpu=None, convention="default",
             input_grad=False, dtype=None, gpus=1, shard=None, strict=False, opset=None, progress=None, torch=None):
    """Exports model (a torch.nn.Module, or an Exported from memest.export)
    to ONNX in memory, loads it through the library and analyzes it: a
    Report.

    input_size: one sample's shape, (3, 224, 224), a list of them for
        several inputs, or specs as the command's --input
        ('input_ids=128:int64'); or example_inputs: a tensor or tuple of
        tensors whose first dim is the batch.
    batch: the batch analyzed (default 1, or example_inputs' batch).
    mode: 'infer' (no_grad), 'grad' (autograd on) or 'train' (forward,
        loss, backward, optimizer step); optimizer ('sgd', 'momentum',
        'adam', 'adamw', 'adagrad', 'rmsprop', 'none', 'adafactor',
        'adamw8bit', 'paged_adamw', 'paged_adamw8bit'), loss
        ('cross-entropy', 'mse', 'mean', 'sum', 'none') and checkpoint ('sqrt' or N segments) with
        'train'.
    amp: 'fp16'/'bf16' (torch.autocast); dtype: the same by conversion
        (model.half()).
    freeze: module-name patterns (glob or dotted prefix) trained without
        gradients; parameters with requires_grad=False are frozen too.
    runtime: 'cuda' or 'cpu' (what PyTorch allocates inside ops).
    gpu: a name ('a100-80gb', memest.gpus()), a size ('24GiB') or a Gpu:
        fits, headroom, roofline time; gpus/shard: data parallelism.
    progress: a progress line on stderr (default: when it is a terminal).
    torch: '1.13' (default) or '2', whose code the timeline follows where
        they differ (2: nn.MultiheadAttention runs scaled_dot_product_attention,
        a mean over dims saves no input; foreach on CUDA by default, one list
        in Adam's update); an error where it changes nothing.
    """
    ex = model if isinstance(model, Exported) else export(model, input_size, example_inputs, opset, progress)
    if batch is None:
        batch = ex.batch or 1
    m = Model.load(ex.data, inputs=ex.inputs, batch=batch, dtype=dtype, name=ex.name)
    patterns = [freeze] if isinstance(freeze, str) else list(freeze or [])
    for p in patterns + [n for n in ex.frozen if not any(_covers(p, n) for p in patterns)]:
        m.freeze(p)
    r = m.analyze(convention=convention, strict=strict, mode=mode, optimizer=optimizer, loss=loss, runtime=runtime,
                  checkpoint=checkpoint, input_grad=input_grad, amp=amp, gpu=gpu, gpus=gpus, shard=shard, torch=torch)
    r.exported = ex
    return r


def _covers(pattern, name):
    return name == pattern or name.startswith(pattern + ".")
