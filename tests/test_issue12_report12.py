#!/usr/bin/env python3
"""Issue 12, reports and golden checks: what each format says, per item.

usage: test_issue12_report12.py MEMEST SOURCE_ROOT CASE

  per_gpu       (8)  --gpus/--shard figures say they are per GPU; a golden of
                     another setup is a setup error, not moved figures
  no_roofline   (9)  --gpu-mem alone: no NaN roofline, the reason instead
  golden_valid  (10) invalid figures are exit 2 naming the JSON path; a
                     figure or memory on one side only is moved, never a pass
  whole_answer  (11) CSV and Markdown carry totals, memory peaks with their
                     breakdown and the GPU section
  units         (12) labels say MiB where MiB is meant; torchstat's MB named
  answer_first  (13) with --gpu the fit answer comes before the table
  svg_scale     (14) the y axis follows the data, the capacity as a marker;
                     no hairline phase band
  escape_names  (15) control characters in names are escaped in the table,
                     Markdown and stderr
"""
import csv
import io
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as craft  # noqa: E402
from harness import check, failures, path, run  # noqa: E402

CASE = sys.argv[3]
RESNET = path("models", "resnet18.json")


def case_per_gpu():
    rc, out, err = run(RESNET, "--train", "--optimizer", "adam", "--gpus", "8", "--shard", "zero3")
    check(rc == 0, f"zero3 table: rc {rc} {err}")
    mem = out[out.find("\nMemory,"):]
    check("per GPU" in mem and "8 GPUs, zero3" in mem, f"the memory section does not say per GPU under zero3:\n{mem[:400]}")
    rc, out, err = run(RESNET, "--train", "--optimizer", "adam", "--gpus", "8", "--shard", "zero3", "--format", "json")
    doc = json.loads(out) if rc == 0 else {}
    m = doc.get("memory", {})
    check(m.get("gpus") == 8 and m.get("shard") == "zero3" and "per_gpu" in m, f"JSON memory does not say per GPU: {m}")
    with tempfile.TemporaryDirectory() as tmp:
        golden = os.path.join(tmp, "g.json")
        rc, _, err = run(RESNET, "--train", "--optimizer", "adam", "--update-golden", golden)
        check(rc == 0, f"--update-golden: rc {rc} {err}")
        for extra, what in ((("--gpus", "8", "--shard", "zero3"), "gpus"), (("--batch", "4"), "inputs"),
                            (("--dtype", "fp16"), "inputs"), (("--runtime", "cpu"), "runtime"),
                            (("--gpu", "rtx3090"), "gpu")):
            rc, out, err = run(RESNET, "--train", "--optimizer", "adam", *extra, "--check", golden)
            check(rc == 2 and what in err and "setup" in err and "moved" not in out + err,
                  f"golden without {extra} checked with it: rc {rc}, {out[-200:]}{err}")
        rc, out, err = run(RESNET, "--train", "--optimizer", "adam", "--check", golden)
        check(rc == 0 and "passed" in out + err, f"same setup: rc {rc} {err}")


def case_no_roofline():
    rc, out, err = run(RESNET, "--gpu-mem", "8GiB", "--train")
    check(rc == 0, f"--gpu-mem: rc {rc} {err}")
    check("nan" not in out.lower() and "0 GB/s" not in out and "0.0 TFLOP/s" not in out,
          f"--gpu-mem table prints a roofline of nothing:\n{out[out.find(chr(10) + 'GPU'):]}")
    check("roofline: left out" in out and "bandwidth" in out, "--gpu-mem table does not say why there is no roofline")
    check("100.00%" not in out, "the duration column claims 100% of a time that is not known")
    rc, out, err = run(RESNET, "--gpu-mem", "8GiB", "--train", "--format", "json")
    dev = json.loads(out).get("device", {}) if rc == 0 else {}
    check("roofline_seconds" in dev and dev["roofline_seconds"] is None and "bandwidth" in dev.get("roofline_skipped", ""),
          f"JSON roofline without bandwidth: {dev}")
    check("samples_per_second" not in dev, f"JSON gives samples/s without a roofline: {dev}")
    # a GPU with figures keeps its roofline
    rc, out, err = run(RESNET, "--gpu", "rtx3090", "--train")
    check(rc == 0 and re.search(r"roofline: forward [0-9.]+ ms", out), "rtx3090 lost its roofline")


