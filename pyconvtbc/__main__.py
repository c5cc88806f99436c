"""Command line: ``python -m pyconvtbc demo`` (the document's example) and ``python -m pyconvtbc study``.

Also installed as the ``pyconvtbc`` command.  Exit status: 0 on success (``--help`` and ``--version``
included), 2 for a usage error (no command, an unknown command or option: the message goes to stderr),
1 when the demo's CANN calls return an error status, 130 on Ctrl-C, 141 when the reader of stdout has gone
(``python -m pyconvtbc demo | head -3``: the command stops quietly, with no traceback).  ``study`` parses its
own options (``python -m pyconvtbc study --help``) and returns its own status.
"""
import argparse
import os
import sys

from ._version import __version__

_COMMANDS = {
    "demo": "run both operators' document examples (aclnnConvTbc, aclnnConvTbcBackward) through the CANN layer "
            "and the NumPy calls",
    "study": "precision study of the NPU emulation modes (python -m pyconvtbc study --help)",
}


def _prog():
    name = os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "")
    return "pyconvtbc" if name == "pyconvtbc" else "python -m pyconvtbc"


def _parser(prog):
    p = argparse.ArgumentParser(
        prog=prog, description="pyconvtbc: CANN's aclnnConvTbc and aclnnConvTbcBackward (1-D convolution in "
                               "TBC layout, forward and backward) on the CPU, with the NPU's precision paths "
                               "emulated.")
    p.add_argument("--version", action="version", version=f"pyconvtbc {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{demo,study}", title="commands")
    sub.add_parser("demo", help=_COMMANDS["demo"], description=_COMMANDS["demo"] + ".")
    sub.add_parser("study", help=_COMMANDS["study"], add_help=False)   # parsed by pyconvtbc.study
    return p


def _run(argv, prog):
    if argv and argv[0] == "study":          # the study parses its own options (and its own --help)
        from .study import cli
        return cli(argv[1:])
    parser = _parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:                  # --help / --version (0) or a usage error (2, already on stderr)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print(f"{prog}: error: a command is required: {', '.join(_COMMANDS)} (see {prog} --help)",
              file=sys.stderr)
        return 2
    from ._demo import demo
    return 0 if demo() == 0 else 1          # a CANN status is no exit code (161002 % 256 == 234)


def main(argv=None):
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from ._console import quiet_broken_pipe
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return quiet_broken_pipe(lambda: _run(argv, _prog()))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
