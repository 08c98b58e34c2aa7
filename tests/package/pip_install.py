#!/usr/bin/python3
"""The pip path of docs/python.md ("Getting it"), end to end, in a throwaway venv.

A venv made by the Python the module is built for (Debian's) with --system-site-packages (where NumPy comes from),
`pip wheel --no-build-isolation` of a copy of the sources (reusing this build's CMake
tree through ATTNRANK_CMAKE_BUILD_DIR), `pip install` of that wheel, then in the venv:
import attnrank, __version__ equal to the command's --version, reach on the tutorial's
target, `python -m attnrank reach diag:3:0.8 --dk 1`, `pip show`, and `pip uninstall`
leaving nothing importable. Nothing is installed outside the temporary directory.

usage: pip_install.py SOURCE_DIR BUILD_DIR ATTNRANK_CLI
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile


def run(*args, **kw):
    print("+", " ".join(str(a) for a in args), flush=True)
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(r.stdout, r.stderr, sep="\n")
        raise SystemExit(f"failed with exit {r.returncode}: {args}")
    return r


def main(source, build, cli):
    version = run(cli, "--version").stdout.split()[-1]
    with tempfile.TemporaryDirectory(prefix="attnrank-pip-") as tmp:
        tmp = pathlib.Path(tmp)
        # A copy of the sources (what a user clones): pip builds in its tree, which stays clean.
        src = tmp / "src"
        shutil.copytree(source, src, ignore=shutil.ignore_patterns("build*", ".git", "__pycache__", "*.egg-info"))
        venv = tmp / "venv"
        run(sys.executable, "-m", "venv", "--system-site-packages", venv)  # Debian's Python: its NumPy, pip, setuptools
        python, pip = venv / "bin" / "python", [venv / "bin" / "python", "-m", "pip"]
        env = dict(os.environ, ATTNRANK_CMAKE_BUILD_DIR=str(pathlib.Path(build).resolve()), PIP_NO_INDEX="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)  # the venv alone, not the build tree
        wheels = tmp / "wheels"
        run(*pip, "wheel", "--no-build-isolation", "--no-deps", "-w", wheels, src, env=env)
        wheel = sorted(wheels.glob("attnrank-*.whl"))
        assert len(wheel) == 1, wheel
        assert wheel[0].name.startswith(f"attnrank-{version}-"), (wheel[0].name, version)
        run(*pip, "install", "--no-deps", wheel[0], env=env)
        where = run(python, "-c", "import attnrank, os; print(os.path.dirname(attnrank.__file__))", env=env).stdout.strip()
        assert pathlib.Path(where).resolve().is_relative_to(venv.resolve()), where
        check = (
            "import attnrank\n"
            f"assert attnrank.__version__ == {version!r}, attnrank.__version__\n"
            "a = [['4/5', '1/10', '1/10'], ['1/10', '4/5', '1/10'], ['1/10', '1/10', '4/5']]\n"
            "assert attnrank.reach(a, 1)['verdict'] == 'unreachable'\n"
            "assert attnrank.reach(a, 2)['verdict'] == 'reachable'\n"
        )
        run(python, "-c", check, env=env)
        out = run(python, "-m", "attnrank", "reach", "diag:3:0.8", "--dk", "1", env=env).stdout
        assert "unreachable" in out, out
        out = run(venv / "bin" / "attnrank", "--version", env=env).stdout
        assert out.strip() == f"attnrank {version}", out
        show = run(*pip, "show", "attnrank", env=env).stdout
        assert f"Version: {version}" in show, show
        run(*pip, "uninstall", "-y", "attnrank", env=env)
        gone = subprocess.run([python, "-c", "import attnrank"], capture_output=True, text=True, env=env)
        assert gone.returncode != 0 and "No module named 'attnrank'" in gone.stderr, gone.stderr
        assert not (venv / "bin" / "attnrank").exists()
    print("pip install, import, python -m attnrank and uninstall: 1 passed, 0 failed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
