"""``python -m attnrank ARGS``: the ``attnrank`` command line from the installed package
(the same code as the command: attnrank's C++ CLI, linked into the module). Exit codes
as the command's (docs/cli.md)."""
import sys

from . import _attnrank


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    return _attnrank.main(["attnrank"] + [str(a) for a in args])


if __name__ == "__main__":
    sys.exit(main())
