"""ctypes declarations of include/memest/memest.h and where libmemest.so is.

Only what the package calls is declared; the structs mirror the header field
for field (tests/python/test_python.py compares them with the JSON report,
so a header change that moves a field fails there)."""
import ctypes
import ctypes.util
import os
import sys
import sysconfig

c_u64 = ctypes.c_uint64
c_i64 = ctypes.c_int64
c_int = ctypes.c_int
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t

MEM_CATEGORIES = ("weights", "inputs", "activations", "saved", "gradients", "activation_grads",
                  "optimizer", "temporary", "workspace", "autocast_cache",
                  "optimizer_paged")  # MemestMemCategory, JSON names
PHASES = ("forward", "backward", "optimizer")  # MemestPhase
RUN_MODES = {"infer": 0, "grad": 1, "train": 2}
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "adagrad", "rmsprop", "none",
              "adafactor", "adamw8bit", "paged_adamw", "paged_adamw8bit")  # MemestOptimizer order
RUNTIMES = ("cuda", "cpu")
TORCH = ("1.13", "2")  # MemestTorch order
LOSSES = ("cross-entropy", "mse", "mean", "sum", "none", "pow2-mean")  # MemestLoss order
SHARDS = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}
FORMATS = {"table": 0, "json": 1, "csv": 2, "markdown": 3}
ERRORS = {-5: "MEMEST_ERR_IO", -12: "MEMEST_ERR_NOMEM", -22: "MEMEST_ERR_INVALID",
          -95: "MEMEST_ERR_UNSUPPORTED", -116: "MEMEST_ERR_STALE"}


class LoadSettings(ctypes.Structure):
    _fields_ = [("inputs", ctypes.POINTER(c_char_p)), ("n_inputs", c_int),
                ("dims", ctypes.POINTER(c_char_p)), ("n_dims", c_int),
                ("batch", c_i64), ("dtype", c_char_p), ("threads", c_int),
                # language models (memest.h, doc/llm.md)
                ("seq", c_i64), ("new_tokens", c_i64), ("kv_cache", c_int),
                # training forward and LoRA adapters (doc/llm.md, "Fine-tuning")
                ("train", c_int), ("lora", c_char_p),
                # weights and KV cache dtypes (doc/llm.md)
                ("weights", c_char_p), ("kv_dtype", c_char_p),
                # attention kernel; Megatron tensor / sequence parallelism, pipeline
                # stage, expert parallelism (memest.h, doc/memory.md)
                ("attn", c_int), ("tp", c_int), ("sp", c_int), ("pp_stages", c_int), ("pp_stage", c_int), ("ep", c_int)]


class AnalyzeSettings(ctypes.Structure):
    _fields_ = [("convention", c_int), ("strict", c_int)]


class MemorySettings(ctypes.Structure):
    _fields_ = [("mode", c_int), ("optimizer", c_int), ("runtime", c_int), ("loss", c_int),
                ("step", c_int), ("checkpoint", c_int), ("input_grad", c_int), ("amp", c_int),
                ("cuda_context", c_u64), ("cublas_workspace", c_u64), ("record_series", c_int),
                ("gpus", c_int), ("shard", c_int), ("optimizer_impl", c_int), ("offload", c_int), ("cpu_threads", c_int),
                ("torch", c_int), ("cpu_isa", c_int)]


class Gpu(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 32), ("memory", c_u64), ("bandwidth", ctypes.c_double),
                ("fp32_flops", ctypes.c_double), ("fp16_flops", ctypes.c_double), ("sms", c_int),
                ("link_bandwidth", ctypes.c_double)]


class MaxBatch(ctypes.Structure):
    _fields_ = [("batch", c_i64), ("needed", c_u64), ("needed_next", c_u64), ("simulations", c_int)]


class SeriesPoint(ctypes.Structure):
    _fields_ = [("node", c_int), ("phase", c_int), ("live", c_u64 * len(MEM_CATEGORIES))]


class Memory(ctypes.Structure):
    _fields_ = [("peak", c_u64), ("peak_allocated", c_u64), ("peak_reserved", c_u64),
                ("cuda_context", c_u64), ("nvidia_smi", c_u64), ("baseline", c_u64), ("end", c_u64),
                ("at_peak", c_u64 * len(MEM_CATEGORIES)), ("peak_node", c_int), ("peak_name", c_char_p),
                ("peak_phase", c_int), ("events", c_int), ("segments", c_int), ("recompute_macs", c_u64),
                ("forward_end", c_u64), ("grads_end", c_u64), ("backward_peak", c_u64), ("backward_peak_grads", c_u64),
                ("host", c_u64), ("peak_frames", c_u64)]


PROGRESS = ctypes.CFUNCTYPE(None, c_void_p, c_i64, c_u64)
ERRLEN = 2048


def _candidates():
    """Where libmemest.so may be, in order: $MEMEST_LIBRARY alone when set;
    else the meson build recorded at install time, the build folder of the
    checkout this package sits in, and installed prefixes."""
    env = os.environ.get("MEMEST_LIBRARY")
    if env:
        return [env]
    paths = []
    try:
        from . import _build_paths  # written by setup.py at install time
        paths += list(_build_paths.LIBRARIES)
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    paths.append(os.path.join(here, "..", "..", "build", "src", "libmemest.so"))
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for prefix in dict.fromkeys((sys.prefix, "/usr/local", "/usr")):
        for lib in ("lib/" + multiarch, "lib64", "lib"):
            paths.append(os.path.join(prefix, lib, "libmemest.so"))
    found = ctypes.util.find_library("memest")
    if found:
        paths.append(found)
    return paths


