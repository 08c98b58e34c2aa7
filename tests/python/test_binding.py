"""The Python binding says what the library and the command line say.

- The typing stubs (attnrank/__init__.pyi) are checked against the functions: the same
  parameters, in the same order, of the same kind (positional or keyword-only), with a
  default exactly where the function has one; and every public function has a stub.
- Defaults that are the library's (the time limit, the layer's and the fallback's bits)
  are read from the library in Python and shown by the command line's --help: the same
  number in both.
- Each question's help is the library's (analysis/option_help.hpp): help(attnrank.f)
  and `attnrank COMMAND --help` both carry its title, what its result proves and every
  option's text, and the Python function takes exactly the options the library
  describes (plus what is Python's own: Dask's client).
"""
import ast
import inspect
import os
import platform
import re
import subprocess
import sys

import pytest

import attnrank
from attnrank import _attnrank as core

STUBS = os.path.join(os.path.dirname(attnrank.__file__), "__init__.pyi")
CLI = os.environ.get("ATTNRANK_CLI")


def _stub_functions():
    if not os.path.exists(STUBS):  # the build tree copies it next to the module; a source checkout has it beside __init__
        pytest.skip(f"no stubs at {STUBS}")
    with open(STUBS) as f:
        tree = ast.parse(f.read())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _stub_parameters(node):
    a = node.args
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    out = [(p.arg, "positional", i >= first_default) for i, p in enumerate(positional)]
    if a.vararg:
        out.append((a.vararg.arg, "var_positional", False))
    out += [(p.arg, "keyword_only", d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, "var_keyword", False))
    return out


def _parameters(function):
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "positional", inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
             inspect.Parameter.KEYWORD_ONLY: "keyword_only", inspect.Parameter.VAR_POSITIONAL: "var_positional",
             inspect.Parameter.VAR_KEYWORD: "var_keyword"}
    return [(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty)
            for p in inspect.signature(function).parameters.values()]


def _public_functions():
    return {name: f for name, f in vars(attnrank).items()
            if not name.startswith("_") and inspect.isfunction(f) and f.__module__.startswith("attnrank")}


def test_every_public_function_has_a_stub_with_its_signature():
    stubs = _stub_functions()
    functions = _public_functions()
    assert functions, "no public functions found"
    missing = sorted(set(functions) - set(stubs))
    assert not missing, f"public functions without a stub in __init__.pyi: {missing}"
    for name, function in functions.items():
        assert _stub_parameters(stubs[name]) == _parameters(function), name


def test_the_library_defaults_are_the_functions_defaults():
    # no clock by default: None is the library's fixed work, as the command line without --time-limit
    for function in (attnrank.reach, attnrank.width, attnrank.scan):
        assert inspect.signature(function).parameters["time_limit"].default is None
    # width's refinement default is the command line's: automatic (None), not "never"
    assert inspect.signature(attnrank.width).parameters["refine"].default is None


@pytest.mark.skipif(not CLI, reason="ATTNRANK_CLI (the attnrank binary) is not set")
def test_the_command_line_shows_the_same_defaults():
    def help_of(command):
        return subprocess.run([CLI, command, "--help"], capture_output=True, text=True, check=True).stdout

    for command in ("reach", "width", "scan"):
        shown = re.search(r"--time-limit SECONDS\s+Asks for the full search \(([0-9.]+) times the default's fixed work\)",
                          help_of(command))
        assert shown and float(shown.group(1)) == core.full_search_flops / core.default_search_flops, command
    assert f"(default {core.default_layer_bits};" in help_of("layer")
    assert f"(default {core.default_fallback_bits})" in help_of("check-kernel")


# Parameters a Python function has that the library's question does not: Python's own.
PYTHON_ONLY = {"scan": {"client", "heads_per_task"}, "width": {"search"},
               "check_kernel": {"causal", "softmax_scale", "layout"}}  # FlashAttention's names and layout
# The readers' limit, not a question's option: the command line's --max-size comes before the command.
READER_OPTIONS = {"max_size"}
# The command whose --help shows a question (check_certificate is reach --check).
COMMAND = {"check_kernel": "check-kernel", "check_certificate": "reach"}


def _words(text):
    return " ".join(text.split())


def test_every_question_has_the_library_help_in_its_docstring():
    helps = core.question_helps()
    assert {h["name"] for h in helps} >= {"reach", "width", "rank", "det", "svd", "layer", "scan", "check_kernel"}
    for h in helps:
        function = getattr(attnrank, h["name"])
        doc = _words(function.__doc__ or "")
        assert doc.startswith(_words(h["title"])), h["name"]
        assert _words(h["details"]) in doc, h["name"]
        for name, text in h["options"]:
            assert _words(f"{name} {text}") in doc, (h["name"], name)
        parameters = set(inspect.signature(function).parameters)
        options = {name for name, _ in h["options"]}
        assert parameters - PYTHON_ONLY.get(h["name"], set()) - READER_OPTIONS == options, h["name"]
        if "max_size" in parameters:
            assert "max_size: the largest n" in doc, h["name"]


@pytest.mark.skipif(not CLI, reason="ATTNRANK_CLI (the attnrank binary) is not set")
def test_the_command_line_help_says_the_same_of_every_option():
    for h in core.question_helps():
        command = COMMAND.get(h["name"], h["name"])
        shown = _words(subprocess.run([CLI, command, "--help"], capture_output=True, text=True, check=True).stdout)
        if command == h["name"]:  # a question that is a command of its own: its title and what it proves
            assert _words(h["title"]) in shown and _words(h["details"]) in shown, command
        for name, text in h["options"]:
            assert _words(text) in shown, (command, name)



def _keeps_freed_memory(env):
    """What a fresh interpreter importing attnrank reports, with `env` added to ours
    less glibc's malloc settings."""
    ours = {k: v for k, v in os.environ.items()
            if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    code = "import attnrank; print(attnrank._attnrank.keeps_freed_memory)"
    out = subprocess.run([sys.executable, "-c", code], env={**ours, **env}, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's malloc's")
def test_importing_keeps_freed_memory_unless_the_environment_chose():
    assert _keeps_freed_memory({}) == "True"
    assert _keeps_freed_memory({"MALLOC_TRIM_THRESHOLD_": "131072"}) == "False"
    assert _keeps_freed_memory({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=131072"}) == "False"
