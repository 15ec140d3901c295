"""Reimplement four peer tools' counting rules and record their totals as truth.

Run as:  /usr/bin/python3 tests/zoo/peer_conventions.py [--out golden/truth/conventions.json]

Debian's python3-torch 1.13 / python3-torchvision 0.14. None of the peer tools
(fvcore, ptflops, thop, DeepSpeed) is installed; each one's rules are written
out below from its source (see doc/conventions-peers.md for the rule tables and
the commits read) and applied to torchvision models:

* fvcore      -- the model is traced with torch.jit._get_trace_graph, exactly as
                 fvcore's JitModelAnalysis does, and fvcore's default handle table
                 is applied to the aten:: nodes of the trace.  A second, independent
                 aten-level count (TorchDispatchMode) must give the same total.
* ptflops     -- pytorch backend: forward hooks on modules by exact type, plus the
                 torch.nn.functional / torch tensor-op patching that 0.7.x switches
                 on by default (count_functional=True).
* thop        -- forward hooks on modules by exact type, dfs over the module tree.
* deepspeed   -- monkeypatched torch.nn.functional and tensor methods, attributed
                 to the innermost running module via pre/post forward hooks.

Models: resnet18, resnet50, vgg16, mobilenet_v2 (weights=None, eval, 1x3x224x224),
plus alexnet as a cross-check against figures the tools publish for it.
"""
import argparse
import collections
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

torch.set_num_threads(2)

MODELS = ["resnet18", "resnet50", "vgg16", "mobilenet_v2"]
CHECK_MODELS = ["alexnet"]

SOURCES = {
    "fvcore": "facebookresearch/fvcore@052545c4885655bdc3ab5c7613ddba903751e308 fvcore/nn/flop_count.py; "
              "@017141c42f50a0328182c1fd42b1de80c3a58efe fvcore/nn/jit_handles.py; "
              "@943ce7187bf5fbad1e11db631f34350ae092027d fvcore/nn/jit_analysis.py",
    "ptflops": "sovrasov/flops-counter.pytorch@b5c9ef779a02c5fd4e611a20dba31548fdc8e69b ptflops/pytorch_ops.py "
               "(identical to release 0.7.2.2/0.7.3); @a116899af8835e4b73c88c82d1228802ee2a88fe "
               "ptflops/pytorch_engine.py (0.7.2.2/0.7.3); 0.7.3->0.7.4 adds backend_specific_config "
               "{'count_functional': True by default} and makes 'aten' the default backend",
    "thop": "Lyken17/pytorch-OpCounter@9e106f34e10bc8ecd3cbdc17d26fa6f1a1bfe728 thop/vision/basic_hooks.py; "
            "@8f115d4aeaee787d7347b75f30be28164b02ccaa thop/vision/calc_func.py; profile.py register_hooks "
            "as in thop 0.1.x (count_normalization, ReLU/MaxPool zero_ops); checked against "
            "ultralytics/thop@0174ddf17cacd91c4efad931f622e8f8fdec3435 basic_hooks.py and "
            "@011490cdd975e82a66dd1f52de00b3fcb14544db profile.py (same totals for these models)",
    "deepspeed": "deepspeedai/DeepSpeed@4071a9100fe06fce91457ff5593eceb929bcfc6b "
                 "deepspeed/profiling/flops_profiler/profiler.py",
}


def prod(xs):
    p = 1
    for v in xs:
        p *= int(v)
    return p


def build(name):
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    m.eval()
    return m


# =============================================================================
# fvcore: jit trace + default handles
# =============================================================================

def _shape(v):
    return list(v.type().sizes()) if v.isCompleteTensor() else None


def _fv_addmm(i, o):
    (b, k), (_, n) = _shape(i[1]), _shape(i[2])
    return b * k * n


def _fv_linear(i, o):
    x, w = _shape(i[0]), _shape(i[1])
    return prod(x) * w[0]


def _fv_bmm(i, o):
    n, c, t = _shape(i[0])
    return n * c * t * _shape(i[1])[-1]


def _fv_matmul(i, o):
    a, b = _shape(i[0]), _shape(i[1])
    return prod(a) * b[-1]


def _fv_conv(i, o):
    x, w, y = _shape(i[0]), _shape(i[1]), _shape(o[0])
    transposed = i[6].toIValue()
    conv_shape = (x if transposed else y)[2:]
    return x[0] * prod(w) * prod(conv_shape)


def _fv_norm(affine_idx):
    def h(i, o):
        has_affine = _shape(i[affine_idx]) is not None
        return prod(_shape(i[0])) * (5 if has_affine else 4)
    return h


def _fv_batchnorm(i, o):
    training = i[5].toIValue()
    if training:
        return _fv_norm(1)(i, o)
    has_affine = _shape(i[1]) is not None
    return prod(_shape(i[0])) * (2 if has_affine else 1)


def _fv_elementwise(in_scale, out_scale):
    def h(i, o):
        r = 0
        if in_scale:
            r += in_scale * prod(_shape(i[0]))
        if out_scale:
            r += out_scale * prod(_shape(o[0]))
        return r
    return h


