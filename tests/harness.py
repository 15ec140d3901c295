"""What the Python test drivers share: the memest command and source root
from their arguments (usage: DRIVER MEMEST SOURCE_ROOT CASE ...), running
memest, and failures collected instead of stopping at the first."""
import os
import subprocess
import sys

MEMEST, ROOT = sys.argv[1], sys.argv[2]
failures = []


def run(*args):
    p = subprocess.run([MEMEST, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, p.stdout, p.stderr


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def path(*p):
    return os.path.join(ROOT, *p)


def canon_absorbed(report):
    """Names of the file's values a canonical row stands for, as a predicate:
    canonicalization (src/canon) makes an exporter's MatMul [+ Add] and the
    weight's Transpose one Linear row, so their outputs are no longer
    reported. A value counts as absorbed when it is the output of such a
    node (torch.onnx names it <scope>/<Op>_output_<n>) in the scope of a
    Linear row (its node keeps the MatMul's name, <scope>/MatMul...)."""
    scopes = {r["node"].rsplit("/", 1)[0] for r in report["layers"] if r["op"] == "Linear" and "/" in r["node"]}

    def absorbed(value):
        scope, _, base = value.rpartition("/")
        return scope in scopes and base.split("_output")[0].split("_")[0] in ("MatMul", "Add", "Transpose")
    return absorbed
