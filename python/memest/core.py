"""The library's objects in Python: a loaded model, an analysis as a Report,
GPUs, errors."""
import ctypes
import html
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field

from . import _lib as L


class MemestError(Exception):
    """An error the library returned: .code is the negative MemestError,
    .name its enum name, the message the library's (naming file, node and
    field)."""

    def __init__(self, code, message):
        self.code = code
        self.name = L.ERRORS.get(code, "MEMEST_ERR_%d" % -code)
        super().__init__(message or L.lib().memest_strerror(code).decode())


def _err():
    return ctypes.create_string_buffer(L.ERRLEN)


def _check(rc, err=None):
    if rc < 0:
        msg = err.value.decode("utf-8", "replace") if err is not None else ""
        raise MemestError(rc, msg or L.lib().memest_strerror(rc).decode())
    return rc


def version():
    """The running library's version string."""
    return L.lib().memest_version().decode()


# --- GPUs -----------------------------------------------------------------

@dataclass(frozen=True)
class Gpu:
    name: str
    memory: int             # bytes, as nvidia-smi's total
    bandwidth: float = 0.0  # bytes/s
    fp32_flops: float = 0.0
    fp16_flops: float = 0.0
    sms: int = 0

    def _c(self):
        return L.Gpu(self.name.encode()[:31], self.memory, self.bandwidth, self.fp32_flops, self.fp16_flops,
                     self.sms)

    @staticmethod
    def _from_c(g):
        return Gpu(g.name.decode(), g.memory, g.bandwidth, g.fp32_flops, g.fp16_flops, g.sms)


def gpus():
    """The library's GPU table."""
    n = ctypes.c_int()
    t = L.lib().memest_gpu_table(ctypes.byref(n))
    return [Gpu._from_c(t[i]) for i in range(n.value)]


def gpu(spec):
    """A Gpu from a name ("a100-80gb", case-insensitive), a size ("24GiB",
    "16GB"; a card of that capacity without speeds), a byte count or a Gpu."""
    if isinstance(spec, Gpu):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec <= 0:
            raise ValueError("gpu=%d: a capacity must be positive" % spec)
        return Gpu("custom", spec)
    if not isinstance(spec, str):
        raise TypeError("gpu: expected a name, a size such as '24GiB', a byte count or memest.Gpu, not %r" % (spec,))
    out = L.Gpu()
    if L.lib().memest_gpu_find(spec.encode(), None, 0, ctypes.byref(out)) == 0:
        return Gpu._from_c(out)
    size = L.lib().memest_parse_size(spec.encode())
    if size:
        return Gpu("custom", size)
    raise ValueError("gpu=%r: not a known GPU (memest.gpus() lists them) nor a size such as '24GiB'" % spec)


# --- settings ---------------------------------------------------------------

def _choice(what, value, names):
    if value not in names:
        raise ValueError("%s=%r: expected one of %s" % (what, value, ", ".join(map(str, names))))
    return list(names).index(value) if not isinstance(names, dict) else names[value]


_AMP = {None: 0, False: 0, "fp16": 1, "float16": 1, "bf16": 2, "bfloat16": 2}


