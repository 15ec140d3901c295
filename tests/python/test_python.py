#!/usr/bin/python3
"""Tests of the Python package (python/memest) against the memest command
on the committed zoo exports, with Debian's torch.

usage: test_python.py MEMEST SOURCE_ROOT CASE   (meson sets MEMEST_LIBRARY to
the release build's libmemest.so; the ASan build's cannot be loaded here)

  api           estimate() on resnet18: params, table, layers, totals, memory
                steps, every mode against the command; the module unchanged;
                requires_grad=False freezes as --freeze does
  transformer   gpt_like from tests/zoo/models.py through example_inputs,
                training, against the command
  cli           python3 -m memest torchvision.models.resnet18 ... against the
                command; a bad constructor path is exit 2
  export_error  an op the exporter cannot write: ExportError naming module and
                op, saying what to try; the module is left as it was
  lib_error     library errors as MemestError with the library's message
  schema        to_dict() against doc/report-schema.json
  html          _repr_html_: figures, the plot, escaped names
  plot          the SVG fallback (no matplotlib here), PNG through
                rsvg-convert, the matplotlib and pandas paths with stand-ins
  max_batch     Report.max_batch against --max-batch
  check         check() / write_golden()
  progress      a progress line on a terminal, nothing otherwise
  install       pip install --no-build-isolation of python/ into a venv finds
                the library from another folder
  example       doc/example_resnet50_a100.py runs: table, breakdown, max batch, PNG
"""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from harness import check, failures, path, run  # noqa: E402

CASE = sys.argv[3]
sys.path.insert(0, path("python"))
sys.path.insert(0, path("tests", "zoo"))
try:
    import torch
except ImportError:
    print("FAIL: torch is not importable by %s (apt-get install python3-torch python3-torchvision)" % sys.executable)
    sys.exit(1)
import memest  # noqa: E402

torch.set_num_threads(2)
ZOO18 = ["models/onnx/zoo/resnet18.onnx", "--input", "input=3x224x224:float32"]


def resnet18():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None)


def cli_json(*args):
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, "memest %s: exit %d: %s" % (" ".join(args), rc, err))
    return json.loads(out) if rc == 0 else None


def zoo(stem, *args):
    return cli_json(path("models", "onnx", "zoo", stem + ".onnx"), *args)


def same_figures(r, cli, what):
    """The report's totals, rows and memory steps are the command's."""
    d = r.to_dict()
    check(d["totals"] == cli["totals"], "%s: totals differ: %s vs %s" % (what, d["totals"], cli["totals"]))
    keys = ("name", "op", "input_shape", "output_shape", "params", "macs", "flops")
    check([[x.get(k) for k in keys] for x in d["layers"]] == [[x.get(k) for k in keys] for x in cli["layers"]],
          "%s: layer rows differ from the command's" % what)
    cs = cli["memory"]["steps"]
    ms = r.memory.steps if r.memory else []
    check(len(ms) == len(cs), "%s: %d memory steps, the command %d" % (what, len(ms), len(cs)))
    for s, c in zip(ms, cs):
        # the struct read through ctypes against the library's own JSON
        got = (s.peak, s.peak_requested, s.baseline, s.end, s.peak_at, s.peak_phase, s.at_peak)
        want = (c["peak"], c["peak_requested"], c["baseline"], c["end"], c["peak_at"], c["peak_phase"], c["at_peak"])
        check(got == want, "%s: step %s: %s != the command's %s" % (what, c["step"], got, want))


