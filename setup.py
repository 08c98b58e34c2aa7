"""Builds attnrank's Python package with the project's own CMake (docs/python.md, "Getting it").

pip runs this through setuptools' PEP 517 backend (pyproject.toml). The extension is
CMake's attnrank_python target (the library, the CLI core and the module; no tests,
no examples), configured in build-pip/cmake-<python tag> of the source tree for the Python that runs pip
(kept: a second install, editable or not, rebuilds only what changed), or
built in an existing CMake tree when ATTNRANK_CMAKE_BUILD_DIR names one (configured for
a Python of the same version and ABI: the test suite reuses its own build that way).
The version is CMake's project version, the one `attnrank --version` prints.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
(ROOT / "build-pip").mkdir(exist_ok=True)  # setuptools' own build and egg-info (not build/: make's CMake tree)
VERSION = re.search(r"project\(attnrank VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)


def usable_cores():
    """The cores this process may run on (a container or taskset may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def stage(text):
    """One line per stage of the build. pip shows a backend's output only with -v, so the line
    also goes to the terminal when there is one: a plain ``pip install .`` says what it does."""
    line = f"attnrank: {text}\n"
    sys.stderr.write(line)
    sys.stderr.flush()
    try:
        with open("/dev/tty", "w") as tty:
            tty.write("\n" + line)  # on a line of its own, after pip's spinner
    except OSError:
        pass


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        started = time.monotonic()
        tree = os.environ.get("ATTNRANK_CMAKE_BUILD_DIR")
        if tree:
            tree = pathlib.Path(tree).resolve()
        else:
            # A tree of its own per Python, kept in the source tree: a second install (an editable
            # one too) rebuilds only what changed instead of the whole library in a fresh temporary tree.
            tree = ROOT / "build-pip" / f"cmake-{sys.implementation.cache_tag}"
            stage(f"configuring CMake in {tree}")
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tree), "-DCMAKE_BUILD_TYPE=Release",
                            f"-DPYTHON_EXECUTABLE={sys.executable}", "-DATTNRANK_BUILD_TESTS=OFF",
                            "-DATTNRANK_BUILD_EXAMPLES=OFF"], check=True)
        command = ["cmake", "--build", str(tree), "--target", "attnrank_python"]
        if "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:  # CMake reads it itself; a -j here would override it
            command.append(f"-j{usable_cores()}")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(usable_cores()))
        stage(f"building the C++ library and the module with {jobs} jobs (a first build: about 7 minutes of "
              "CPU, under 4 on two idle cores; pip install -v shows each file)")
        subprocess.run(command, check=True)
        built = sorted((tree / "python" / "attnrank").glob("_attnrank*.so"))
        if not built:
            raise RuntimeError(f"attnrank: the CMake tree {tree} built no Python module (is pybind11 installed?)")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)
        stage(f"built {target.name} in {time.monotonic() - started:.0f} s")


setup(
    version=VERSION,
    ext_modules=[Extension("attnrank._attnrank", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}},
)