def case_golden_valid():
    with tempfile.TemporaryDirectory() as tmp:
        golden = os.path.join(tmp, "g.json")
        rc, _, err = run(RESNET, "--train", "--update-golden", golden)
        check(rc == 0, f"--update-golden: rc {rc} {err}")
        base = json.load(open(golden))
        edited = os.path.join(tmp, "e.json")

        def with_edit(edit):
            g = json.loads(json.dumps(base))
            edit(g)
            with open(edited, "w") as f:
                json.dump(g, f)
            return run(RESNET, "--train", "--check", edited)

        bad = [("totals.params", lambda g: g["totals"].__setitem__("params", -5)),
               ("totals.flops", lambda g: g["totals"].__setitem__("flops", 1e300)),
               ("totals.macs", lambda g: g["totals"].__setitem__("macs", "12")),
               ("totals.mem_read", lambda g: g["totals"].__setitem__("mem_read", None)),
               ("totals.nodes", lambda g: g["totals"].__setitem__("nodes", 1.5)),
               ("layers[3].params", lambda g: g["layers"][3].__setitem__("params", -1)),
               ("layers[0].macs", lambda g: g["layers"][0].__setitem__("macs", "lots")),
               ("memory.steps[0].peak", lambda g: g["memory"]["steps"][0].__setitem__("peak", None)),
               ("memory.steps[1].at_peak.weights", lambda g: g["memory"]["steps"][1]["at_peak"].__setitem__("weights", -1))]
        for where, edit in bad:
            rc, out, err = with_edit(edit)
            check(rc == 2 and where in err and "passed" not in out + err, f"invalid {where}: rc {rc}, {out[-200:]}{err}")
        moved = [("no memory", lambda g: g.pop("memory"), "memory"),
                 ("no steps", lambda g: g["memory"].pop("steps"), "memory.steps[0]"),
                 ("one step", lambda g: g["memory"]["steps"].pop(), "memory.steps[1]"),
                 ("no totals.params", lambda g: g["totals"].pop("params"), "totals.params"),
                 ("no layer flops", lambda g: g["layers"][2].pop("flops"), "flops"),
                 ("no step peak", lambda g: g["memory"]["steps"][0].pop("peak"), "memory.steps[0].peak")]
        for what, edit, name in moved:
            rc, out, err = with_edit(edit)
            check(rc == 1 and name in out + err and "moved" in out + err, f"golden with {what}: rc {rc}, {out[-300:]}{err}")
        rc, out, err = with_edit(lambda g: None)
        check(rc == 0 and "passed" in out + err, f"the unedited golden: rc {rc} {err}")


def split_csv(text):
    """The rows and the summary table, split at the first empty line."""
    rows, _, summary = text.partition("\n\n")
    check(summary != "", "the CSV has no second section (no empty line after the rows)")
    return list(csv.reader(io.StringIO(rows))), list(csv.reader(io.StringIO(summary)))


