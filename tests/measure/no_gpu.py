#!/usr/bin/env python3
"""memest-measure without a GPU: it must say so and exit 77 (meson counts 77
as a skip, so this wrapper turns the expected 77 into a pass).

usage: no_gpu.py MEMEST_MEASURE ROOT

Also checks the answers that need no GPU: a model it cannot run (exit 3,
naming the op), a missing file and bad usage (exit 2), --calibrate (77).
On a machine with a GPU the no-GPU cases do not apply (it says so and passes
on the rest).
"""
import os
import subprocess
import sys

exe, root = os.path.abspath(sys.argv[1]), sys.argv[2]
failures = []


def run(*args):
    p = subprocess.run([exe, *args], cwd=root, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def expect(label, cond, detail):
    if not cond:
        failures.append(f"{label}: {detail}")


# answers that need no GPU
rc, out, err = run("models/onnx/zoo/bert_like.onnx", "--input", "input_ids=1x128:int64")
if rc != 2:  # the file may need other inputs; it must not be measured either way
    expect("bert_like", rc == 3 and "no GPU kernel" in err, f"exit {rc}, expected 3 naming the op; stderr: {err!r}")

rc, out, err = run("models/does_not_exist.json")
expect("missing model", rc == 2 and "does_not_exist.json" in err, f"exit {rc}; stderr: {err!r}")

rc, out, err = run()
expect("no model", rc == 2 and "usage:" in err, f"exit {rc}; stderr: {err!r}")

rc, out, err = run("models/resnet18.json", "--optimizer", "lbfgs")
expect("bad optimizer", rc == 2 and "lbfgs" in err, f"exit {rc}; stderr: {err!r}")

rc, out, err = run("models/resnet18.json", "--batch", "0")
expect("bad batch", rc == 2 and "--batch" in err, f"exit {rc}; stderr: {err!r}")

rc, out, err = run("models/resnet18.json", "--device-profile", "models/does_not_exist_profile.json")
expect("missing profile", rc == 2 and "does_not_exist_profile.json" in err, f"exit {rc}; stderr: {err!r}")

# a model whose batch is fixed at 4: without --batch it is taken as it is
# (not refused as "--batch 1", an option nobody gave)
sys.path.insert(0, os.path.join(root, "tests"))
import tempfile  # noqa: E402
import onnx_craft as oc  # noqa: E402
with tempfile.TemporaryDirectory() as tmp:
    static = os.path.join(tmp, "static4.onnx")
    with open(static, "wb") as f:
        f.write(oc.model(oc.graph([oc.node("Relu", ["x"], ["y"], name="r")], [oc.value_info("x", [4, 8])],
                                  [oc.value_info("y", [4, 8])])))
    rc, out, err = run(static)
    expect("fixed batch", rc in (0, 77) and "--batch" not in err, f"exit {rc}; stderr: {err!r}")

# the no-GPU answer
rc, out, err = run("models/resnet18.json")
if rc == 0:
    print("a CUDA GPU is present here: the no-GPU answer does not apply (measured instead)")
    gpu = True
else:
    gpu = False
expect("resnet18", gpu or rc == 77, f"exit {rc}, expected 77; stderr: {err!r}")
expect("resnet18", gpu or ("no CUDA GPU available" in err and "nothing measured" in err),
       f"stderr does not say 'no CUDA GPU available ... nothing measured': {err!r}")
expect("resnet18", gpu or out == "", f"nothing measured, yet stdout has {out!r}")
expect("resnet18", "differs" not in err, f"the plan should match memest's timeline: {err!r}")

if not gpu:
    rc, out, err = run("models/resnet18.json", "--train", "--optimizer", "adam", "--batch", "4", "--format", "json")
    expect("resnet18 train", rc == 77 and "no CUDA GPU available" in err, f"exit {rc}; stderr: {err!r}")
    rc, out, err = run("--calibrate")
    expect("calibrate", rc == 77 and "no CUDA GPU available" in err, f"exit {rc}; stderr: {err!r}")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
