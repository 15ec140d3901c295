"""A stand-in for torch with a fake CUDA GPU, so that the test of
tests/measure/pytorch_cuda.py (test_pytorch_cuda.py) runs the script's own
logic where neither torch nor a GPU is installed. Not a model of PyTorch's
numbers: just enough of its API, with a plain device-memory count, that
what the script does with it can be checked.

FAKE_TORCH selects: "missing" (import fails), "nocuda" (no GPU), "cuda"
(a GPU of FAKE_TORCH_MEMORY bytes, 24 GiB by default); FAKE_TORCH_FAIL=1
makes every forward raise. Each call the test looks at is appended to
$FAKE_TORCH_LOG as "pid event args".

Device memory: every tensor on the device holds its bytes until it is
garbage (CPython frees it at once); a forward with autograd on (train or
eval) also keeps a "saved activations" tensor as large as the output until
backward or until the output is garbage; the
model's output has the shape PyTorch gave in golden/truth/zoo/<model>.json
(the model is the one a --one child is measuring); the parameters are one
tensor of that file's "params" float32 values; a backward makes one
gradient per parameter; Adam's first step makes two moments."""
import contextlib
import json
import os
import sys
import types

MODE = os.environ.get("FAKE_TORCH", "cuda")
if MODE == "missing":
    raise ImportError("No module named 'torch' (fake_torch: FAKE_TORCH=missing)")

__version__ = "0.0+fake"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
CONTEXT = 300 << 20