def _dtype_name(v):
    """'fp16' / torch.float16 / 'float16' -> the library's name."""
    s = str(v).replace("torch.", "")
    return {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32"}.get(s, s)


def memory_settings(mode="infer", optimizer=None, loss=None, runtime="cuda", checkpoint=None, input_grad=False,
                    amp=None, gpu=None, gpus=1, shard=None, series=True, torch=None):
    """MemestMemorySettings as the memest command fills them; torch: '1.13'
    (the default; Model.analyze takes the file's, memest_model_torch) or
    '2', whose code the timeline follows where they differ
    (nn.MultiheadAttention's attention, what a mean over dims saves, a
    training step's optimizer path)."""
    s = L.MemorySettings()
    L.lib().memest_memory_default_settings(ctypes.byref(s))
    mode = {"infer_grad": "grad"}.get(mode, mode)
    s.mode = _choice("mode", mode, L.RUN_MODES)
    if mode != "train":
        for what, v in (("optimizer", optimizer), ("loss", loss), ("checkpoint", checkpoint)):
            if v is not None:
                raise ValueError("%s=%r needs mode='train' (mode is %r)" % (what, v, mode))
    s.optimizer = _choice("optimizer", optimizer or "sgd", L.OPTIMIZERS)
    s.loss = _choice("loss", loss or "cross-entropy", L.LOSSES)
    s.runtime = _choice("runtime", runtime, L.RUNTIMES)
    if torch is not None:
        s.torch = _choice("torch", str(torch), L.TORCH)
    if checkpoint is not None:
        if checkpoint == "sqrt":
            s.checkpoint = -1
        elif isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and 2 <= checkpoint <= 1000000:
            s.checkpoint = checkpoint
        else:
            raise ValueError("checkpoint=%r: expected 'sqrt' or a number of segments >= 2" % (checkpoint,))
    s.input_grad = int(bool(input_grad))
    a = _dtype_name(amp) if amp not in (None, False) else None
    s.amp = _choice("amp", a, {None: 0, "float16": 1, "bfloat16": 2})
    if not isinstance(gpus, int) or not 1 <= gpus <= 65536:
        raise ValueError("gpus=%r: expected a number of GPUs from 1 to 65536" % (gpus,))
    s.gpus = gpus
    if shard is not None:
        if gpus < 2:
            raise ValueError("shard=%r needs gpus > 1" % shard)
        s.shard = _choice("shard", shard, L.SHARDS)
    s.record_series = int(bool(series))
    if gpu is not None:
        _gpu_memory_settings(s, gpu)
    return s


def _gpu_memory_settings(s, g):
    """What the memest command derives from the GPU: the CUDA context
    estimate, and cuBLAS's 32 MiB workspace on Hopper and later."""
    s.cuda_context = L.lib().memest_gpu_context(ctypes.byref(g._c()))
    if g.name.lower().startswith(("h100", "h200", "b200")):
        s.cublas_workspace = 32 << 20


# --- model ------------------------------------------------------------------

class Model:
    """A model the library loaded: bound to input shapes and a batch, and
    analyzed any number of times (Model.analyze gives a Report)."""

    def __init__(self, handle, name):
        self._h = handle
        self.name = name

    @classmethod
    def load(cls, source, inputs=(), batch=1, dtype=None, name=None):
        """From a path (.onnx or .json) or the bytes of one (name, which picks
        the format and names the model in messages, defaults to
        'model.onnx'). inputs: specs as the command's --input,
        '[NAME=]SHAPE[:DTYPE]'."""
        s = L.LoadSettings()
        L.lib().memest_load_default_settings(ctypes.byref(s))
        specs = [x.encode() for x in inputs]
        arr = (ctypes.c_char_p * max(1, len(specs)))(*specs)
        s.inputs, s.n_inputs = arr, len(specs)
        if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 1 << 40:
            raise ValueError("batch=%r: expected a whole number from 1 to 2^40" % (batch,))
        s.batch = batch
        dt = _dtype_name(dtype).encode() if dtype is not None else None
        s.dtype = dt
        s.threads = 1  # as the memest command: a big graph loads and simulates faster with a helper thread
        h, err = ctypes.c_void_p(), _err()
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            name = name or "model.onnx"
            rc = L.lib().memest_model_load_memory(ctypes.byref(h), data, len(data), name.encode(), ctypes.byref(s),
                                                  err, L.ERRLEN)
        else:
            name = name or os.fspath(source)
            rc = L.lib().memest_model_load(ctypes.byref(h), os.fsencode(source), ctypes.byref(s), err, L.ERRLEN)
        _check(rc, err)
        m = cls(h, name)
        m.dtype = dt.decode() if dt else None
        return m

    def __del__(self):
        if getattr(self, "_h", None) and L._lib is not None:
            L.lib().memest_model_free(ctypes.byref(self._h))

    def set_batch(self, batch):
        """Re-binds the inputs to another batch without reloading; earlier
        Reports of this model become stale (their methods raise)."""
        err = _err()
        _check(L.lib().memest_model_set_batch(self._h, batch, err, L.ERRLEN), err)
        self.batch = batch

    def freeze(self, pattern):
        """Layers whose module name matches pattern (glob or dotted prefix)
        get no gradients nor optimizer state; returns how many matched
        (none is an error)."""
        n = L.lib().memest_freeze(self._h, pattern.encode())
        if n == 0:
            raise ValueError("freeze=%r: no layer's module name matches" % pattern)
        return n

    def analyze(self, convention="default", strict=False, **memory):
        """A Report: per-layer cost under convention, and the memory of one
        step (keywords of memory_settings: mode, optimizer, loss, runtime,
        checkpoint, input_grad, amp, gpu, gpus, shard, torch)."""
        a = L.AnalyzeSettings()
        L.lib().memest_analyze_default_settings(ctypes.byref(a))
        c = L.lib().memest_convention_from_name(str(convention).encode())
        if c < 0:
            raise ValueError("convention=%r: expected default, torchstat, fvcore, ptflops, thop or deepspeed"
                             % (convention,))
        a.convention, a.strict = c, int(bool(strict))
        g = memory.pop("gpu", None)
        g = gpu(g) if g is not None else None
        ms = memory_settings(gpu=g, **memory)
        if memory.get("torch") is None:  # the torch the file says it runs on (memest_model_torch)
            ms.torch = L.lib().memest_model_torch(self._h)
        err = _err()
        if L.lib().memest_model_runs_on(self._h, ms.torch, err, L.ERRLEN) < 0:
            raise ValueError("torch=%r: %s" % (memory.get("torch"), err.value.decode()))
        h, err = ctypes.c_void_p(), _err()
        _check(L.lib().memest_analyze(self._h, ctypes.byref(a), ctypes.byref(h), err, L.ERRLEN), err)
        r = Report(self, h, ms, g)
        if memory.get("torch") is not None and not L.lib().memest_torch_changes(h, ctypes.byref(ms)):
            raise ValueError("torch=%r binds nothing for this model and mode: the versions differ in "
                             "nn.MultiheadAttention's attention, in what a mean over dims saves with autograd on and "
                             "in a training step's optimizer path" % (memory["torch"],))
        _check(L.lib().memest_set_memory(h, ctypes.byref(ms), err, L.ERRLEN), err)
        if g is not None:
            low = ms.amp or (self.dtype not in (None, "float32", "float64"))
            L.lib().memest_set_device(h, ctypes.byref(g._c()), int(bool(low)))
        return r


# --- report -----------------------------------------------------------------

class Row(dict):
    """A dict whose keys are also attributes (report rows, totals)."""

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


@dataclass
class MemoryStep:
    """One simulated step (memest_memory_steps): bytes. peak is what
    torch.cuda.max_memory_allocated reports (512 B blocks on cuda; the same
    as peak_requested on cpu)."""
    peak: int
    peak_requested: int
    peak_reserved: int
    cuda_context: int
    nvidia_smi: int
    baseline: int
    end: int
    at_peak: dict
    peak_at: str
    peak_phase: str
    segments: int
    recompute_macs: int
    forward_end: int = 0  # training: alive when the forward returns, beyond the baseline
    peak_if_all_named: int = 0  # inference from an export: the peak had every tensor been a named local (0: not computed)


@dataclass
class Memory:
    """The memory of the analysis: one step, or training's step 1 (creates
    the optimizer state) and step 2 (steady state)."""
    mode: str
    steps: list = field(default_factory=list)

    @property
    def peak(self):
        """The highest step's peak (max_memory_allocated over the steps)."""
        return max(s.peak for s in self.steps)

    @property
    def at_peak(self):
        """What is alive at the last step's peak, by category."""
        return self.steps[-1].at_peak


@dataclass
class MaxBatchResult:
    batch: int        # the largest batch that fits, 0 if even 1 does not
    needed: int       # bytes it needs
    needed_next: int  # and batch + 1
    gpu: Gpu
    simulations: int


def _mib(b):
    return "%.2f MiB" % (b / 2**20)


class Report:
    """One analysis: print() it for the table and memory summary; layers,
    totals and memory as Python objects; to_dict() is the JSON report
    (doc/report-schema.json)."""

    def __init__(self, model, handle, mem, g):
        self.model = model
        self._h = handle
        self._mem = mem
        self.gpu = g
        self._dict = None

    def __del__(self):
        if getattr(self, "_h", None) and L._lib is not None:
            L.lib().memest_analysis_free(ctypes.byref(self._h))

    def render(self, format="table"):
        """The report as text: table, json, csv or markdown."""
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        _check(L.lib().memest_report_string(self._h, _choice("format", format, L.FORMATS), ctypes.byref(out),
                                            ctypes.byref(n)))
        return L.take_string(out, n)

    def __str__(self):
        return self.render("table")

    def __repr__(self):
        t = self.totals
        s = "<memest.Report %s: %s params, %s MACs" % (self.model.name, format(t.params, ","),
                                                        format(t.get("macs", t.get("madd", 0)), ","))
        if self.memory:
            s += ", %s peak (%s)" % (_mib(self.memory.peak), self.memory.mode)
        return s + ">"

    def to_dict(self):
        """The JSON report as a dict (doc/report-schema.json, memest-report/1)."""
        if self._dict is None:
            self._dict = json.loads(self.render("json"))
        return json.loads(json.dumps(self._dict))  # the caller's own copy

    def _d(self):
        if self._dict is None:
            self.to_dict()
        return self._dict

    @property
    def layers(self):
        """The report's rows (dicts with attribute access: name, op,
        input_shape, output_shape, params, macs, flops, ...)."""
        return [Row(r) for r in self._d()["layers"]]

    @property
    def totals(self):
        return Row(self._d()["totals"])

    @property
    def params(self):
        return int(self.totals.params)

    @property
    def memory(self):
        """The simulated step(s) from the library (memest_memory_steps), or
        None when an op the library does not know left memory out."""
        steps = (L.Memory * 2)()
        n = L.lib().memest_memory_steps(self._h, steps, 2)
        if n <= 0:
            return None
        out = []
        # the report's rule (json.c): only paged optimizers have the optimizer_paged line
        paged = self._mem.mode == L.RUN_MODES["train"] and L.OPTIMIZERS[self._mem.optimizer].startswith("paged_")
        cats = [c for c in L.MEM_CATEGORIES if paged or c != "optimizer_paged"]
        for s in steps[:n]:
            out.append(MemoryStep(
                peak=s.peak_allocated, peak_requested=s.peak, peak_reserved=s.peak_reserved,
                cuda_context=s.cuda_context, nvidia_smi=s.nvidia_smi, baseline=s.baseline, end=s.end,
                at_peak={c: v for c, v in zip(L.MEM_CATEGORIES, s.at_peak) if c in cats},
                peak_at=s.peak_name.decode() if s.peak_name else "", peak_phase=L.PHASES[s.peak_phase],
                segments=s.segments, recompute_macs=s.recompute_macs, forward_end=s.forward_end,
                peak_if_all_named=s.peak_frames))
        mode = [k for k, v in L.RUN_MODES.items() if v == self._mem.mode][0]
        return Memory({"grad": "infer_grad"}.get(mode, mode), out)

    def series(self, step=None):
        """The timeline of a step (default: the last, training's steady
        state): a list of (node name or '', phase, {category: bytes})."""
        pts, n = ctypes.POINTER(L.SeriesPoint)(), ctypes.c_int()
        mem = self.memory
        if mem is None:
            return []
        step = len(mem.steps) - 1 if step is None else step
        _check(L.lib().memest_memory_series(self._h, step, ctypes.byref(pts), ctypes.byref(n)))
        names = {}
        out = []
        for i in range(n.value):
            p = pts[i]
            if p.node not in names:
                nm = L.lib().memest_node_name(self.model._h, p.node) if p.node >= 0 else None
                names[p.node] = nm.decode() if nm else ""
            out.append((names[p.node], L.PHASES[p.phase], dict(zip(L.MEM_CATEGORIES, p.live))))
        return out

    def svg(self, gpu=None):
        """The memory timeline as SVG text (the library's plot)."""
        g = globals()["gpu"](gpu) if gpu is not None else self.gpu
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        _check(L.lib().memest_plot_svg_string(self._h, ctypes.byref(out), ctypes.byref(n), g.memory if g else 0,
                                              g.name.encode() if g else None))
        return L.take_string(out, n)

    def plot(self, path=None, gpu=None):
        """Shows the memory timeline: a matplotlib Figure when matplotlib is
        present, else the library's SVG (an object notebooks display). With
        path, also saved there (.png without matplotlib needs rsvg-convert)."""
        from . import plot as P
        return P.plot(self, path, gpu)

    def max_batch(self, gpu=None, progress=None):
        """The largest batch whose step fits on gpu (default: the report's),
        solved by re-binding the model (frozen layers stay frozen). Noted in
        the report when gpu is the report's own."""
        g = globals()["gpu"](gpu) if gpu is not None else self.gpu
        if g is None:
            raise ValueError("max_batch needs a GPU: max_batch(gpu='a100-80gb') or estimate(..., gpu=...)")
        ms = L.MemorySettings.from_buffer_copy(self._mem)
        ms.record_series = 0
        _gpu_memory_settings(ms, g)
        from ._progress import Progress
        bar = Progress(progress)

        def step(_opaque, batch, needed):
            bar.say("max batch on %s: batch %d needs %s" % (g.name, batch, _mib(needed)))
        cb = L.PROGRESS(step)
        mb, err = L.MaxBatch(), _err()
        try:
            _check(L.lib().memest_max_batch(self.model._h, ctypes.byref(ms), g.memory, ctypes.byref(mb), cb, None,
                                            err, L.ERRLEN), err)
        finally:
            bar.done()
        if self.gpu is not None and g == self.gpu:
            L.lib().memest_note_max_batch(self._h, ctypes.byref(mb))
            self._dict = None
        return MaxBatchResult(mb.batch, mb.needed, mb.needed_next, g, mb.simulations)

    def check(self, golden, tolerance=1.0):
        """Compares with a golden JSON report (a path, or a dict as
        to_dict() gives): a CheckResult, true when nothing moved by more
        than tolerance percent; .moved lists what did."""
        with tempfile.TemporaryDirectory(prefix="memest-") as tmp:
            if isinstance(golden, dict):
                path = os.path.join(tmp, "golden.json")
                with open(path, "w") as f:
                    json.dump(golden, f)
            else:
                path = os.fspath(golden)
            out, err = os.path.join(tmp, "moved.txt"), _err()
            rc = L.with_file(out, lambda f: L.lib().memest_check_golden(self._h, os.fsencode(path), tolerance, f,
                                                                         err, L.ERRLEN))
            _check(rc, err)
            with open(out) as f:
                lines = f.read().splitlines()
        return CheckResult(rc == 0, lines[:-1], lines[-1] if lines else "")

    def write_golden(self, path):
        """Writes this report as a golden file (labelled: made by memest, a
        regression reference, not truth)."""
        err = _err()
        _check(L.lib().memest_write_golden(self._h, os.fsencode(path), err, L.ERRLEN), err)

    def netron(self, path):
        """Writes the Netron metrics attachment (per node params, MACs...)."""
        _check(L.with_file(os.fspath(path), lambda f: L.lib().memest_netron_metrics(self._h, f)))

    def to_pandas(self):
        """The layers as a pandas DataFrame (needs pandas)."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Report.to_pandas needs pandas (apt-get install python3-pandas); "
                              "Report.layers has the same rows as dicts") from e
        return pandas.DataFrame.from_records(self._d()["layers"])

    def _repr_html_(self):
        from . import plot as P
        return P.html_report(self)


@dataclass
class CheckResult:
    ok: bool
    moved: list   # one line per figure that moved ("totals.macs: a -> b (+5.00%)")
    summary: str  # the library's closing line

    def __bool__(self):
        return self.ok

    def __str__(self):
        return "\n".join(self.moved + [self.summary])
