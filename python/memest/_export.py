"""torch.nn.Module -> ONNX bytes in memory, exported the way the zoo files
were (tests/zoo/export_zoo2.py): training-mode export so BatchNorm and
Dropout stay in the graph, no constant folding, the newest opset this
torch writes, a dynamic batch axis on every input and output, and torch's
module scopes in node names (/layer1/layer1.0/conv1/Conv), from which the
library names the report's rows."""
import io
import re
import warnings

from ._progress import Progress

EXPORT_BATCH = 2  # traced at batch 2, so nothing specialises on batch 1


class ExportError(RuntimeError):
    """torch.onnx.export failed; .module and .op say where when known."""

    def __init__(self, message, module=None, op=None):
        super().__init__(message)
        self.module, self.op = module, op


def newest_opset():
    import torch.onnx
    try:
        from torch.onnx import _constants
        return int(_constants.ONNX_MAX_OPSET)
    except (ImportError, AttributeError):  # another torch: its default
        return int(getattr(torch.onnx, "_constants").ONNX_DEFAULT_OPSET)


def parse_spec(spec):
    """'[NAME=]D0xD1...[:DTYPE]' -> (name or None, shape tuple, dtype name)."""
    name, _, rest = spec.rpartition("=")
    shape, _, dtype = rest.partition(":")
    try:
        dims = tuple(int(d) for d in shape.split("x"))
    except ValueError:
        raise ValueError("input %r: expected [NAME=]SHAPE[:DTYPE], e.g. 3x224x224 or input_ids=128:int64"
                         % spec) from None
    return name or None, dims, dtype or "float32"


class Exported:
    """An ONNX export of a module: the bytes, its input specs (one sample
    each, batch prepended by the library) and the module's facts."""

    def __init__(self, data, inputs, name, params, frozen, opset, batch):
        self.data, self.inputs, self.name = data, inputs, name
        self.params, self.frozen, self.opset, self.batch = params, frozen, opset, batch

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.data)


