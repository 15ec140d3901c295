#!/usr/bin/env python3
"""Issue 10: one model, any export. memest on the committed export variants
of one zoo model (models/onnx/variants/, manifest golden/truth/variants.json)
against PyTorch: params, dispatch-level MACs, the measured peaks within 2 %
(or the folded-BatchNorm note where the export cannot express the mode), and
the variants within 1 % of each other. The checks are
tests/zoo/check_variants.py's; this is its meson entry.

usage: test_zoo_variants.py MEMEST SOURCE_ROOT MODEL
"""
import subprocess
import sys

memest, root, model = sys.argv[1], sys.argv[2], sys.argv[3]
p = subprocess.run([sys.executable, root + "/tests/zoo/check_variants.py", "--memest", memest,
                    "--models", model, "--quiet"])
sys.exit(p.returncode)
