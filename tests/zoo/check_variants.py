#!/usr/bin/python3
"""memest on every export variant of the zoo against PyTorch's truth (issue 10).

usage: check_variants.py [--memest build/memest] [--manifest FILE] [--dir DIR]
           [--models a,b] [--batches 1,8] [--quiet]

Defaults: the committed subset (models/onnx/variants/ with its manifest
golden/truth/variants.json, made by tests/zoo/variants.py --committed). Over
the full git-ignored matrix: --dir build-variants (the manifest defaults to
DIR/variants.json).

For each variant file (memest --runtime cpu --format json, the inputs given
per sample with --input and the batch with --batch, so a static batch-1
export is asked for batch 8 too):
  params  totals.params == the manifest's params (PyTorch's count for what
          the file holds: a tied head once, folded BatchNorm as fx fuses it)
  macs    totals.macs == the dispatch-level count of golden/truth/zoo/<model>
          .json at batches 1 and 8 (aten convolution/mm/addmm/bmm/... in an
          eval forward). Folding BatchNorm into Conv does not change the
          contractions PyTorch ran, so folded exports are held to it too;
          the table marks them (F).
  memory  each step's predicted peak within 2 % of the peak PyTorch measured
          (golden/truth/memory/<model>.json, tests/oracle/measure_memory.py)
          for infer_nograd, infer_grad, train_sgd, train_adam (steps 1-2) at
          batches 1 and 8, where the truth has the cell. A file whose
          BatchNorm was folded cannot express grad or train: memest must
          then put a note with code "folded_batchnorm" in the JSON "notes"
          array (its peak is not compared).
  spread  the variants of one model predict within 1 % of each other for
          each mode, batch and step they can express.
A failure of a file whose report carries a note saying what the file cannot
show (tied_weights, folded_constants, parameter_or_buffer) is tagged with
the note's code; it is still a failure.
A static export asked for batch 8 may instead stop with an error naming the
node that bakes the batch into a constant (issue 10, done means 4): listed
as REFUSED, not a failure; any other refusal is a failure.
Loss as tests/test_memory.py: the truth's own (tests/truth_loss.py).

Prints a table model x variant x mode (the signed % error of the worst
batch/step, "note" for a folded-BN file that printed the note, "-" where
there is no truth) with the largest error named, then every failure; exits
1 on any failure. Never relaxed to pass: a failure is memest's to fix.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from truth_loss import memest_loss  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOL_PEAK = 0.02
TOL_SPREAD = 0.01
MODES = {  # oracle mode -> memest options (the loss is added for training)
    "infer_nograd": [],
    "infer_grad": ["--grad"],
    "train_sgd": ["--train", "--optimizer", "sgd"],
    "train_adam": ["--train", "--optimizer", "adam"],
}
# notes in which memest says what the file cannot show (issue 10's "never
# silently wrong"): a failure of a file that printed one is tagged with it,
# and still counts as a failure
STATED = ("tied_weights", "folded_constants", "parameter_or_buffer", "python_names")
SHORT = {"infer_nograd": "nograd", "infer_grad": "grad", "train_sgd": "sgd",
         "train_adam": "adam"}


def load(path):
    with open(path) as f:
        return json.load(f)


def run_memest(memest, path, entry, batch, extra):
    args = [memest, path, "--batch", str(batch), "--runtime", "cpu", "--format", "json"]
    for i in entry["inputs"]:
        args += ["--input", "%s=%s:%s" % (i["name"], "x".join(map(str, i["shape"])), i["dtype"])]
    p = subprocess.run(args + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode:
        err = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
        return None, "memest exit %d: %s" % (p.returncode, err[:200])
    try:
        return json.loads(p.stdout), None
    except ValueError as e:
        return None, "memest printed no JSON: %s" % e


_MACS = {}


def zoo_macs(model):
    """Dispatch-level MACs per batch (golden/truth/zoo/<model>.json, made by
    tests/zoo/export_zoo2.py); read at check time, so the manifest need not be
    remade when that truth is."""
    if model not in _MACS:
        p = os.path.join(ROOT, "golden", "truth", "zoo", model + ".json")
        _MACS[model] = ({b: e["macs"] for b, e in load(p)["batches"].items()}
                        if os.path.exists(p) else {})
    return _MACS[model]


def baked_refusal(entry, batch, err):
    """Issue 10 (done means 4): on a static export memest may stop at another
    batch when the exporter baked the batch into a constant, with an error
    naming the node. Anything else (a refusal naming only the input) fails."""
    return entry["batch"] == "static" and batch != 1 and "node" in err.split(":", 1)[-1]


def note_codes(rep):
    return {n.get("code") for n in rep.get("notes", []) if isinstance(n, dict)}


def variant_tag(fn, model):
    return fn[len(model) + 2:-5] if fn.startswith(model + "__") else fn


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memest", default=os.path.join(ROOT, "build", "memest"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "models", "onnx", "variants"))
    ap.add_argument("--manifest")
    ap.add_argument("--models")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--quiet", action="store_true", help="table and failure count only")
    a = ap.parse_args()
    manifest = a.manifest or (os.path.join(ROOT, "golden", "truth", "variants.json")
                              if os.path.abspath(a.dir) == os.path.join(ROOT, "models", "onnx", "variants")
                              else os.path.join(a.dir, "variants.json"))
    man = load(manifest)
    batches = [int(b) for b in a.batches.split(",")]
    only = set(a.models.split(",")) if a.models else None
    failures = []
    refusals = []       # static exports refused at another batch, naming a node
    rows = []           # (model, tag, folded, {mode: cell text}, worst text)
    preds = {}          # (model, mode, batch, step) -> [(tag, peak)]
    mem_truth = {}
    stated = {}         # file -> codes of STATED notes it printed
    n_checked = 0
    for fn, e in sorted(man["variants"].items(), key=lambda kv: (kv[1]["model"], kv[0])):
        model = e["model"]
        if only and model not in only:
            continue
        path = os.path.join(a.dir, fn)
        tag = variant_tag(fn, model)
        if not os.path.exists(path):
            failures.append("%s: file missing (in the manifest)" % fn)
            continue
        n_checked += 1
        if model not in mem_truth:
            tp = os.path.join(ROOT, "golden", "truth", "memory", model + ".json")
            mem_truth[model] = load(tp) if os.path.exists(tp) else None
        truth = mem_truth[model]
        loss = memest_loss(truth.get("loss")) if truth else "cross-entropy"
        cells = {}
        worst = (0.0, "")
        # params and MACs (inference runs, one per batch)
        for b in batches:
            rep, err = run_memest(a.memest, path, e, b, [])
            if err:
                if baked_refusal(e, b, err):
                    refusals.append("%s b%d: %s" % (fn, b, err))
                else:
                    failures.append("%s b%d: %s" % (fn, b, err))
                    cells.setdefault("params", "ERR")
                continue
            if b == batches[0]:
                stated[fn] = sorted(note_codes(rep) & set(STATED))
                got = rep["totals"]["params"]
                if e.get("params") is None or got != e["params"]:
                    failures.append("%s: params %d, PyTorch %s (%s)" % (fn, got, e.get("params"),
                                                                         e.get("params_rule", "")))
                    cells["params"] = "%+d" % (got - (e.get("params") or 0))
                    d = abs(got - (e.get("params") or 0)) / max(1, e.get("params") or 1)
                    if d > worst[0]:
                        worst = (d, "params %+.2f%%" % (100 * d))
                else:
                    cells["params"] = "ok"
            want = zoo_macs(model).get(str(b))
            got = rep["totals"]["macs"]
            if want is None:
                cells.setdefault("macs", "-")
            elif got != want:
                d = (got - want) / want
                failures.append("%s b%d: MACs %d, dispatch-level %d (%+.3f%%)%s"
                                % (fn, b, got, want, 100 * d, " [BN folded]" if e["bn_folded"] else ""))
                cells["macs"] = "%+.2f%%" % (100 * d)
                if abs(d) > worst[0]:
                    worst = (abs(d), "macs b%d %+.2f%%" % (b, 100 * d))
            else:
                cells.setdefault("macs", "ok")
        # memory
        for mode, opts in MODES.items():
            errs, marks, noted = [], [], False
            for b in batches:
                tb = (truth or {}).get("batches", {}).get(str(b), {}).get(mode)
                if tb is None:
                    continue
                extra = list(opts) + (["--loss", loss] if mode.startswith("train") else [])
                rep, err = run_memest(a.memest, path, e, b, extra)
                if err:
                    if baked_refusal(e, b, err):
                        marks.append("BAKED")
                    else:
                        failures.append("%s b%d %s: %s" % (fn, b, mode, err))
                        marks.append("ERR")
                    continue
                if e["bn_folded"] and mode != "infer_nograd":
                    if "folded_batchnorm" in note_codes(rep):
                        noted = True
                    else:
                        failures.append("%s b%d %s: BatchNorm folded in the export but no "
                                        "'folded_batchnorm' note in the report" % (fn, b, mode))
                        marks.append("NONOTE")
                    continue
                steps = rep["memory"]["steps"]
                # --grad reports the first call and the loop's steady state
                # (the second call beside the first's graph); the oracle's
                # infer_grad is one call: compare the first
                if mode == "infer_grad":
                    steps = steps[:1]
                meas = ([tb["peak"]] if mode.startswith("infer")
                        else [tb["step1"]["peak"], tb["step2"]["peak"]])
                if len(steps) != len(meas):
                    failures.append("%s b%d %s: memest gave %d step(s), PyTorch %d"
                                    % (fn, b, mode, len(steps), len(meas)))
                    marks.append("STEPS")
                    continue
                for i, (s, m) in enumerate(zip(steps, meas)):
                    d = (s["peak"] - m) / m
                    errs.append(d)
                    preds.setdefault((model, mode, b, i + 1), []).append((tag, s["peak"]))
                    if (abs(d) > TOL_PEAK and e.get("mode") == "eval" and mode.startswith("train")
                            and "eval_export_dropout" in note_codes(rep)):
                        # an eval export holds no Dropout: the graph cannot
                        # express model.train()'s masks, and memest says so;
                        # nor is it compared with the variants that can
                        preds[(model, mode, b, i + 1)].pop()
                        noted = True
                        continue
                    if abs(d) > TOL_PEAK:
                        failures.append("%s b%d %s step %d: predicted %.2f MiB, PyTorch %.2f MiB "
                                        "(%+.2f%%)" % (fn, b, mode, i + 1, s["peak"] / 2**20,
                                                       m / 2**20, 100 * d))
                    if abs(d) > worst[0]:
                        worst = (abs(d), "%s b%d%s %+.2f%%" % (SHORT[mode], b,
                                 "" if mode.startswith("infer") else " s%d" % (i + 1), 100 * d))
            if errs:  # a trailing ! : another batch of this mode gave a mark
                cells[mode] = "%+.1f%%" % (100 * max(errs, key=abs)) + ("!" if marks else "")
            elif marks:
                cells[mode] = marks[0]
            else:
                cells[mode] = "note" if noted else "-"
        rows.append((model, tag, e["bn_folded"], cells, worst[1] or "-"))
        if not a.quiet:
            print("checked %s" % fn, file=sys.stderr, flush=True)
    # spread between the variants of one model
    for (model, mode, b, step), lst in sorted(preds.items()):
        if len(lst) < 2:
            continue
        lo, hi = min(lst, key=lambda x: x[1]), max(lst, key=lambda x: x[1])
        if hi[1] > lo[1] * (1 + TOL_SPREAD):
            failures.append("%s %s b%d step %d: variants differ by %.2f%% (%s %.2f MiB, %s %.2f MiB)"
                            % (model, mode, b, step, 100 * (hi[1] / lo[1] - 1), lo[0],
                               lo[1] / 2**20, hi[0], hi[1] / 2**20))
    def tagged(f):
        codes = set()
        for fn, c in stated.items():
            m = man["variants"][fn]["model"]
            if f.startswith(fn + ":") or f.startswith(fn + " ") or f.startswith(m + " "):
                codes |= set(c)
        return f + (" [notes printed: %s]" % ", ".join(sorted(codes)) if codes else "")
    failures = [tagged(f) for f in failures]
    cols = ["params", "macs"] + list(MODES)
    hdr = "%-20s %-22s %-7s %-7s " % ("model", "variant", "params", "macs") + \
        " ".join("%-7s" % SHORT[m] for m in MODES) + "  largest error"
    print(hdr)
    print("-" * len(hdr))
    for model, tag, folded, cells, worst in rows:
        print("%-20s %-22s " % (model, tag + (" (F)" if folded else "")) +
              " ".join("%-7s" % cells.get(c, "-") for c in cols) + "  " + worst)
    print("\n(F) BatchNorm folded into Conv by the export: grad/train must print the "
          "'folded_batchnorm' note; cells: signed % error of the worst batch/step, ok, "
          "note, - (no truth), ERR (memest failed), a trailing ! (the other batch gave "
          "ERR/BAKED/...), BAKED (static export refused at "
          "batch 8 with an error naming the node that bakes the batch), NONOTE, STEPS")
    for r in refusals:
        print("REFUSED (batch baked into a node, allowed) " + r)
    print("%d variant files checked, %d failure(s)" % (n_checked, len(failures)))
    for f in failures:
        print("FAIL " + f)
    if not n_checked:
        print("FAIL no variant file checked")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