def _fv_einsum(i, o):
    eq = i[0].toIValue().replace(" ", "")
    shapes = [_shape(v) for v in i[1].node().inputs()]
    letters = collections.OrderedDict((k, 0) for k in eq if k.isalpha()).keys()
    eq = eq.translate({ord(x): 97 + n for n, x in enumerate(letters)})
    if eq == "abc,abd->acd":
        n, c, t = shapes[0]
        return n * c * t * shapes[-1][-1]
    if eq == "abc,adc->adb":
        n, t, g = shapes[0]
        return n * t * g * shapes[-1][1]
    path = np.einsum_path(eq, *[np.zeros(s) for s in shapes], optimize="optimal")[1]
    for line in path.split("\n"):
        if "optimized flop" in line.lower():
            return float(np.floor(float(line.split(":")[-1]) / 2))
    raise NotImplementedError(eq)


# handle -> (by_operator key, function); conv_flop_jit names its counter "conv",
# the others return a number that fvcore files under the op name minus "aten::".
FV_HANDLES = {
    "aten::addmm": ("addmm", _fv_addmm),
    "aten::bmm": ("bmm", _fv_bmm),
    "aten::_convolution": ("conv", _fv_conv),
    "aten::einsum": ("einsum", _fv_einsum),
    "aten::matmul": ("matmul", _fv_matmul),
    "aten::linear": ("linear", _fv_linear),
    "aten::batch_norm": ("batch_norm", _fv_batchnorm),
    "aten::group_norm": ("group_norm", _fv_norm(2)),
    "aten::layer_norm": ("layer_norm", _fv_norm(2)),
    "aten::instance_norm": ("instance_norm", _fv_norm(1)),
    "aten::upsample_nearest2d": ("upsample_nearest2d", _fv_elementwise(0, 1)),
    "aten::upsample_bilinear2d": ("upsample_bilinear2d", _fv_elementwise(0, 4)),
    "aten::adaptive_avg_pool2d": ("adaptive_avg_pool2d", _fv_elementwise(1, 0)),
    "aten::grid_sampler": ("grid_sampler", _fv_elementwise(0, 4)),
}
# fvcore <= 0.1.2 (e.g. the 4.09G quoted in ptflops issue #94) had only these:
FV_LEGACY = {"aten::addmm", "aten::bmm", "aten::_convolution", "aten::einsum",
             "aten::matmul", "aten::linear"}
FV_IGNORED = {
    "aten::Int", "aten::ScalarImplicit", "aten::__and__", "aten::arange", "aten::cat",
    "aten::chunk", "aten::clamp", "aten::clamp_", "aten::constant_pad_nd",
    "aten::contiguous", "aten::copy_", "aten::detach", "aten::dropout", "aten::empty",
    "aten::eq", "aten::expand", "aten::flatten", "aten::floor", "aten::floor_divide",
    "aten::full", "aten::ge", "aten::gt", "aten::index", "aten::index_put_", "aten::max",
    "aten::nonzero", "aten::permute", "aten::relu", "aten::relu_", "aten::remainder",
    "aten::reshape", "aten::select", "aten::size", "aten::slice", "aten::split",
    "aten::split_with_sizes", "aten::squeeze", "aten::narrow", "aten::unbind",
    "aten::full_like", "aten::stack", "aten::t", "aten::to", "aten::transpose",
    "aten::unsqueeze", "aten::unsqueeze_", "aten::view", "aten::zeros", "aten::zeros_like",
}


def fvcore_count(model, x, legacy=False):
    with torch.no_grad():
        graph, _ = torch.jit._get_trace_graph(model, (x,))
    by_op = collections.Counter()
    unsupported = collections.Counter()
    for node in graph.nodes():
        kind = node.kind()
        if kind in FV_HANDLES and (not legacy or kind in FV_LEGACY):
            key, fn = FV_HANDLES[kind]
            by_op[key] += int(fn(list(node.inputs()), list(node.outputs())))
        elif kind not in FV_IGNORED and not kind.startswith("prim::"):
            unsupported[kind] += 1
    return {"total": sum(by_op.values()), "by_op": dict(by_op),
            "unsupported_ops": dict(unsupported)}