def case_api():
    m = resnet18()
    m.layer1.train(False)  # a mixed training state must come back as it was
    state = {k: v.clone() for k, v in m.state_dict().items()}
    flags = [x.training for x in m.modules()]
    r = memest.estimate(m, input_size=(3, 224, 224))
    check(r.params == sum(p.numel() for p in m.parameters()), "params %d != sum(p.numel())" % r.params)
    check([x.training for x in m.modules()] == flags, "estimate changed the modules' training flags")
    check(all(torch.equal(v, m.state_dict()[k]) for k, v in state.items()), "estimate changed buffers or weights")
    text = str(r)
    check("layer1.0.conv1" in text and "Total params: 11,689,512" in text and "Memory, inference" in text,
          "print(report) is not the table with the memory summary:\n" + text[:300])
    check(r.layers[4].name == "layer1.0.conv1" and r.layers[4].op == "Conv", "layers[4] is %s" % r.layers[4])
    check(r.totals.params == r.params and r.memory.mode == "infer", "totals/memory: %s %s" % (r.totals, r.memory))
    same_figures(r, zoo("resnet18", "--input", "input=3x224x224:float32"), "infer b1 cuda")
    ex = r.exported
    for kw, args in ((dict(mode="grad", batch=2), ["--grad", "--batch", "2"]),
                     (dict(mode="train", optimizer="adam", runtime="cpu", batch=3),
                      ["--train", "--optimizer", "adam", "--runtime", "cpu", "--batch", "3"]),
                     (dict(mode="train", optimizer="momentum", amp="bf16", checkpoint="sqrt", gpu="a100-80gb"),
                      ["--train", "--optimizer", "momentum", "--amp", "bf16", "--checkpoint", "sqrt", "--gpu",
                       "a100-80gb"]),
                     (dict(mode="train", optimizer="adam", torch="2"), ["--train", "--optimizer", "adam", "--torch", "2"])):
        same_figures(memest.estimate(ex, **kw), zoo("resnet18", "--input", "input=3x224x224:float32", *args), str(kw))
    # freezing the PyTorch way is --freeze
    for p in list(m.layer1.parameters()) + list(m.conv1.parameters()):
        p.requires_grad_(False)
    fr = memest.estimate(m, input_size=(3, 224, 224), mode="train", optimizer="adam")
    cli = zoo("resnet18", "--input", "input=3x224x224:float32", "--train", "--optimizer", "adam",
              "--freeze", "layer1", "--freeze", "conv1")
    check([s.peak for s in fr.memory.steps] == [s["peak"] for s in cli["memory"]["steps"]],
          "requires_grad=False: peaks %s, --freeze %s" % ([s.peak for s in fr.memory.steps],
                                                          [s["peak"] for s in cli["memory"]["steps"]]))
    # stochastic depth cannot be exported in training mode (Bernoulli): an
    # eval-mode export, where torch would merge the fresh, equal BatchNorm
    # weights into one initializer
    from torchvision.ops import StochasticDepth

    class Sd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn1, self.bn2 = torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.BatchNorm2d(8)
            self.sd = StochasticDepth(0.2, "row")

        def forward(self, x):
            y = self.bn1(self.conv(x))
            return y + self.sd(self.bn2(y))
    sd = Sd()
    r = memest.estimate(sd, input_size=(3, 16, 16), mode="train")
    check(r.params == sum(p.numel() for p in sd.parameters()), "stochastic depth: params %d, PyTorch %d"
          % (r.params, sum(p.numel() for p in sd.parameters())))
    try:
        memest.estimate(ex, mode="infer", optimizer="adam")
        check(False, "optimizer without mode='train' was accepted")
    except ValueError as e:
        check("mode='train'" in str(e), "optimizer without train: %s" % e)
    try:  # resnet18 has no mean over dims: torch 2 changes nothing with autograd on
        memest.estimate(ex, mode="grad", torch="2")
        check(False, "torch='2' with mode='grad' on resnet18 was accepted")
    except ValueError as e:
        check("binds nothing" in str(e), "torch='2' that binds nothing: %s" % e)


def case_transformer():
    from models import MODELS
    torch.manual_seed(0)
    m = MODELS["gpt_like"][0]()
    ids = torch.zeros((1, 128), dtype=torch.int64)
    r = memest.estimate(m, example_inputs=ids, mode="train", optimizer="adamw", runtime="cpu")
    check(r.params == sum(p.numel() for p in m.parameters()), "gpt_like params %d" % r.params)
    same_figures(r, zoo("gpt_like", "--input", "input_ids=128:int64", "--train", "--optimizer", "adamw",
                        "--runtime", "cpu"), "gpt_like train adamw")


