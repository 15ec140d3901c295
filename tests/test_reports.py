#!/usr/bin/env python3
"""Tests of the reports beyond the table, through the memest command.

usage: test_reports.py MEMEST SOURCE_ROOT CASE

  schema  JSON reports validate against doc/report-schema.json (and a broken
          one does not, so the validator is not vacuous)
  check   --update-golden / --check / --tolerance and their exit codes
  plot    --plot FILE.svg
  netron  --netron FILE

Stdlib only: the validator below knows the JSON Schema keywords the schema
uses (type, required, properties, additionalProperties, items, enum,
pattern, $ref). The CLI cases exit 77 (meson: skipped) while the memest
command does not know the option yet.
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run  # noqa: E402

CASE = sys.argv[3]
SKIP = 77


def needs_option(rc, err, option):
    """True (and a note) when memest rejected option as unknown."""
    if rc == 2 and "unknown option" in err and option in err:
        print(f"memest does not know {option} yet: skipped")
        return True
    return False


# --- a small JSON Schema validator -------------------------------------------

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool)
    or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
KNOWN = {"$schema", "$id", "title", "description", "definitions", "type", "required", "properties",
         "additionalProperties", "items", "enum", "pattern", "$ref"}


def resolve(root, ref):
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref supported: {ref}")
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def validate(schema, doc, root=None, where="$"):
    """Errors of doc against schema, as 'where: what' strings."""
    root = root if root is not None else schema
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) this validator does not know: {sorted(unknown)}")
    if "$ref" in schema:  # draft-07: $ref replaces its siblings
        return validate(resolve(root, schema["$ref"]), doc, root, where)
    errs = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](doc) for t in types):
            return [f"{where}: {type(doc).__name__} {json.dumps(doc)[:60]} is not {'/'.join(types)}"]
    if "enum" in schema and not any(doc == e and type(doc) is type(e) for e in schema["enum"]):
        errs.append(f"{where}: {json.dumps(doc)[:60]} not one of {schema['enum']}")
    if "pattern" in schema and isinstance(doc, str) and not re.search(schema["pattern"], doc):
        errs.append(f"{where}: '{doc[:60]}' does not match {schema['pattern']}")
    if isinstance(doc, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in doc:
                errs.append(f"{where}: '{k}' is required")
        extra = schema.get("additionalProperties", True)
        for k, v in doc.items():
            if k in props:
                errs += validate(props[k], v, root, f"{where}.{k}")
            elif extra is False:
                errs.append(f"{where}: '{k}' is not allowed")
            elif isinstance(extra, dict):
                errs += validate(extra, v, root, f"{where}.{k}")
    if isinstance(doc, list) and "items" in schema:
        for i, v in enumerate(doc):
            errs += validate(schema["items"], v, root, f"{where}[{i}]")
    return errs


def load_schema():
    with open(path("doc", "report-schema.json")) as f:
        return json.load(f)


def report(*args):
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, f"memest {' '.join(args)} failed ({rc}): {err}")
    return json.loads(out) if rc == 0 else None


# --- cases -------------------------------------------------------------------

def case_schema():
    schema = load_schema()
    check(schema.get("$id") == "memest-report/1", "schema $id is not memest-report/1")
    runs = [
        ("models/resnet18.json",),
        ("models/onnx/zoo/gpt_like.onnx", "--input", "input_ids=128:int64", "--batch", "2", "--train", "--optimizer", "adam"),
        ("models/resnet18.json", "--convention", "torchstat"),
        ("models/resnet18.json", "--train", "--runtime", "cpu", "--checkpoint", "sqrt", "--amp", "bf16"),
        ("models/resnet18.json", "--train", "--optimizer", "adam", "--torch", "2"),  # optimizer_impl, torch
        ("models/resnet18.json", "--train", "--optimizer", "adam", "--gpu", "rtx3090", "--max-batch"),
    ]
    docs = []
    for args in runs:
        doc = report(path(args[0]), *args[1:])
        if doc is None:
            continue
        errs = validate(schema, doc)
        check(not errs, f"{' '.join(args)}: {len(errs)} schema error(s): {errs[:5]}")
        docs.append(doc)
    if not docs:
        return
    # the keys this case must have exercised, so a schema that allows
    # anything would not pass unnoticed
    check("madd" in docs[2]["totals"] and "memory" in docs[1] and docs[1]["constants"]
          and "max_batch" in docs[-1].get("device", {}), "runs did not cover madd/memory/constants/device")
    # broken documents fail
    doc = docs[0]
    broken = [("no totals", {k: v for k, v in doc.items() if k != "totals"}, "'totals' is required"),
              ("extra key", dict(doc, surprise=1), "'surprise' is not allowed"),
              ("bad enum", dict(doc, convention="mine"), "not one of"),
              ("bad count", dict(doc, totals=dict(doc["totals"], params="12x")), "does not match"),
              ("bad layer", dict(doc, layers=[dict(doc["layers"][0], params=[1])]), "$.layers[0].params"),
              ("bad step", dict(doc, memory=dict(doc["memory"], steps=[{"step": 1}])), "'at_peak' is required")]
    for name, bad, want in broken:
        errs = validate(schema, bad)
        check(any(want in e for e in errs), f"broken document '{name}' not rejected as expected ({want}): {errs[:3]}")


def case_check():
    model = path("models", "resnet18.json")
    with tempfile.TemporaryDirectory() as tmp:
        golden = os.path.join(tmp, "golden.json")
        rc, out, err = run(model, "--update-golden", golden)
        if needs_option(rc, err, "--update-golden"):
            sys.exit(SKIP)
        check(rc == 0, f"--update-golden failed ({rc}): {err}")
        with open(golden) as f:
            g = json.load(f)
        check("not truth" in g.get("golden", ""), "the golden does not say it is made by memest, not truth")
        errs = validate(load_schema(), g)
        check(not errs, f"the golden does not validate: {errs[:5]}")

        rc, out, err = run(model, "--check", golden)
        check(rc == 0 and "golden check passed" in out + err, f"unchanged golden: rc {rc}, {out}{err}")

        g["totals"]["macs"] = round(g["totals"]["macs"] / 1.05)
        edited = os.path.join(tmp, "edited.json")
        with open(edited, "w") as f:
            json.dump(g, f)
        rc, out, err = run(model, "--check", edited, "--tolerance", "1")
        check(rc == 1 and "totals.macs" in out + err and "+5" in out + err, f"macs +5% at 1%: rc {rc}, {out}{err}")
        rc, out, err = run(model, "--check", edited, "--tolerance", "6")
        check(rc == 0, f"macs +5% at 6%: rc {rc}, {out}{err}")
        rc, out, err = run(model, "--check", os.path.join(tmp, "missing.json"))
        check(rc == 2 and "missing.json" in err, f"missing golden: rc {rc}, {err}")


def case_plot():
    with tempfile.TemporaryDirectory() as tmp:
        svg = os.path.join(tmp, "timeline.svg")
        rc, out, err = run(path("models", "resnet18.json"), "--train", "--plot", svg)
        if needs_option(rc, err, "--plot"):
            sys.exit(SKIP)
        check(rc == 0, f"--plot failed ({rc}): {err}")
        with open(svg) as f:
            text = f.read()
        check(text.startswith("<svg") and "peak " in text and "(backward)" in text, "the plot has no <svg> or no peak label")
        rc, out, err = run(path("models", "resnet18.json"), "--train", "--gpu", "rtx3090", "--plot", svg)
        if rc == 0:
            with open(svg) as f:
                check("rtx3090 " in f.read(), "--gpu rtx3090: no capacity line named rtx3090")


def case_netron():
    model = path("models", "onnx", "zoo", "gpt_like.onnx")
    args = ("--input", "input_ids=128:int64")
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "metrics.json")
        rc, out, err = run(model, *args, "--netron", out_path)
        if needs_option(rc, err, "--netron"):
            sys.exit(SKIP)
        check(rc == 0, f"--netron failed ({rc}): {err}")
        with open(out_path) as f:
            metrics = json.load(f)["metrics"]
        doc = report(model, *args)
        if doc is None:
            return
        check([m["name"] for m in metrics] == [r["node"] for r in doc["layers"]], "metrics are not the report's rows by node name")
        for m, r in zip(metrics, doc["layers"]):
            if (m["params"], m["macs"], m["flops"], m["output_bytes"], m["module"], m["op"]) != \
               (r["params"], r["macs"], r["flops"], r["output_bytes"], r["name"], r["op"]):
                check(False, f"metrics for {m['name']} differ from the report's row")
                break


CASES = {"schema": case_schema, "check": case_check, "plot": case_plot, "netron": case_netron}

if __name__ == "__main__":
    CASES[CASE]()
    print(f"{CASE}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
