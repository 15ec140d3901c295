#!/usr/bin/env python3
"""--torch: the PyTorch whose optimizer code a training step follows
(src/optim.c; doc/memory.md, "PyTorch versions").

usage: test_torch_version.py MEMEST SOURCE_ROOT CASE
  default  torch 2's _default_to_fused_or_foreach: Adam on CUDA runs the
           foreach path (the report says optimizer_impl foreach, torch 2);
           1.13's default stays single-tensor (neither key)
  lists    the temporaries at the update's peak: 1.13's _multi_tensor_adam
           holds two lists as large as the parameters (exp_avg_sq_sqrt,
           denom), 2.x's one (in-place denominators), as AdamW's and
           RMSprop's (avg); 2.x's Adagrad two (std, numerator); SGD's
           foreach path none in either
  paths    what each version has: adagrad's and rmsprop's foreach paths and
           fused SGD and AdamW from 2.x only (an error under 1.13 names
           the version)
  errors   --torch binds nothing without --train, on the CPU's default
           path, with an explicit single path, or as an unknown version:
           exit 2 naming the option
"""
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run, run_json  # noqa: E402

MODEL = path("models", "resnet18.json")
TRAIN = [MODEL, "--train", "--batch", "4"]


def case_default():
    d = run_json(*TRAIN, "--optimizer", "adam", "--torch", "2")
    if d:
        m = d["memory"]
        check(m.get("torch") == "2" and m.get("optimizer_impl") == "foreach",
              "--torch 2, Adam on CUDA: torch %r, optimizer_impl %r, want '2', 'foreach'" % (m.get("torch"), m.get("optimizer_impl")))
        check("optimizer_impl" not in [n["code"] for n in d.get("notes", [])], "--torch 2 still prints the optimizer_impl note")
    d = run_json(*TRAIN, "--optimizer", "adam")
    if d:
        m = d["memory"]
        check("torch" not in m and "optimizer_impl" not in m, "1.13's default: keys torch/optimizer_impl present: %s" % sorted(m))
        check("optimizer_impl" in [n["code"] for n in d.get("notes", [])], "1.13's default on CUDA: no optimizer_impl note")


def update_temps(*extra):
    """the update's temporaries at the first step's peak, and the parameters' bytes"""
    d = run_json(*TRAIN, *extra)
    if not d:
        return None, None
    s = d["memory"]["steps"][0]
    check(s["peak_phase"] == "optimizer", "%s: the peak is in %s, not the update" % (" ".join(extra), s["peak_phase"]))
    return s["at_peak"]["temporary"], int(d["totals"]["param_bytes"])


def case_lists():
    for extra, lists in ((["--optimizer", "adam", "--optimizer-impl", "foreach"], 2),
                         (["--optimizer", "adam", "--torch", "2"], 1),
                         (["--optimizer", "adamw", "--optimizer-impl", "foreach", "--torch", "2"], 1),
                         (["--optimizer", "rmsprop", "--optimizer-impl", "foreach", "--torch", "2"], 1),
                         (["--optimizer", "adagrad", "--optimizer-impl", "foreach", "--torch", "2"], 2)):
        t, pb = update_temps(*extra)
        check(t == lists * pb if t is not None else True,
              "%s: %s B of temporaries at the update's peak, want %d list(s) of the parameters' %s B" % (" ".join(extra), t, lists, pb))
    a = run_json(*TRAIN, "--optimizer", "sgd", "--torch", "2")
    b = run_json(*TRAIN, "--optimizer", "sgd", "--optimizer-impl", "foreach")
    c = run_json(*TRAIN, "--optimizer", "sgd")
    if a and b and c:
        pa, pb_, pc = (x["memory"]["steps"][0]["peak"] for x in (a, b, c))
        check(pa == pb_ == pc, "SGD's foreach path holds no list: peaks %d, %d, %d" % (pa, pb_, pc))


def case_paths():
    for opt, impl in (("adagrad", "foreach"), ("rmsprop", "foreach"), ("sgd", "fused"), ("adamw", "fused")):
        rc, _, err = run(*TRAIN, "--optimizer", opt, "--optimizer-impl", impl)
        check(rc == 2 and "torch 1.13" in err, "%s %s under 1.13: exit %d (%s), want 2 naming torch 1.13" % (opt, impl, rc, err.strip()[-120:]))
        d = run_json(*TRAIN, "--optimizer", opt, "--optimizer-impl", impl, "--torch", "2")
        check(d is not None and d["memory"].get("optimizer_impl") == impl, "%s %s under --torch 2 not taken" % (opt, impl))


def case_errors():
    for extra, why in ((["--torch", "2"], "needs --train"),
                       (["--train", "--torch", "3"], "not one of"),
                       (["--train", "--optimizer", "adam", "--runtime", "cpu", "--torch", "2"], "binds nothing"),
                       (["--train", "--optimizer", "adam", "--optimizer-impl", "single", "--torch", "2"], "binds nothing")):
        rc, _, err = run(MODEL, *extra)
        check(rc == 2 and "--torch" in err and why in err, "%s: exit %d, stderr %r; want 2 and '%s'" % (" ".join(extra), rc, err.strip()[-160:], why))


CASES = {"default": case_default, "lists": case_lists, "paths": case_paths, "errors": case_errors}

if __name__ == "__main__":
    CASES[sys.argv[3]]()
    print("%s: %d failure(s)" % (sys.argv[3], len(failures)))
    sys.exit(1 if failures else 0)