def py(*args, env=None):
    e = dict(os.environ, PYTHONPATH=path("python"), **(env or {}))
    p = subprocess.run([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=e, cwd=tempfile.gettempdir())
    return p.returncode, p.stdout, p.stderr


def case_cli():
    args = ["--input", "3x224x224", "--train", "--optimizer", "adam", "--runtime", "cpu", "--batch", "2"]
    rc, out, err = py("-m", "memest", "torchvision.models.resnet18", *args, "--format", "json")
    check(rc == 0, "python3 -m memest: exit %d: %s" % (rc, err[-500:]))
    if rc == 0:
        got, want = json.loads(out), zoo("resnet18", *args)
        check(got["totals"] == want["totals"], "python3 -m memest: totals differ from the command's")
        check(got["memory"]["steps"] == want["memory"]["steps"], "python3 -m memest: memory differs from the command's")
    rc, out, err = py("-m", "memest", "torchvision.models.resnet18", "--input", "3x224x224")
    check(rc == 0 and "Total params: 11,689,512" in out, "python3 -m memest: no table (%d): %s" % (rc, err[-300:]))
    rc, out, err = py("-m", "memest", "torchvision.models.no_such_net", "--input", "3x224x224")
    check(rc == 2 and "no_such_net" in err, "a bad constructor path: exit %d, %r" % (rc, err[-300:]))


class Inverse(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.inv(x + 4 * torch.eye(2))  # aten::linalg_inv: no ONNX symbolic in torch 1.13


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.block = torch.nn.Sequential(torch.nn.ReLU(), Inverse())

    def forward(self, x):
        return self.block(self.lin(x).reshape(-1, 2, 2))


def case_export_error():
    m = Net().eval()
    try:
        memest.estimate(m, input_size=(4,))
        check(False, "an unexportable op exported")
    except memest.ExportError as e:
        msg = str(e)
        print(msg)
        check("aten::linalg_inv" in msg and e.op == "aten::linalg_inv", "the message does not name the op: " + msg)
        check("block" in msg, "the message does not name the module: " + msg)
        check("opset" in msg and "example_inputs" in msg, "the message does not say what to try: " + msg)
    check(not m.training and not m.block.training, "a failed export left the module in training mode")


def case_lib_error():
    try:
        memest.Model.load(b"\x0a\x05hello world, not a model", name="broken.onnx")
        check(False, "garbage loaded")
    except memest.MemestError as e:
        print("library error:", e)
        check(e.code == -22 and e.name == "MEMEST_ERR_INVALID", "code %s %s" % (e.code, e.name))
        check("broken.onnx" in str(e), "not the library's message naming the model: %s" % e)
    m = memest.Model.load(path("models", "onnx", "zoo", "resnet18.onnx"), inputs=["3x224x224"])
    r = m.analyze()
    m.set_batch(2)
    try:
        str(r)
        check(False, "a report of a re-bound model rendered")
    except memest.MemestError as e:
        check(e.name == "MEMEST_ERR_STALE", "stale report: %s %s" % (e.name, e))
    try:
        memest.Model.load(path("models", "onnx", "zoo", "resnet18.onnx"), inputs=["input=3x224:float32"])
        check(False, "a wrong-rank input spec was accepted")
    except memest.MemestError as e:
        check("input" in str(e) and e.code == -22, "bad input spec: %s" % e)
    try:
        m.freeze("no_such_layer")
        check(False, "a freeze pattern matching nothing was accepted")
    except ValueError as e:
        check("no_such_layer" in str(e), str(e))


def case_schema():
    sys.argv[3:] = ["schema"]
    from test_reports import load_schema, validate
    schema = load_schema()
    ex = memest.export(resnet18(), input_size=(3, 224, 224))
    docs = [memest.estimate(ex).to_dict()]
    r = memest.estimate(ex, mode="train", optimizer="adam", gpu="rtx3090", convention="torchstat")
    r.max_batch()
    docs.append(r.to_dict())
    check("max_batch" in docs[1].get("device", {}), "max_batch() was not noted in the report")
    for d in docs:
        errs = validate(schema, d)
        check(not errs, "to_dict() does not follow the schema: %s" % errs[:5])
    bad = dict(docs[0], totals=dict(docs[0]["totals"], surprise=1))
    check(validate(schema, bad), "the validator accepted a key the schema does not have")


def case_html():
    from collections import OrderedDict
    m = torch.nn.Sequential(OrderedDict([("conv<script>", torch.nn.Conv2d(3, 8, 3)), ("act", torch.nn.ReLU()),
                                         ("pool", torch.nn.AdaptiveAvgPool2d(1)), ("flat", torch.nn.Flatten()),
                                         ("fc", torch.nn.Linear(8, 10))]))
    r = memest.estimate(m, input_size=(3, 32, 32), mode="train")
    h = r._repr_html_()
    check(format(r.params, ",") in h and format(r.totals.macs, ",") in h, "the HTML lacks params or MACs")
    check("%.2f MiB" % (r.memory.peak / 2**20) in h, "the HTML lacks the peak")
    check("<svg" in h, "the HTML lacks the timeline")
    check("<script>" not in h and "conv&lt;script&gt;" in h, "a module name is not escaped")


def case_plot():
    r = memest.estimate(resnet18(), input_size=(3, 224, 224), mode="train", gpu="t4")
    try:
        import matplotlib  # noqa: F401
        check(False, "matplotlib is installed here: the SVG fallback is not what runs")
    except ImportError:
        pass
    s = r.plot()
    check(s._repr_svg_() == r.svg() and "<svg" in s.data and "t4" in s.data, "plot() without matplotlib: not the SVG")
    with tempfile.TemporaryDirectory() as tmp:
        r.plot(os.path.join(tmp, "t.svg"))
        check(open(os.path.join(tmp, "t.svg")).read() == r.svg(), "plot('t.svg') did not write the SVG")
        if shutil.which("rsvg-convert"):
            r.plot(os.path.join(tmp, "t.png"))
            check(open(os.path.join(tmp, "t.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n", "t.png is not a PNG")
        else:
            print("no rsvg-convert: PNG without matplotlib not tried")
    # the matplotlib path with a stand-in that records what is drawn
    drawn = {}

    class Ax:
        def stackplot(self, xs, *ys, **kw):
            drawn["total"] = max(sum(c[i] for c in ys) for i in range(len(xs)))
            drawn["labels"] = kw["labels"]

        def axhline(self, y, **kw):
            drawn["gpu"] = y

        def __getattr__(self, name):
            return lambda *a, **k: None
    plt = types.ModuleType("matplotlib.pyplot")
    plt.subplots = lambda **kw: (types.SimpleNamespace(tight_layout=lambda: None, savefig=lambda *a, **k: None), Ax())
    mpl = types.ModuleType("matplotlib")
    mpl.use, mpl.pyplot = (lambda *a: None), plt
    sys.modules.update({"matplotlib": mpl, "matplotlib.pyplot": plt})
    try:
        r.plot()
    finally:
        del sys.modules["matplotlib"], sys.modules["matplotlib.pyplot"]
    want = r.memory.steps[-1].peak_requested / 2**20
    check(abs(drawn.get("total", 0) - want) < 1e-6, "matplotlib: the stack's top %s MiB is not the peak %s MiB"
          % (drawn.get("total"), want))
    check(drawn.get("gpu") == memest.gpu("t4").memory / 2**20, "matplotlib: no capacity line at the GPU's memory")
    # pandas: a helpful ImportError without it, the rows with it
    try:
        r.to_pandas()
        check(False, "to_pandas without pandas returned")
    except ImportError as e:
        check("pandas" in str(e), str(e))
    pd = types.ModuleType("pandas")
    pd.DataFrame = types.SimpleNamespace(from_records=lambda rows: rows)
    sys.modules["pandas"] = pd
    try:
        check(r.to_pandas() == r.to_dict()["layers"], "to_pandas: not the report's rows")
    finally:
        del sys.modules["pandas"]


def case_max_batch():
    ex = memest.export(resnet18(), input_size=(3, 224, 224))
    r = memest.estimate(ex, mode="train", optimizer="adam", freeze="layer1")
    mb = r.max_batch(gpu="rtx2080ti")
    cli = zoo("resnet18", "--input", "input=3x224x224:float32", "--train", "--optimizer", "adam", "--freeze",
              "layer1", "--gpu", "rtx2080ti", "--max-batch")
    want = cli["device"]["max_batch"]
    check((mb.batch, mb.needed, mb.needed_next) == (want["batch"], want["needed"], want["needed_next"]),
          "max_batch %s, the command %s" % (mb, want))
    check("max_batch" not in r.to_dict().get("device", {}), "another GPU's answer was noted in the report")
    check(r.memory.steps[0].peak == memest.estimate(ex, mode="train", optimizer="adam", freeze="layer1")
          .memory.steps[0].peak, "max_batch left the model at another batch")


def case_check():
    ex = memest.export(resnet18(), input_size=(3, 224, 224))
    r = memest.estimate(ex, mode="train")
    with tempfile.TemporaryDirectory() as tmp:
        g = os.path.join(tmp, "g.json")
        r.write_golden(g)
        res = r.check(g)
        check(bool(res) and not res.moved, "check against its own golden moved: %s" % res)
        d = json.load(open(g))
        d["totals"]["macs"] = int(d["totals"]["macs"] * 1.05)
        res = r.check(d)
        check(not res and any("totals.macs" in x for x in res.moved), "a 5%% MAC change passed: %s" % res.moved)
        check(bool(r.check(d, tolerance=10)), "a 5% change failed at 10% tolerance")
        try:
            r.check(os.path.join(tmp, "missing.json"))
            check(False, "a missing golden was accepted")
        except memest.MemestError as e:
            check("missing.json" in str(e), str(e))


class Tty(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def case_progress():
    ex = None
    for tty in (True, False):
        s = Tty(tty)
        with contextlib.redirect_stderr(s):
            ex = memest.export(resnet18(), input_size=(3, 224, 224))
            memest.estimate(ex, mode="train", gpu="t4").max_batch()
        out = s.getvalue()
        if tty:
            check("exporting ResNet: tracing" in out and "max batch on t4: batch" in out,
                  "no progress on a terminal: %r" % out[:200])
            check(out.endswith("\r"), "the progress line was not cleared")
        else:
            check(out == "", "progress written to a non-terminal: %r" % out[:200])


def case_install():
    with tempfile.TemporaryDirectory(prefix="memest-venv-") as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree(path("python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        venv = os.path.join(tmp, "venv")
        p = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        check(p.returncode == 0, "venv: " + p.stdout[-500:])
        vpy = os.path.join(venv, "bin", "python3")
        p = subprocess.run([vpy, "-m", "pip", "install", "--no-index", "--no-build-isolation", src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        check(p.returncode == 0, "pip install: " + p.stdout[-1500:])
        lib = os.environ["MEMEST_LIBRARY"]
        env = {k: v for k, v in os.environ.items() if k not in ("MEMEST_LIBRARY", "PYTHONPATH")}
        p = subprocess.run([vpy, "-c", "import memest; print(memest.__file__); print(memest.library_path()); "
                            "print(memest.version())"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, env=env, cwd="/")
        lines = p.stdout.splitlines()
        check(p.returncode == 0 and len(lines) == 3, "import after install: " + p.stdout[-800:])
        if len(lines) == 3:
            check(lines[0].startswith(venv), "imported %s, not the installed package" % lines[0])
            check(os.path.realpath(lines[1]) == os.path.realpath(lib), "found %s, not %s" % (lines[1], lib))


def case_example():
    with tempfile.TemporaryDirectory() as tmp:
        png = os.path.join(tmp, "t.png")
        rc, out, err = py(path("doc", "example_resnet50_a100.py"), env={"MEMEST_EXAMPLE_PNG": png})
        check(rc == 0, "doc/example_resnet50_a100.py: exit %d: %s" % (rc, err[-800:]))
        check("largest batch on a100-80gb: " in out and "Total params: 25,557,032" in out and "saved" in out,
              "the example's output lacks the table, breakdown or max batch:\n" + out[-800:])
        if shutil.which("rsvg-convert"):
            check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "no PNG plot")


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    CASES[CASE]()
    print("%s: %d failure(s)" % (CASE, len(failures)))
    sys.exit(1 if failures else 0)