def fvcore_dispatch_check(model, x):
    """Independent aten-level count with TorchDispatchMode (post-decomposition ops)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    aten = torch.ops.aten
    total = collections.Counter()

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func is aten.convolution.default:
                xs, ws = list(args[0].shape), list(args[1].shape)
                conv = (xs if args[6] else list(out.shape))[2:]
                total["conv"] += xs[0] * prod(ws) * prod(conv)
            elif func is aten.addmm.default:
                (b, k), n = args[1].shape, args[2].shape[1]
                total["linear"] += b * k * n
            elif func is aten.native_batch_norm.default:
                training = args[5]
                aff = args[1] is not None
                total["batch_norm"] += args[0].numel() * ((5 if aff else 4) if training else (2 if aff else 1))
            elif func is aten._adaptive_avg_pool2d.default:
                total["adaptive_avg_pool2d"] += args[0].numel()
            elif func is aten.mean.dim and args[0].dim() == 4 and list(args[1]) == [-1, -2]:
                # at::adaptive_avg_pool2d's 1x1 fast path is input.mean({-1,-2}, keepdim)
                total["adaptive_avg_pool2d"] += args[0].numel()
            return out

    with torch.no_grad(), Mode():
        model(x)
    return sum(total.values()), dict(total)


# =============================================================================
# ptflops (pytorch backend)
# =============================================================================

def _pt_conv(m, inp, out):
    x = inp[0]
    per_pos = prod(m.kernel_size) * m.in_channels * (m.out_channels // m.groups)
    active = x.shape[0] * prod(out.shape[2:])
    f = per_pos * active
    if m.bias is not None:
        f += m.out_channels * active
    return f


def _pt_linear(m, inp, out):
    x = inp[0]
    bias = out.shape[-1] if m.bias is not None else 0
    return (x.shape[-1] * out.shape[-1] + bias) * prod(x.shape[:-1])


def _pt_relu(m, inp, out):
    return out.numel()


def _pt_pool(m, inp, out):
    return inp[0].numel()


def _pt_bn(m, inp, out):
    f = inp[0].numel()
    if getattr(m, "affine", False):
        f *= 2
    return f


PT_MODULES = {}
for _t in (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d):
    PT_MODULES[_t] = _pt_conv
for _t in (nn.ReLU, nn.PReLU, nn.ELU, nn.LeakyReLU, nn.ReLU6, nn.GELU):
    PT_MODULES[_t] = _pt_relu
for _t in (nn.MaxPool1d, nn.AvgPool1d, nn.AvgPool2d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool3d,
           nn.AdaptiveMaxPool1d, nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveAvgPool2d,
           nn.AdaptiveMaxPool3d, nn.AdaptiveAvgPool3d):
    PT_MODULES[_t] = _pt_pool
for _t in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.InstanceNorm1d, nn.InstanceNorm2d,
           nn.InstanceNorm3d, nn.GroupNorm, nn.LayerNorm):
    PT_MODULES[_t] = _pt_bn
PT_MODULES[nn.Linear] = _pt_linear


def _pt_upsample_hook(m, inp, out):
    # ptflops takes output[0] (the first sample) and multiplies by its first dim:
    # batch_size = output[0].shape[0] (= channels!), then by output[0].shape[1:].
    o0 = out[0]
    n = o0.shape[0]
    for v in o0.shape[1:]:
        n *= v
    return n


PT_MODULES[nn.Upsample] = _pt_upsample_hook


def _pt_numel(*args, **kwargs):
    return args[0].numel()


def _pt_interpolate(*args, **kwargs):
    inp = kwargs.get("input", args[0] if args else None)
    size = kwargs.get("size", args[1] if len(args) > 1 else None)
    if size is not None:
        return prod(size) if isinstance(size, (tuple, list)) else int(size)
    sf = kwargs.get("scale_factor", args[2] if len(args) > 2 else None)
    f = inp.numel()
    if isinstance(sf, tuple) and len(sf) == len(inp):
        return f * prod(sf)
    return f * sf ** len(inp)


def _pt_matmul(a, b, *args, **kwargs):
    return prod(a.shape) * b.shape[-1]


def _pt_addmm(c, a, b, *, beta=1, alpha=1, out=None):
    f = prod(a.shape) * b.shape[-1]
    if beta != 0:
        f += prod(c.shape)
    return f


def _pt_elementwise(a, b, *args, **kwargs):
    if not torch.is_tensor(a):
        return prod(b.shape) if torch.is_tensor(b) else 1
    if not torch.is_tensor(b):
        return prod(a.shape)
    n = max(a.dim(), b.dim())
    shape = [max(a.shape[i] if i < a.dim() else 1, b.shape[i] if i < b.dim() else 1) for i in range(n)]
    return prod(shape)


PT_FUNCTIONAL = [(F, n, _pt_numel) for n in (
    "relu", "prelu", "elu", "relu6", "gelu", "silu",
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "softmax")]
PT_FUNCTIONAL += [(F, "upsample", _pt_interpolate), (F, "interpolate", _pt_interpolate)]
PT_TENSOR = [(torch, "matmul", _pt_matmul), (torch.Tensor, "matmul", _pt_matmul),
             (torch, "mm", _pt_matmul), (torch.Tensor, "mm", _pt_matmul),
             (torch, "bmm", _pt_matmul), (torch.Tensor, "bmm", _pt_matmul),
             (torch, "addmm", _pt_addmm), (torch.Tensor, "addmm", _pt_addmm),
             (torch, "baddbmm", _pt_addmm),
             (torch, "mul", _pt_elementwise), (torch.Tensor, "mul", _pt_elementwise),
             (torch, "add", _pt_elementwise), (torch.Tensor, "add", _pt_elementwise)]


class Patcher:
    """Replace attributes with counting wrappers; restore them on exit."""

    def __init__(self, table, on_call):
        self.table, self.on_call, self.saved = table, on_call, []

    def __enter__(self):
        for owner, name, handler in self.table:
            if not hasattr(owner, name):
                continue
            orig = getattr(owner, name)
            self.saved.append((owner, name, orig))

            def wrapper(*args, __orig=orig, __h=handler, __n=name, **kwargs):
                self.on_call(__n, __h(*args, **kwargs))
                return __orig(*args, **kwargs)
            setattr(owner, name, wrapper)
        return self

    def __exit__(self, *exc):
        for owner, name, orig in reversed(self.saved):
            setattr(owner, name, orig)
        return False


def ptflops_count(model, x, count_functional=True):
    per_type = collections.Counter()
    hooks = []
    modules_flops = [0]
    batch = [0]

    def mk(fn):
        def hook(m, inp, out):
            f = int(fn(m, inp, out))
            modules_flops[0] += f
            per_type["module:" + type(m).__name__] += f
        return hook

    for m in model.modules():
        if type(m) in PT_MODULES:
            hooks.append(m.register_forward_hook(mk(PT_MODULES[type(m)])))

    def batch_hook(m, inp, out):
        batch[0] += len(inp[0]) if len(inp) else 1
    hooks.append(model.register_forward_hook(batch_hook))

    func = collections.Counter()

    def on_call(name, f):
        func["functional:" + name] += int(f)

    try:
        if count_functional:
            with Patcher(PT_FUNCTIONAL + PT_TENSOR, on_call), torch.no_grad():
                model(x)
        else:
            with torch.no_grad():
                model(x)
    finally:
        for h in hooks:
            h.remove()
    # module hooks are averaged over the batch; functional counts are added as is
    macs = int(modules_flops[0] / batch[0] + sum(func.values()))
    by_op = dict(per_type)
    by_op.update(func)
    return {"macs": macs, "macs_module_hooks": int(modules_flops[0] / batch[0]),
            "macs_functional": int(sum(func.values())), "by_op": by_op}


# =============================================================================
# thop
# =============================================================================

def _th_conv(m, x, y):
    x = x[0]
    return prod(y.shape) * (x.shape[1] // m.groups) * prod(m.weight.shape[2:])


def _th_norm(m, x, y):
    f = 2 * x[0].numel()
    if getattr(m, "affine", False) or getattr(m, "elementwise_affine", False):
        f *= 2
    return f


def _th_prelu(m, x, y):
    return x[0].numel() if not m.training else 0


def _th_softmax(m, x, y):
    x = x[0]
    nf = x.size()[m.dim]
    b = x.numel() // nf
    return b * (nf + nf - 1 + nf)


def _th_avgpool(m, x, y):
    return y.numel()


def _th_adap_avgpool(m, x, y):
    kernel = torch.div(torch.DoubleTensor([*(x[0].shape[2:])]), torch.DoubleTensor([*(y.shape[2:])]))
    total_add = torch.prod(kernel)
    return int((total_add + 1) * y.numel())


def _th_upsample(m, x, y):
    mult = {"nearest": 1, "linear": 5, "bilinear": 11, "bicubic": 259}.get(m.mode)
    return 0 if mult is None else int(y.nelement() * mult)


def _th_linear(m, x, y):
    return m.in_features * y.numel()


def _th_zero(m, x, y):
    return 0


TH_HOOKS = {nn.ZeroPad2d: _th_zero, nn.Dropout: _th_zero, nn.Sequential: _th_zero,
            nn.PixelShuffle: _th_zero, nn.ReLU: _th_zero, nn.ReLU6: _th_zero,
            nn.LeakyReLU: _th_zero,  # count_relu -> calculate_relu_flops() returns 0
            nn.PReLU: _th_prelu, nn.Softmax: _th_softmax, nn.Linear: _th_linear,
            nn.Upsample: _th_upsample, nn.UpsamplingBilinear2d: _th_upsample,
            nn.UpsamplingNearest2d: _th_upsample, nn.SyncBatchNorm: _th_norm}
for _t in (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d):
    TH_HOOKS[_t] = _th_conv
for _t in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.InstanceNorm1d,
           nn.InstanceNorm2d, nn.InstanceNorm3d):
    TH_HOOKS[_t] = _th_norm
for _t in (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
           nn.AdaptiveMaxPool3d):
    TH_HOOKS[_t] = _th_zero
for _t in (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d):
    TH_HOOKS[_t] = _th_avgpool
for _t in (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d):
    TH_HOOKS[_t] = _th_adap_avgpool


# README-era thop rules, reconstructed: the formulas of count_hooks.py@3ab72b2 (conv with
# one add per output for a bias, Linear as in + (in-1) + bias per output, adaptive average
# pool as (k+1) per output) with BatchNorm at 4*|x| (count_bn@0ce364b: subtract, divide,
# gamma, beta) and ReLU/MaxPool as zero_ops (profile.py@958f7a4).  This combination is the
# one that reproduces every row of the README's MACs(G) table checked here; it is used
# only to explain that table, not as thop's current behaviour.
def _th_legacy_conv(m, x, y):
    k = prod(m.weight.shape[2:])
    return y.nelement() * (m.in_channels // m.groups * k + (1 if m.bias is not None else 0))


def _th_legacy_bn(m, x, y):
    return 4 * x[0].numel()


def _th_legacy_linear(m, x, y):
    return (m.in_features + m.in_features - 1 + (1 if m.bias is not None else 0)) * y.numel()


def _th_legacy_adap(m, x, y):
    k = prod(int(a) // int(b) for a, b in zip(x[0].shape[2:], y.shape[2:]))
    return (k + 1) * y.numel()


TH_LEGACY = dict(TH_HOOKS)
for _t in (nn.Conv1d, nn.Conv2d, nn.Conv3d):
    TH_LEGACY[_t] = _th_legacy_conv
for _t in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d):
    TH_LEGACY[_t] = _th_legacy_bn
TH_LEGACY[nn.Linear] = _th_legacy_linear
for _t in (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d):
    TH_LEGACY[_t] = _th_legacy_adap


def thop_count(model, x, table=TH_HOOKS):
    ops = collections.Counter()   # per module object
    hooked = set()
    hooks = []
    for m in model.modules():
        fn = table.get(type(m))
        if fn is None:
            continue
        hooked.add(m)

        def hook(mod, inp, out, fn=fn):
            ops[mod] += int(fn(mod, inp, out))
        hooks.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    by_op = collections.Counter()

    def dfs(module):
        total = 0
        for child in module.children():
            if child in hooked and not isinstance(child, (nn.Sequential, nn.ModuleList)):
                total += ops[child]
                by_op[type(child).__name__] += ops[child]
            else:
                total += dfs(child)
        return total

    total = dfs(model)
    return {"macs": int(total), "by_op": {k: v for k, v in by_op.items() if v}}


# =============================================================================
# DeepSpeed flops profiler
# =============================================================================

def _ds_linear(input, weight, bias=None):
    macs = input.numel() * weight.shape[0]
    return 2 * macs, macs


def _ds_numel(input, *args, **kwargs):
    return input.numel(), 0


def _ds_conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    n, cin = input.shape[0], input.shape[1]
    cout = weight.shape[0]
    kd = list(weight.shape[2:])
    ind = list(input.shape[2:])
    L = len(ind)
    strides = stride if type(stride) is tuple else (stride,) * L
    dil = dilation if type(dilation) is tuple else (dilation,) * L
    if isinstance(padding, str):
        pads = (0,) * L if padding == "valid" else tuple(d * (k - 1) // 2 for d, k in zip(dil, kd))
    elif isinstance(padding, tuple):
        pads = padding
    else:
        pads = (padding,) * L
    outd = [(ind[i] + 2 * pads[i] - (dil[i] * (kd[i] - 1) + 1)) // strides[i] + 1 for i in range(L)]
    macs = prod(kd) * cin * (cout // groups) * n * prod(outd)
    flops = 2 * macs
    if bias is not None:
        flops += cout * n * prod(outd)
    return int(flops), int(macs)


def _ds_conv_t(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    n, cin = input.shape[0], input.shape[1]
    cout = weight.shape[1]
    kd = list(weight.shape[2:])
    ind = list(input.shape[2:])
    L = len(ind)
    pads = padding if type(padding) is tuple else (padding,) * L
    strides = stride if type(stride) is tuple else (stride,) * L
    dil = dilation if type(dilation) is tuple else (dilation,) * L
    outd = [(ind[i] + 2 * pads[i] - (dil[i] * (kd[i] - 1) + 1)) // strides[i] + 1 for i in range(L)]
    macs = prod(kd) * cin * (cout // groups) * n * prod(ind)
    flops = 2 * macs
    if bias is not None:
        flops += cout * n * prod(outd)
    return int(flops), int(macs)


def _ds_bn(input, running_mean, running_var, weight=None, bias=None, training=False, *a, **k):
    aff = weight is not None
    if training:
        return input.numel() * (5 if aff else 4), 0
    return input.numel() * (2 if aff else 1), 0


def _ds_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return input.numel() * (5 if weight is not None else 4), 0


def _ds_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return input.numel() * (5 if weight is not None else 4), 0


def _ds_instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, *a, **k):
    return input.numel() * (5 if weight is not None else 4), 0


def _ds_upsample(*args, **kwargs):
    inp = args[0]
    size = kwargs.get("size", args[1] if len(args) > 1 else None)
    if size is not None:
        return (prod(size) if isinstance(size, (tuple, list)) else int(size)), 0
    sf = kwargs.get("scale_factor", args[2] if len(args) > 2 else None)
    f = inp.numel()
    f *= prod(sf) if isinstance(sf, (list, tuple)) else sf ** (inp.ndim - 2)
    return int(f), 0


def _ds_zero(*args, **kwargs):
    return 0, 0


def _ds_matmul(input, other, *, out=None):
    macs = prod(input.shape) * other.shape[-1]
    return 2 * macs, macs


def _ds_addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    macs = prod(mat1.shape) * mat2.shape[-1]
    return 2 * macs + prod(input.shape), macs


def _ds_elementwise(input, other, *args, **kwargs):
    return _pt_elementwise(input, other), 0


def _ds_einsum(equation, *operands):
    eq = equation.replace(" ", "")
    letters = collections.OrderedDict((k, 0) for k in eq if k.isalpha()).keys()
    eq = eq.translate({ord(x): 97 + n for n, x in enumerate(letters)})
    path = np.einsum_path(eq, *[np.zeros(o.shape) for o in operands], optimize="optimal")[1]
    for line in path.split("\n"):
        if "optimized flop" in line.lower():
            return int(float(line.split(":")[-1])), 0
    raise NotImplementedError(eq)


DS_FUNCTIONAL = [(F, "linear", _ds_linear)]
DS_FUNCTIONAL += [(F, n, _ds_conv) for n in ("conv1d", "conv2d", "conv3d")]
DS_FUNCTIONAL += [(F, n, _ds_conv_t) for n in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")]
DS_FUNCTIONAL += [(F, n, _ds_numel) for n in ("relu", "prelu", "elu", "leaky_relu", "relu6", "silu", "gelu")]
DS_FUNCTIONAL += [(F, "batch_norm", _ds_bn), (F, "layer_norm", _ds_layer_norm),
                  (F, "instance_norm", _ds_instance_norm), (F, "group_norm", _ds_group_norm)]
DS_FUNCTIONAL += [(F, n, _ds_numel) for n in (
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")]
DS_FUNCTIONAL += [(F, "upsample", _ds_upsample), (F, "interpolate", _ds_upsample),
                  (F, "softmax", _ds_numel), (F, "embedding", _ds_zero)]
DS_TENSOR = [(torch, "matmul", _ds_matmul), (torch.Tensor, "matmul", _ds_matmul),
             (torch.Tensor, "__matmul__", _ds_matmul),
             (torch, "mm", _ds_matmul), (torch.Tensor, "mm", _ds_matmul),
             (torch, "bmm", _ds_matmul), (torch.Tensor, "bmm", _ds_matmul),
             (torch, "addmm", _ds_addmm), (torch.Tensor, "addmm", _ds_addmm),
             (torch, "mul", _ds_elementwise), (torch.Tensor, "mul", _ds_elementwise),
             (torch, "add", _ds_elementwise), (torch.Tensor, "add", _ds_elementwise),
             (torch, "einsum", _ds_einsum), (torch, "baddbmm", _ds_addmm)]


def deepspeed_count(model, x):
    stack = []          # module_flop_count / module_mac_count of the profiler
    flops = collections.Counter()
    macs = collections.Counter()
    hooks = []

    def pre(m, inp):
        stack.append([])

    def post(m, inp, out):
        if stack:
            for name, f, mc in stack.pop():
                flops[name] += f
                macs[name] += mc

    for m in model.modules():
        hooks.append(m.register_forward_pre_hook(pre))
        hooks.append(m.register_forward_hook(post))

    def on_call(name, fm):
        f, mc = fm
        if stack:
            stack[-1].append((name, int(f), int(mc)))

    try:
        with Patcher(DS_FUNCTIONAL + DS_TENSOR, on_call), torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return {"macs": int(sum(macs.values())), "flops": int(sum(flops.values())),
            "by_op": {k: {"flops": flops[k], "macs": macs[k]} for k in sorted(flops)}}


# =============================================================================
# published figures (where read) and driver
# =============================================================================

PTF_README_NEW = ("sovrasov/flops-counter.pytorch README.md as shipped in ptflops 0.7.3 "
                  "(PyPI sdist diff 0.7.2.2->0.7.3 and stored README; torchvision 0.16 table), "
                  "column 'MACs(G) (pytorch)'")
PTF_README_OLD = ("sovrasov/flops-counter.pytorch@015ad15ee44eb62c71da8fbe274aa1357fcb42e3 README.md "
                  "(ptflops 0.6.x, torchvision 1.0-era table)")
THOP_README = ("Lyken17/pytorch-OpCounter README.md 'Results of Recent Models' MACs(G) table "
               "(stored copy; produced by benchmark/evaluate_famous_models.py with an older thop; see readme_era_macs)")

PUBLISHED = {
    "resnet18": {
        "ptflops": [{"value": 1.83e9, "shown": "1.83", "where": PTF_README_NEW},
                    {"value": 1.82e9, "shown": "1.82", "where": PTF_README_OLD}],
        "thop": [{"value": 1.82e9, "shown": "1.82", "where": THOP_README}],
    },
    "resnet50": {
        "ptflops": [{"value": 4.13e9, "shown": "4.13", "where": PTF_README_NEW},
                    {"value": 4.12e9, "shown": "4.12", "where": PTF_README_OLD}],
        "thop": [{"value": 4.14e9, "shown": "4.14", "where": THOP_README}],
        "fvcore": [{"value": 4.09e9, "shown": "4.09G",
                    "where": "sovrasov/flops-counter.pytorch issue #94 (comment 2022-11-15): fvcore output, "
                             "printing 'Skipped operation aten::batch_norm 53 time(s)' and "
                             "'aten::adaptive_avg_pool2d 1 time(s)', i.e. an fvcore without those handles"}],
    },
    "vgg16": {
        "ptflops": [{"value": 15.52e9, "shown": "15.52", "where": PTF_README_NEW},
                    {"value": 15.5e9, "shown": "15.5", "decimals": 2, "where": PTF_README_OLD}],
        "thop": [{"value": 15.61e9, "shown": "15.61", "where": THOP_README}],
    },
    "mobilenet_v2": {
        "ptflops": [{"value": 0.32e9, "shown": "0.32", "where": PTF_README_NEW}],
        "thop": [{"value": 0.33e9, "shown": "0.33", "where": THOP_README}],
    },
    "alexnet": {
        "ptflops": [{"value": 0.72e9, "shown": "0.72", "where": PTF_README_NEW},
                    {"value": 0.72e9, "shown": "0.72", "where": PTF_README_OLD}],
        "thop": [{"value": 0.77e9, "shown": "0.77", "where": THOP_README}],
        "deepspeed": [{"flops": 1.4297e9, "macs": 714.188e6,
                       "shown": "FLOPs:1.4297 GFLOPS   MACs:714.188 MMACs",
                       "where": "MrYxJ/calculate-flops.pytorch (calflops, a DeepSpeed-profiler derivative) "
                                "README.md example for torchvision alexnet, batch 1"}],
    },
}


def _decimals(shown):
    num = shown.split()[0].rstrip("G")
    return len(num.split(".")[1]) if "." in num else 0


# (model, tool, index into PUBLISHED[model][tool]) -> (variant key, explanation)
EXPLAIN = {
    ("ptflops", 0): ("macs", "current rules (0.7.x pytorch backend, count_functional=True); equal after "
                     "rounding to the README's 2 decimals. The +0.01 against the older README is ptflops' "
                     "double count: nn.ReLU / nn.MaxPool2d / nn.AdaptiveAvgPool2d are counted by their "
                     "module hook and again by the patched F.relu / F.max_pool2d / F.adaptive_avg_pool2d "
                     "that their forward() calls."),
    ("ptflops", 1): ("macs_count_functional_false", "older ptflops (<0.7, no functional patching; equal to "
                     "0.7.4 with backend_specific_config={'count_functional': False}); equal after rounding. "
                     "Current ptflops gives the 'macs' figure instead."),
    ("thop", 0): ("readme_era_macs", "the README table predates the current hooks: it counts a bias add per "
                  "conv output, Linear as in+(in-1)+bias ops per output (about 2x the MACs) and BatchNorm as "
                  "4*|x|, ReLU/MaxPool as 0 -- this reconstructed rule set reproduces every row checked. "
                  "Current thop (no conv bias, Linear in*out) gives the 'macs' figure, which differs where "
                  "biased convs or big Linear layers exist (vgg16 15.47, alexnet 0.71, resnet50 4.13)."),
    ("fvcore", 0): ("legacy_total_no_bn_no_pool", "the quoted run skipped aten::batch_norm and "
                    "aten::adaptive_avg_pool2d (fvcore before those handles were added); current fvcore adds "
                    "2*|x| per affine eval BatchNorm and |x| for adaptive_avg_pool2d (the 'total' figure)."),
    ("deepspeed", 0): ("flops/macs", "calflops is derived from DeepSpeed's profiler; its published alexnet "
                       "figures equal this DeepSpeed reimplementation exactly (no Linear bias in flops, "
                       "conv bias counted once per output, ReLU/pool |x| flops)."),
}


def published_checks(out):
    rows = []
    for model, tools in PUBLISHED.items():
        r = out["models"].get(model) or out["cross_check_models"][model]
        for tool, lst in tools.items():
            for i, p in enumerate(lst):
                key, why = EXPLAIN[(tool, i)]
                if tool == "deepspeed":
                    f, mc = r["deepspeed"]["flops"], r["deepspeed"]["macs"]
                    ok = round(f / 1e9, 4) == round(p["flops"] / 1e9, 4) and \
                        round(mc / 1e6, 3) == round(p["macs"] / 1e6, 3)
                    rows.append({"model": model, "tool": tool, "published": p["shown"], "where": p["where"],
                                 "ours_flops": f, "ours_macs": mc, "match": ok, "explanation": why})
                    continue
                cur = r[tool]["total" if tool == "fvcore" else "macs"]
                var = r[tool][key] if key in r[tool] else cur
                # the old ptflops table drops trailing zeros (15.5 among 2-decimal entries)
                d = p.get("decimals", _decimals(p["shown"]))
                rows.append({"model": model, "tool": tool, "published": p["shown"], "where": p["where"],
                             "ours_current_rules": cur, "current_rounded": round(cur / 1e9, d),
                             "variant": key, "variant_value": var, "variant_rounded": round(var / 1e9, d),
                             "match_current": round(cur / 1e9, d) == round(p["value"] / 1e9, d),
                             "match_variant": round(var / 1e9, d) == round(p["value"] / 1e9, d),
                             "explanation": why})
    return rows


def count_all(name, batch=1):
    model = build(name)
    x = torch.randn(batch, 3, 224, 224)
    res = {}
    fv = fvcore_count(model, x)
    dtotal, dby = fvcore_dispatch_check(model, x)
    assert dtotal == fv["total"], (name, dtotal, fv)
    fv["dispatch_check_total"] = dtotal
    fv["legacy_total_no_bn_no_pool"] = fvcore_count(model, x, legacy=True)["total"]
    res["fvcore"] = fv
    pt = ptflops_count(model, x)
    pt["macs_count_functional_false"] = ptflops_count(model, x, count_functional=False)["macs"]
    res["ptflops"] = pt
    th = thop_count(model, x)
    th["readme_era_macs"] = thop_count(model, x, TH_LEGACY)["macs"]
    res["thop"] = th
    res["deepspeed"] = deepspeed_count(model, x)
    res["params"] = sum(p.numel() for p in model.parameters())
    return res


def g(v):
    return f"{v / 1e9:.4f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                   "golden", "truth", "conventions.json"))
    args = ap.parse_args()

    out = {
        "how": ("tests/zoo/peer_conventions.py with Debian torch %s / torchvision %s: each peer tool's "
                "counting rules re-implemented from its source (doc/conventions-peers.md) and applied to "
                "torchvision models (weights=None, eval mode, input 1x3x224x224, seed 0). The tools "
                "themselves were not run (not installable here). fvcore: jit trace + fvcore's default "
                "handles (one fused multiply-add = 1 flop), cross-checked by an aten-level "
                "TorchDispatchMode count. ptflops: pytorch backend, module hooks + default functional "
                "patching (count_functional=True); MACs ('GMac'), divided by batch for module hooks only. "
                "thop: module hooks (MACs). deepspeed: patched torch.nn.functional / tensor methods; macs "
                "and flops columns." % (torch.__version__, torchvision.__version__)),
        "sources": SOURCES,
        "units": {"fvcore": "flops as fvcore counts them (1 per fused multiply-add)",
                  "ptflops": "MACs", "thop": "MACs", "deepspeed": "macs and flops"},
        "models": {},
        "cross_check_models": {},
        "batch_check": {},
        "published": PUBLISHED,
    }
    for name in MODELS + CHECK_MODELS:
        r = count_all(name)
        (out["models"] if name in MODELS else out["cross_check_models"])[name] = r
    # batch handling: resnet18 at N=2
    b2 = count_all("resnet18", batch=2)
    b1 = out["models"]["resnet18"]
    out["batch_check"]["resnet18_batch2"] = {
        "fvcore_total": b2["fvcore"]["total"],
        "ptflops_macs": b2["ptflops"]["macs"],
        "ptflops_macs_module_hooks": b2["ptflops"]["macs_module_hooks"],
        "ptflops_macs_functional": b2["ptflops"]["macs_functional"],
        "thop_macs": b2["thop"]["macs"],
        "deepspeed_macs": b2["deepspeed"]["macs"],
        "deepspeed_flops": b2["deepspeed"]["flops"],
        "note": ("fvcore, thop and deepspeed count the whole batch (2x the batch-1 figures); ptflops "
                 "divides its module-hook sum by the batch but adds functional counts undivided, so its "
                 "total is neither per-sample nor per-batch (%d module + %d functional vs %d + %d at N=1)"
                 % (b2["ptflops"]["macs_module_hooks"], b2["ptflops"]["macs_functional"],
                    b1["ptflops"]["macs_module_hooks"], b1["ptflops"]["macs_functional"])),
    }

    out["published_checks"] = published_checks(out)
    path = os.path.normpath(args.out)
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=False)
        f.write("\n")

    # ---- summary ----
    hdr = f"{'model':14s} {'fvcore':>10s} {'ptflops':>10s} {'thop':>10s} {'ds macs':>10s} {'ds flops':>10s}   (G)"
    print(hdr)
    for name in MODELS + CHECK_MODELS:
        r = out["models"].get(name) or out["cross_check_models"][name]
        print(f"{name:14s} {g(r['fvcore']['total']):>10s} {g(r['ptflops']['macs']):>10s} "
              f"{g(r['thop']['macs']):>10s} {g(r['deepspeed']['macs']):>10s} {g(r['deepspeed']['flops']):>10s}")
    print("\nvariants used to explain published figures (G):")
    print(f"{'model':14s} {'fv legacy':>10s} {'ptf nofunc':>10s} {'thop README':>11s}")
    for name in MODELS + CHECK_MODELS:
        r = out["models"].get(name) or out["cross_check_models"][name]
        print(f"{name:14s} {g(r['fvcore']['legacy_total_no_bn_no_pool']):>10s} "
              f"{g(r['ptflops']['macs_count_functional_false']):>10s} {g(r['thop']['readme_era_macs']):>11s}")
    print("\npublished figure vs reimplementation (current rules / variant):")
    for c in out["published_checks"]:
        if c["tool"] == "deepspeed":
            print(f"  {c['model']:13s} {c['tool']:9s} {c['published']:38s} ours flops {c['ours_flops']} "
                  f"macs {c['ours_macs']}  match={c['match']}")
        else:
            print(f"  {c['model']:13s} {c['tool']:9s} {c['published']:6s} current {c['current_rounded']:<7} "
                  f"({'ok' if c['match_current'] else 'differs'})  {c['variant']} {c['variant_rounded']:<7} "
                  f"({'ok' if c['match_variant'] else 'differs'})")
    print("\nwrote", path)


if __name__ == "__main__":
    main()