def _declare(lib):
    P = ctypes.POINTER
    sig = {
        "memest_strerror": (c_char_p, [c_int]),
        "memest_version": (c_char_p, []),
        "memest_free": (None, [c_void_p]),
        "memest_load_default_settings": (None, [P(LoadSettings)]),
        "memest_model_load": (c_int, [P(c_void_p), c_char_p, P(LoadSettings), c_char_p, c_size_t]),
        "memest_model_load_memory": (c_int, [P(c_void_p), c_char_p, c_size_t, c_char_p, P(LoadSettings),
                                             c_char_p, c_size_t]),
        "memest_model_free": (None, [P(c_void_p)]),
        "memest_model_set_batch": (c_int, [c_void_p, c_i64, c_char_p, c_size_t]),
        "memest_freeze": (c_int, [c_void_p, c_char_p]),
        "memest_node_name": (c_char_p, [c_void_p, c_int]),
        "memest_convention_from_name": (c_int, [c_char_p]),
        "memest_analyze_default_settings": (None, [P(AnalyzeSettings)]),
        "memest_analyze": (c_int, [c_void_p, P(AnalyzeSettings), P(c_void_p), c_char_p, c_size_t]),
        "memest_analysis_free": (None, [P(c_void_p)]),
        "memest_memory_default_settings": (None, [P(MemorySettings)]),
        "memest_set_memory": (c_int, [c_void_p, P(MemorySettings), c_char_p, c_size_t]),
        "memest_torch_changes": (c_int, [c_void_p, P(MemorySettings)]),
        "memest_model_torch": (c_int, [c_void_p]),
        "memest_model_runs_on": (c_int, [c_void_p, c_int, c_char_p, c_size_t]),
        "memest_memory_steps": (c_int, [c_void_p, P(Memory), c_int]),
        "memest_memory_series": (c_int, [c_void_p, c_int, P(P(SeriesPoint)), P(c_int)]),
        "memest_gpu_table": (P(Gpu), [P(c_int)]),
        "memest_gpu_find": (c_int, [c_char_p, P(Gpu), c_int, P(Gpu)]),
        "memest_parse_size": (c_u64, [c_char_p]),
        "memest_gpu_context": (c_u64, [P(Gpu)]),
        "memest_set_device": (c_int, [c_void_p, P(Gpu), c_int]),
        "memest_memory_needed": (c_u64, [c_void_p]),
        "memest_max_batch": (c_int, [c_void_p, P(MemorySettings), c_u64, P(MaxBatch), PROGRESS, c_void_p,
                                     c_char_p, c_size_t]),
        "memest_note_max_batch": (None, [c_void_p, P(MaxBatch)]),
        "memest_report_string": (c_int, [c_void_p, c_int, P(c_void_p), P(c_size_t)]),
        "memest_plot_svg_string": (c_int, [c_void_p, P(c_void_p), P(c_size_t), c_u64, c_char_p]),
        "memest_check_golden": (c_int, [c_void_p, c_char_p, ctypes.c_double, c_void_p, c_char_p, c_size_t]),
        "memest_write_golden": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t]),
        "memest_netron_metrics": (c_int, [c_void_p, c_void_p]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


_lib = None
_path = None


def lib():
    """The loaded library (loaded on first use)."""
    global _lib, _path
    if _lib is None:
        tried = []
        for p in _candidates():
            p = os.path.normpath(p) if os.sep in p else p
            if os.sep in p and not os.path.exists(p):
                tried.append(p + " (absent)")
                continue
            try:
                handle = ctypes.CDLL(p)
            except OSError as e:
                tried.append("%s (%s)" % (p, e))
                continue
            _lib, _path = _declare(handle), p
            break
        else:
            raise ImportError("memest: libmemest.so not found; build it (meson setup build && meson compile -C "
                              "build), install it (meson install -C build), or set MEMEST_LIBRARY to its path. "
                              "Tried: " + "; ".join(tried))
    return _lib


def library_path():
    lib()
    return _path


def take_string(ptr, length):
    """A char * the library returned, as str, freed."""
    try:
        return ctypes.string_at(ptr.value, length.value).decode("utf-8", "replace")
    finally:
        lib().memest_free(ptr)


# A FILE * for the functions that write to one (golden check, Netron).
_libc = ctypes.CDLL(None)
_libc.fopen.restype, _libc.fopen.argtypes = c_void_p, [c_char_p, c_char_p]
_libc.fclose.restype, _libc.fclose.argtypes = c_int, [c_void_p]


def with_file(path, fn):
    """Calls fn(FILE *) on path opened for writing; returns fn's result."""
    f = _libc.fopen(os.fsencode(path), b"w")
    if not f:
        raise OSError(ctypes.get_errno(), "cannot open %s" % path)
    try:
        return fn(f)
    finally:
        _libc.fclose(f)