def _dummy(torch, shape, dtype, device):
    dt = getattr(torch, dtype, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError("input dtype %r: not a torch dtype" % dtype)
    if dt.is_floating_point:
        return torch.randn((EXPORT_BATCH,) + shape, dtype=dt, device=device)
    return torch.zeros((EXPORT_BATCH,) + shape, dtype=dt, device=device)  # index 0 is valid for any embedding


def _inputs(torch, input_size, example_inputs, like):
    """like: a parameter of the module (its device, and its float dtype for
    shapes given without one: a model.half() takes half inputs)."""
    """Tensors to trace with, and the per-sample specs to bind."""
    if example_inputs is not None:
        xs = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
        if not xs or not all(isinstance(x, torch.Tensor) and x.dim() >= 1 for x in xs):
            raise TypeError("example_inputs: expected a tensor or a tuple of tensors with a batch dimension")
        batch = int(xs[0].shape[0])
        # traced at batch 2 (a batch of 1 lets the tracer specialise on it)
        xs = tuple(torch.cat([x] * EXPORT_BATCH)[:EXPORT_BATCH] if x.shape[0] < EXPORT_BATCH else x for x in xs)
        specs = [(None, tuple(x.shape[1:]), str(x.dtype).replace("torch.", "")) for x in xs]
        return xs, specs, batch
    if input_size is None:
        raise TypeError("estimate: give input_size=(3, 224, 224) (one sample, no batch) or example_inputs=")
    if isinstance(input_size, str) or (isinstance(input_size, (tuple, list)) and input_size
                                       and all(isinstance(d, int) for d in input_size)):
        input_size = [input_size]
    specs = []
    for s in input_size:
        if isinstance(s, str):
            specs.append(parse_spec(s))
        elif isinstance(s, (tuple, list)) and all(isinstance(d, int) and d > 0 for d in s):
            fdt = like.dtype if like is not None and like.is_floating_point() else torch.float32
            specs.append((None, tuple(s), str(fdt).replace("torch.", "")))
        else:
            raise ValueError("input_size: %r is not a shape such as (3, 224, 224) nor a spec such as "
                             "'input_ids=128:int64'" % (s,))
    device = like.device if like is not None else None
    return tuple(_dummy(torch, shape, dt, device) for _, shape, dt in specs), specs, None


def _frozen_modules(module):
    """Modules whose own parameters all have requires_grad False: frozen the
    way PyTorch users freeze, passed to the library as exact names."""
    out = []
    for name, m in module.named_modules():
        own = list(m.parameters(recurse=False))
        if name and own and not any(p.requires_grad for p in own):
            out.append(name)
    return out


_OP = re.compile(r"(aten::[A-Za-z0-9_.]+|prim::[A-Za-z0-9_]+|onnx::[A-Za-z0-9_]+)")


def export(module, input_size=None, example_inputs=None, opset=None, progress=None):
    """Exports module (not changed: training flags, buffers and the RNG
    are restored) to ONNX bytes; an Exported."""
    import torch
    if not isinstance(module, torch.nn.Module):
        raise TypeError("expected a torch.nn.Module, not %s" % type(module).__name__)
    opset = opset or newest_opset()
    xs, specs, batch = _inputs(torch, input_size, example_inputs, next(module.parameters(), None))
    names = [n or ("input" if len(specs) == 1 else "input_%d" % i) for i, (n, _, _) in enumerate(specs)]
    inputs = ["%s=%s:%s" % (n, "x".join(map(str, shape)), dt) for n, (_, shape, dt) in zip(names, specs)]
    bar = Progress(progress)
    cls = type(module).__name__
    # where the trace is: a stack of module names, by hooks
    qual = {m: n for n, m in module.named_modules()}
    stack, seen, hooks = [], set(), []
    total = len(qual)

    def pre(m, _args):
        stack.append(m)
        seen.add(m)
        bar.say("exporting %s: tracing %s (%d of %d modules)" % (cls, qual.get(m) or cls, len(seen), total))

    def post(m, _args, _out):
        if stack and stack[-1] is m:
            stack.pop()
    for m in qual:
        hooks.append(m.register_forward_pre_hook(pre))
        hooks.append(m.register_forward_hook(post))
    flags = [(m, m.training) for m in qual]
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    f = io.BytesIO()
    try:
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(5)
            try:
                module.train()
                _run_export(torch, module, xs, f, names, opset, torch.onnx.TrainingMode.TRAINING)
            except Exception as first:  # noqa: BLE001 - as export_zoo2.py: stochastic depth (Bernoulli)
                if stack or "Bernoulli" not in str(first) and "bernoulli" not in str(first):
                    raise
                stack.clear()
                module.eval()
                f = io.BytesIO()
                _run_export(torch, module, xs, f, names, opset, torch.onnx.TrainingMode.PRESERVE)
    except Exception as e:  # noqa: BLE001 - re-raised with where and what to try
        mod = stack[-1] if stack else None
        op = _OP.search(str(e))
        if mod is None and op:  # failed converting the trace: which module called the op
            mod = _locate(torch, module, xs, op.group(1), qual)
        raise _export_error(e, cls, qual.get(mod), mod, opset, example_inputs is not None) from e
    finally:
        for h in hooks:
            h.remove()
        for m, t in flags:
            m.training = t
        with torch.no_grad():
            for b, v in buffers:
                b.copy_(v)
        bar.done()
    params = sum(p.numel() for p in module.parameters())
    return Exported(f.getvalue(), inputs, cls, params, _frozen_modules(module), opset, batch)


def _locate(torch, module, xs, op, qual):
    """The innermost module whose forward called op ('aten::linalg_inv'),
    found by running the module once more under a TorchFunctionMode."""
    from torch.overrides import TorchFunctionMode
    tail = op.split("::")[-1]
    stack, found, hooks = [], [], []

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            if not found and stack and name and (name == tail or name.lstrip("_") == tail.lstrip("_")):
                found.append(stack[-1])
            return func(*args, **(kwargs or {}))
    def pre(m, _args):
        stack.append(m)

    def post(_m, _args, _out):  # returns None: a hook's result would replace the output
        stack.pop()
    for m in qual:
        hooks.append(m.register_forward_pre_hook(pre))
        hooks.append(m.register_forward_hook(post))
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]), Spy():
            module(*xs)
    except Exception:  # noqa: BLE001 - only a hint for the message
        pass
    finally:
        for h in hooks:
            h.remove()
    return found[0] if found and found[0] is not module else None


def _run_export(torch, module, xs, f, names, opset, training):
    dyn = {n: {0: "batch"} for n in names + ["output"]}
    # An eval-mode export merges initializers of equal value (a fresh
    # model's BatchNorm weights are all ones), which would count distinct
    # parameters once; keep only the merging of tensors really shared (tied
    # weights), as a training-mode export does.
    dedup = getattr(torch._C, "_jit_pass_onnx_deduplicate_initializers", None)
    if dedup is not None:
        torch._C._jit_pass_onnx_deduplicate_initializers = lambda g, p, _is_train: dedup(g, p, True)
    try:
        torch.onnx.export(module, tuple(xs), f, input_names=names, output_names=["output"], dynamic_axes=dyn,
                          opset_version=opset, training=training, do_constant_folding=False, verbose=False)
    finally:
        if dedup is not None:
            torch._C._jit_pass_onnx_deduplicate_initializers = dedup


def _export_error(e, cls, where, mod, opset, had_examples):
    msg = str(e).strip().splitlines()
    first = msg[0] if msg else type(e).__name__
    op = _OP.search(str(e))
    op = op.group(1) if op else None
    if where is None and op is None:
        place = "exporting %s" % cls
    else:
        place = "exporting %s: %s%s" % (
            cls, "module '%s' (%s)" % (where, type(mod).__name__) if where else "",
            ("%sop %s" % (", " if where else "", op)) if op else "")
    tips = ["another opset (opset=%d now; torch writes %s)" % (opset, "7..%d" % newest_opset())]
    if not had_examples:
        tips.append("example_inputs= with real inputs (token ids, masks, several inputs)")
    tips.append("or export yourself and load the file: memest.Model.load(path)")
    return ExportError("%s failed: %s: %s\ntry %s" % (place, type(e).__name__, first, "; ".join(tips)), where, op)