def log(event, *args):
    path = os.environ.get("FAKE_TORCH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(" ".join([str(os.getpid()), event, *map(str, args)]) + "\n")


class dtype:
    def __init__(self, name, size, is_floating_point):
        self.name, self.itemsize, self.is_floating_point = name, size, is_floating_point

    def __repr__(self):
        return "torch." + self.name


float32 = float = dtype("float32", 4, True)
float16 = half = dtype("float16", 2, True)
bfloat16 = dtype("bfloat16", 2, True)
int64 = long = dtype("int64", 8, False)
bool = dtype("bool", 1, False)  # noqa: A001 - torch's own name


class device:
    def __init__(self, type, index=0):  # noqa: A002 - torch's own names
        self.type, self.index = type, index


class _Memory:
    total = int(os.environ.get("FAKE_TORCH_MEMORY", 24 << 30))
    allocated = peak = 0


_mem = _Memory()


class Tensor:
    def __init__(self, shape=(), dt=float32, dev="cpu", alloc=True):
        self.shape = tuple(shape)
        self.dtype = dt
        self.device = dev if isinstance(dev, device) else device(dev)
        self._bytes = 0
        self._saved = None
        self.grad = None
        n = 1
        for d in self.shape:
            n *= d
        self._numel = n
        if alloc and self.device.type == "cuda":
            nbytes = n * dt.itemsize
            if _mem.allocated + nbytes + CONTEXT > _mem.total:
                raise RuntimeError("CUDA out of memory. Tried to allocate %d bytes (fake_torch)" % nbytes)
            _mem.allocated += nbytes
            _mem.peak = max(_mem.peak, _mem.allocated)
            self._bytes = nbytes

    def __del__(self):
        _mem.allocated -= self._bytes

    def numel(self):
        return self._numel

    def dim(self):
        return len(self.shape)

    def to(self, dev):
        return Tensor(self.shape, self.dtype, dev)

    def float(self):
        return self if self.dtype is float32 else Tensor(self.shape, float32, self.device)

    def pow(self, _):
        return self._result(self.shape)

    def mean(self):
        return self._result(())

    def reshape(self, *shape):
        shape = list(shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape)
        if -1 in shape:
            rest = 1
            for d in shape:
                rest *= d if d != -1 else 1
            shape[shape.index(-1)] = self._numel // rest
        v = Tensor(shape, self.dtype, self.device, alloc=False)
        v._saved = self  # a view keeps its base, and the graph goes through it
        return v

    view = reshape

    def unsqueeze(self, _):
        return self

    def _result(self, shape):
        t = Tensor(shape, self.dtype, self.device)
        t._saved = self  # the autograd graph keeps its inputs
        return t

    def backward(self):
        log("backward")
        t = self
        while t is not None:
            s, t._saved = t._saved, None
            t = s
        for p in _model.params if _model else []:
            if p.grad is None:
                p.grad = Tensor(p.shape, p.dtype, p.device)


Size = tuple
_grad = [True]
_model = None


@contextlib.contextmanager
def autocast(device_type, dtype=None):
    log("autocast", device_type, dtype)
    try:
        yield
    finally:
        log("autocast_end")


@contextlib.contextmanager
def no_grad():
    log("no_grad")
    _grad.append(False)
    try:
        yield
    finally:
        _grad.pop()


def manual_seed(seed):
    log("manual_seed", seed)


class Generator:
    def manual_seed(self, seed):
        return self


def zeros(*shape, device="cpu", dtype=float32):
    return Tensor(shape, dtype, device)


def randn(shape, generator=None, dtype=float32):
    log("randn", "x".join(map(str, shape)))
    return Tensor(shape, dtype)


def randint(lo, hi, shape, generator=None, dtype=int64):
    return Tensor(shape, dtype)


def __getattr__(name):
    # tril, ones, arange, matmul, ... at model construction: a CPU tensor
    return lambda *a, **k: Tensor(())


def _truth(name):
    with open(os.path.join(ROOT, "golden", "truth", "zoo", name + ".json")) as f:
        return json.load(f)


def _measured():
    """(model, batch) of the --one child this process is, else (None, 0)."""
    a = sys.argv
    if "--one" in a:
        i = a.index("--one")
        return a[i + 1], int(a[i + 2])
    return None, 0


class _Module:
    """Any nn.X: builds, nests and moves; only the outermost one is called."""
    def __init__(self, *a, **k):
        self.training = True
        self.params = []

    def __call__(self, *xs):
        log("forward", "grad" if _grad[-1] else "no_grad", "train" if self.training else "eval")
        if os.environ.get("FAKE_TORCH_FAIL"):
            raise RuntimeError("fake_torch: forward failed (FAKE_TORCH_FAIL)")
        name, batch = _measured()
        shape = _truth(name)["batches"]["1"]["output_shapes"][0]
        out = Tensor([batch] + shape[1:], float32, xs[0].device)
        if _grad[-1]:
            out._saved = Tensor(out.shape, float32, out.device)
        return out

    def to(self, dev):
        global _model
        name, _ = _measured()
        log("model_to", getattr(dev, "type", dev), name)
        self.params = [Tensor((_truth(name)["params"],), float32, dev)]
        _model = self
        return self

    def parameters(self):
        return iter(self.params)

    def train(self, mode=True):
        log("train", mode)
        self.training = mode
        return self

    def eval(self):
        return self.train(False)

    def register_buffer(self, name, t):
        setattr(self, name, t)

    def append(self, m):
        return self

    def __iter__(self):
        return iter(())


nn = types.ModuleType("torch.nn")
nn.Module = _Module
nn.__getattr__ = lambda name: _Module
nn.functional = types.ModuleType("torch.nn.functional")


def _cross_entropy(out, target):
    log("loss", "cross_entropy", list(out.shape), list(target.shape))
    return out._result(())


nn.functional.cross_entropy = _cross_entropy
sys.modules["torch.nn"] = nn
sys.modules["torch.nn.functional"] = nn.functional


class _Optimizer:
    def __init__(self, kind, params, lr):
        log("optimizer", kind, lr)
        self.kind, self.params, self.state = kind, list(params), []
        self.defaults = {"lr": lr, "foreach": None, "fused": None}

    def step(self):
        log("step", self.kind)
        if self.kind == "Adam" and not self.state:
            self.state = [Tensor(p.shape, p.dtype, p.device) for p in self.params for _ in range(2)]

    def zero_grad(self, set_to_none=True):
        log("zero_grad", "set_to_none=%s" % set_to_none)
        for p in self.params:
            if set_to_none:
                p.grad = None


optim = types.SimpleNamespace(SGD=lambda params, lr: _Optimizer("SGD", params, lr),
                              Adam=lambda params, lr: _Optimizer("Adam", params, lr))
version = types.SimpleNamespace(cuda="12.1" if MODE == "cuda" else None)
backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(benchmark=False, allow_tf32=True, version=lambda: 8902),
                                 cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)))


class _Event:
    def __init__(self, enable_timing=False):
        pass

    def record(self):
        pass

    def elapsed_time(self, other):
        return 50.0  # ms over the script's five timed steps


def _reset_peak(dev=None):
    log("reset_peak")
    _mem.peak = _mem.allocated


def _max_allocated(dev=None):
    log("max_memory_allocated")
    return _mem.peak


cuda = types.SimpleNamespace(
    is_available=lambda: MODE == "cuda",
    set_device=lambda d: None,
    synchronize=lambda d=None: log("synchronize"),
    mem_get_info=lambda d=None: (_mem.total - CONTEXT - _mem.peak, _mem.total),
    memory_allocated=lambda d=None: _mem.allocated,
    max_memory_allocated=_max_allocated,
    max_memory_reserved=lambda d=None: -(-_mem.peak // (2 << 20)) * (2 << 20),
    reset_peak_memory_stats=_reset_peak,
    get_device_properties=lambda d: types.SimpleNamespace(name="Fake GPU 24GB", total_memory=_mem.total, major=8, minor=6,
                                                          multi_processor_count=82),
    Event=_Event,
)
