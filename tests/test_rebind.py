#!/usr/bin/env python3
"""--max-batch re-binds the loaded model for every batch it tries, so what
was applied to the model holds throughout: with resnet50's layer1-3 frozen
(Adam, RTX 3090) the answer is larger than without, and single-batch runs
at the answer and one above confirm it (fits, does not fit, the same
figures). Also: the model's own batch comes back for the report.
Usage: test_rebind.py MEMEST SOURCE_ROOT (stdlib only)."""
import json
import os
import subprocess
import sys

memest, root = sys.argv[1], sys.argv[2]
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
        print("FAIL:", msg)


def run_json(*args):
    p = subprocess.run([memest, *args, "--format", "json"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"memest {' '.join(args)}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout)


model = os.path.join(root, "models", "onnx", "zoo", "resnet50.onnx")
base = [model, "--input", "3x224x224", "--train", "--optimizer", "adam", "--gpu", "rtx3090"]
frozen = ["--freeze", "layer1", "--freeze", "layer2", "--freeze", "layer3"]
cap = 24576 << 20

plain = run_json(*base, "--max-batch")["device"]["max_batch"]
d = run_json(*base, *frozen, "--batch", "3", "--max-batch")
mb = d["device"]["max_batch"]
b = mb["batch"]
check(b > plain["batch"], f"max batch {b} with layer1-3 frozen, {plain['batch']} without: freezing must let more fit")
check(d["inputs"][0]["shape"][0] == 3 and d["device"]["roofline_seconds"]["forward"] > 0,
      f"the report is not at the model's own batch 3 after the sweep: {d['inputs'][0]['shape']}")

# single-batch runs of the frozen model at the answer and one above
at_b = run_json(*base, *frozen, "--batch", str(b))["device"]
at_b1 = run_json(*base, *frozen, "--batch", str(b + 1))["device"]
check(at_b["fits"] and at_b["needed"] <= cap, f"batch {b} frozen: fits={at_b['fits']}, needs {at_b['needed']}")
check(not at_b1["fits"] and at_b1["needed"] > cap, f"batch {b + 1} frozen: fits={at_b1['fits']}, needs {at_b1['needed']}")
check(at_b["needed"] == mb["needed"] and at_b1["needed"] == mb["needed_next"],
      f"max-batch figures {mb['needed']}/{mb['needed_next']} differ from single runs {at_b['needed']}/{at_b1['needed']}")

# the unfrozen answer does not fit frozen-free at its frozen size
unfrozen_at_b = run_json(*base, "--batch", str(b))["device"]
check(not unfrozen_at_b["fits"], f"batch {b} fits without freezing too: the frozen answer proves nothing")

print(f"max batch: {plain['batch']} plain, {b} with layer1-3 frozen")
sys.exit(1 if fails else 0)
