"""Builds attnrank's Python package with the project's own CMake (docs/python.md, "Getting it").

pip runs this through setuptools' PEP 517 backend (pyproject.toml). The extension is
CMake's attnrank_python target (the library, the CLI core and the module; no tests,
no examples), configured under pip's build directory for the Python that runs pip, or
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

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
(ROOT / "build-pip").mkdir(exist_ok=True)  # setuptools' own build and egg-info (not build/: make's CMake tree)
VERSION = re.search(r"project\(attnrank VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        tree = os.environ.get("ATTNRANK_CMAKE_BUILD_DIR")
        if tree:
            tree = pathlib.Path(tree).resolve()
        else:
            tree = pathlib.Path(self.build_temp).resolve() / "cmake"
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tree), "-DCMAKE_BUILD_TYPE=Release",
                            f"-DPYTHON_EXECUTABLE={sys.executable}", "-DATTNRANK_BUILD_TESTS=OFF",
                            "-DATTNRANK_BUILD_EXAMPLES=OFF"], check=True)
        subprocess.run(["cmake", "--build", str(tree), "--target", "attnrank_python", f"-j{os.cpu_count() or 1}"],
                       check=True)
        built = sorted((tree / "python" / "attnrank").glob("_attnrank*.so"))
        if not built:
            raise RuntimeError(f"attnrank: the CMake tree {tree} built no Python module (is pybind11 installed?)")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], target)


setup(
    version=VERSION,
    ext_modules=[Extension("attnrank._attnrank", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}},
)
