"""The ``recon-spec`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _doc(args: argparse.Namespace) -> int:
    from spec.document import write_spec_document

    return write_spec_document(check=args.check)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recon-spec",
        description="Specification and conformance suite of the reconstruction loss stack.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    doc = commands.add_parser("doc", help="regenerate docs/SPEC.md from the sympy spec")
    doc.add_argument(
        "--check", action="store_true", help="exit 1 if the committed document is stale"
    )
    doc.set_defaults(run=_doc)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
