"""Builds sketchps._core (src/module.cc) with pybind11 against libsketchps_python_core.so.

SKETCHPS_PREFIX names where that library is: an install prefix (`cmake --install`, the relocatable
bundle of scripts/bundle.sh: PREFIX/lib and PREFIX/include/sketchps/python_core.h) or a build tree
(BUILD/lib; the header is then this folder's include/). The extension finds the library at run time
through its RUNPATH (PREFIX/lib), and sketchps/_libdir.py, written here, tells the package where the
kernels libraries are (sketchps/_kernels.py): the prefix must stay where it is.

    SKETCHPS_PREFIX=/opt/sketchps python3 -m pip install --no-build-isolation --no-deps python/
"""
import os

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = "libsketchps_python_core.so"


def prefix():
    path = os.environ.get("SKETCHPS_PREFIX", "")
    if not path:
        raise SystemExit("SKETCHPS_PREFIX: not set (the sketchps install prefix or build tree whose lib/ holds "
                         f"{CORE}; docs/pytorch.md \"Install with pip\")")
    path = os.path.abspath(path)
    if not os.path.exists(os.path.join(path, "lib", CORE)):
        raise SystemExit(f"SKETCHPS_PREFIX: {path}/lib/{CORE} does not exist (build the project, or cmake --install "
                         "its runtime component there)")
    return path


def include_dir(root):
    """The header of the prefix when it is an install prefix, else this source tree's."""
    installed = os.path.join(root, "include")
    if os.path.exists(os.path.join(installed, "sketchps", "python_core.h")):
        return installed
    return os.path.join(HERE, "include")


class BuildPyWithLibdir(build_py):
    """Writes sketchps/_libdir.py (the libraries' folder) next to the copied modules."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "sketchps", "_libdir.py")
        with open(target, "w") as out:
            out.write("# Written by python/setup.py: where libsketchps_python_core.so and the kernels are.\n"
                      f"LIBRARY_DIR = {os.path.join(prefix(), 'lib')!r}\n")


root = prefix()
library_dir = os.path.join(root, "lib")
core = Pybind11Extension(
    "sketchps._core",
    ["src/module.cc"],  # relative to this folder, where pip runs setup.py
    include_dirs=[include_dir(root)],
    library_dirs=[library_dir],
    libraries=["sketchps_python_core"],
    runtime_library_dirs=[library_dir],
    cxx_std=17,
)
setup(ext_modules=[core], cmdclass={"build_ext": build_ext, "build_py": BuildPyWithLibdir})
