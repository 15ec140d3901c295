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




def write_json(directory, name, obj):
    """obj as JSON in directory/name; returns the path."""
    import json
    p = os.path.join(directory, name)
    with open(p, "w") as f:
        json.dump(obj, f)
    return p


def run_json(*args):
    """memest ARGS --format json, parsed; a failure is recorded and None returned."""
    import json
    rc, out, err = run(*args, "--format", "json")
    check(rc == 0, f"memest {' '.join(args)}: exit {rc}: {err[-300:]}")
    return json.loads(out) if rc == 0 else None