def case_whole_answer():
    rc, out, err = run(RESNET, "--train", "--gpu", "rtx3090", "--format", "csv")
    check(rc == 0, f"csv: rc {rc} {err}")
    rows, summary = split_csv(out)
    check(rows[0][0] == "module" and len(rows) > 10, "the CSV rows lost their header")
    check(summary and summary[0] == ["section", "field", "value", "unit"], f"no summary section header: {summary[:1]}")
    facts = {(r[0], r[1]): r[2] for r in summary[1:] if len(r) == 4}
    rc, js, _ = run(RESNET, "--train", "--gpu", "rtx3090", "--format", "json")
    doc = json.loads(js)
    for key in ("params", "macs", "flops", "mem_read", "mem_write", "output_bytes"):
        check(facts.get(("totals", key)) == str(doc["totals"][key]), f"CSV totals.{key} {facts.get(('totals', key))} != JSON")
    for s, step in enumerate(doc["memory"]["steps"]):
        sec = f"memory.step{s + 1}"
        check(facts.get((sec, "peak")) == str(step["peak"]), f"CSV {sec} peak missing or wrong")
        for cat, v in step["at_peak"].items():
            check(facts.get((sec + ".at_peak", cat)) == str(v), f"CSV {sec} at_peak {cat} missing")
    check(facts.get(("device", "gpu")) == doc["device"]["gpu"] and facts.get(("device", "fits")) == "yes"
          and facts.get(("device", "needed")) == str(doc["device"]["needed"]), "CSV device section missing or wrong")
    check(("device", "roofline.step") in facts, "CSV has no roofline")
    rc, md, err = run(RESNET, "--train", "--gpu", "rtx3090", "--format", "markdown")
    check(rc == 0 and "| section | field | value | unit |" in md, "Markdown has no summary table")
    check(f"| memory.step2 | peak | {doc['memory']['steps'][1]['peak']} | bytes |" in md, "Markdown lacks the peak")
    check(f"| device | needed | {doc['device']['needed']} | bytes |" in md, "Markdown lacks the GPU section")


def case_units():
    rc, out, err = run(RESNET)
    check(rc == 0 and "memory(MiB)" in out and "memory(MB)" not in out, "the default table's memory column is not labelled MiB")
    check("MB = 10^6 bytes" in out, "the seed view does not say its MB is 10^6 bytes")
    rc, out, err = run(RESNET, "--convention", "torchstat")
    head = out.split("\n", 2)
    check(rc == 0 and "torchstat" in head[0] and "2^20" in head[0] and "memory(MB)" in head[1],
          f"torchstat's header does not say its MB is torchstat's: {head[:2]}")


def case_answer_first():
    rc, out, err = run(RESNET, "--train", "--gpu", "rtx3090")
    first = out.split("\n")[0]
    check(rc == 0 and first.startswith("FITS on rtx3090") and "headroom" in first and "MiB" in first,
          f"first line is not the fit answer: {first!r}")
    check("max_memory_allocated" in out.split("\n")[1] and "out of memory" in out.split("\n")[1],
          "the answer does not say which figure is compared with the card")
    rc, out, err = run(RESNET, "--train", "--gpu-mem", "100MiB")
    check(out.startswith("DOES NOT FIT") and "short by" in out.split("\n")[0], f"too small a card: {out[:120]!r}")
    rc, out, err = run(RESNET, "--train")
    check(out.lstrip().startswith("module name"), "without --gpu the table still comes first")


def case_svg_scale():
    with tempfile.TemporaryDirectory() as tmp:
        svg = os.path.join(tmp, "t.svg")
        rc, _, err = run(RESNET, "--train", "--optimizer", "sgd", "--gpu", "h100", "--plot", svg)
        check(rc == 0, f"--plot: rc {rc} {err}")
        text = open(svg).read()
        # plot area y 96..528: the peak marker must sit in the top third
        m = re.search(r'<circle cx="[0-9.]+" cy="([0-9.]+)"', text)
        check(m and float(m.group(1)) < 96 + 432 / 3, f"peak marker at y {m and m.group(1)}: the axis follows the card")
        check(re.search(r"h100\S* [0-9.]+ GiB", text) and "above this axis" in text, "no capacity marker for the off-scale card")
        # resnet50's SGD step: one optimizer event among ~500 (1.6 px before)
        rc, _, err = run(path("models", "resnet50.json"), "--train", "--optimizer", "sgd", "--plot", svg)
        text = open(svg).read()
        bands = re.findall(r'<rect x="[0-9.]+" y="96" width="([0-9.]+)" height="432" fill="(#e6eef8|#fbebdc|#e4f2e0)"', text)
        check(rc == 0 and len(bands) >= 3, f"resnet50 plot: rc {rc}, bands {bands}")
        for w, fill in bands:
            check(float(w) >= 3, f"phase band {fill} is {w} px wide")
        # a card near the peak still gets its line on the scale
        rc, _, err = run(RESNET, "--train", "--gpu-mem", "160MiB", "--plot", svg)
        text = open(svg).read()
        check(rc == 0 and "above this axis" not in text and re.search(r"GPU 0\.16 GiB|custom 0\.16 GiB", text),
              "a card near the peak is not drawn as a line on the scale")


