"""Records where the meson build's libmemest.so is, so the installed package
finds it from any folder: $MEMEST_LIBRARY, else ../build/src/libmemest.so
next to this file (the README's build). Without either the package looks in
installed prefixes at import (meson install)."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py


def built_library():
    env = os.environ.get("MEMEST_LIBRARY")
    here = os.path.dirname(os.path.abspath(__file__))
    for p in ([env] if env else []) + [os.path.join(here, "..", "build", "src", "libmemest.so")]:
        if os.path.isfile(p):
            return os.path.realpath(p)
    return None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = built_library()
        target = os.path.join(self.build_lib, "memest", "_build_paths.py")
        with open(target, "w") as f:
            f.write("# written by setup.py at install time\nLIBRARIES = %r\n" % ([lib] if lib else []))


setup(cmdclass={"build_py": BuildPy})
