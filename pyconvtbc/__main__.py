"""Command line: ``python -m pyconvtbc demo`` (the document's example) and ``python -m pyconvtbc study``."""
import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m pyconvtbc {demo,study} [options]\n"
              "  demo   run the operator document's example through the CANN layer and the NumPy call\n"
              "  study  precision study of the NPU emulation modes (python -m pyconvtbc study --help)")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "demo":
        from ._demo import demo
        return demo()
    if cmd == "study":
        try:
            from .study import cli
        except ImportError as e:  # pragma: no cover - the study module is optional until built
            print(f"study is not available: {e}", file=sys.stderr)
            return 2
        return cli(rest)
    print(f"unknown command {cmd!r}; expected 'demo' or 'study'", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