EVIL = "relu\x1b[31mRED\nnext\u009b"


def evil_models(tmp):
    good = craft.model(craft.graph([craft.node("Relu", ["x"], ["y"], name=EVIL)], [craft.value_info("x", [1, 4])],
                                   [craft.value_info("y", [])]))
    w = craft.tensor("w", [8, 5, 3, 3], raw=bytes(8 * 5 * 9 * 4))
    bad = craft.model(craft.graph([craft.node("Conv", ["x", "w"], ["y"], name=EVIL)], [craft.value_info("x", [1, 3, 8, 8])],
                                  [craft.value_info("y", [])], [w]))
    paths = os.path.join(tmp, "evil.onnx"), os.path.join(tmp, "evil_bad.onnx")
    for p, b in zip(paths, (good, bad)):
        with open(p, "wb") as f:
            f.write(b)
    return paths


def raw_control(s):
    return any(ord(ch) < 0x20 and ch not in "\n" or ord(ch) == 0x7f or 0x80 <= ord(ch) <= 0x9f for ch in s)


def case_escape_names():
    with tempfile.TemporaryDirectory() as tmp:
        good, bad = evil_models(tmp)
        rc, out, err = run(good)
        check(rc == 0 and "relu\\e[31mRED\\nnext\\u009b" in out and not raw_control(out + err), f"table: {out[:400]!r}")
        check("\nnext" not in out, "the table row is split by a raw newline")
        rc, out, err = run(good, "--format", "markdown")
        check(rc == 0 and not raw_control(out) and "\nnext" not in out, f"markdown: {out[:400]!r}")
        rc, out, err = run(bad)
        check(rc == 2 and "relu\\e[31mRED\\nnext\\u009b" in err and not raw_control(err) and err.count("\n") == 1,
              f"stderr: rc {rc} {err!r}")
        # an unknown op: the timeline's note about it names the node on stderr
        unk = craft.model(craft.graph([craft.node("NoSuchOp", ["x"], ["y"], name=EVIL)], [craft.value_info("x", [1, 4])],
                                      [craft.value_info("y", [1, 4])]))
        p = os.path.join(tmp, "evil_unknown.onnx")
        with open(p, "wb") as f:
            f.write(unk)
        rc, out, err = run(p)
        check(rc == 0 and "relu\\e[31mRED\\nnext\\u009b" in err and not raw_control(out + err) and "\nnext" not in err,
              f"unknown op's note: rc {rc} {err!r}")
        # a weight held in a Constant node: the table names it
        w = craft.tensor(EVIL, [4, 2], raw=bytes(32))
        cw = craft.model(craft.graph([craft.node("Constant", [], [EVIL], name="c",
                                                 attrs=[craft.f_bytes(1, "value") + craft.f_bytes(5, w) + craft.f_varint(20, 4)]),
                                      craft.node("MatMul", ["x", EVIL], ["y"], name="mm")],
                                     [craft.value_info("x", [1, 4])], [craft.value_info("y", [1, 2])]))
        p = os.path.join(tmp, "evil_constw.onnx")
        with open(p, "wb") as f:
            f.write(cw)
        rc, out, err = run(p)
        check(rc == 0 and "Weights held in Constant nodes" in out and "relu\\e[31mRED\\nnext\\u009b" in out
              and not raw_control(out + err), f"Constant-node weight's name: rc {rc} {out[-300:]!r} {err!r}")


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}
if CASE not in CASES:
    sys.exit(f"unknown case {CASE}; one of {sorted(CASES)}")
CASES[CASE]()
sys.exit(1 if failures else 0)
