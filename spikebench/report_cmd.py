"""``spikebench report RESULTS_DIR``: a sweep's report as markdown and self-contained HTML.

``spikebench report results/default`` writes ``reports/default/report.md`` (with its plots
as PNG files beside it) and ``reports/default/report.html`` (plots embedded). The report
folder is named after the results folder, which is always a safe folder name, not after
the study, whose name may be anything. Every user error is one line on stderr,
``spikebench report: error: ...``, and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROG = "spikebench report"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``report`` subcommand to an argparse subparsers object (``func=run``)."""
    p = subparsers.add_parser("report", help="write a sweep's report (markdown and HTML)")
    p.add_argument("results_dir", help="a study's results folder, e.g. results/default")
    p.add_argument("--out", default="reports",
                   help="reports folder; the report goes to OUT/<results folder name>/ "
                        "(default: reports)")
    p.set_defaults(func=run)
    return p


def out_dir_for(results_dir: str | Path, out: str | Path) -> Path:
    """``reports/<name of the results folder>``; ``results/default/`` and ``.`` resolve to
    their real folder names first."""
    return Path(out) / Path(results_dir).resolve().name


def run(args: argparse.Namespace) -> int:
    from spikebench.report import ReportError, build_report

    try:
        paths = build_report(args.results_dir, out_dir_for(args.results_dir, args.out))
    except ReportError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{PROG}: error: cannot write the report: {e}", file=sys.stderr)
        return 2
    print(f"report: {paths['markdown']} and {paths['html']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m spikebench.report_cmd RESULTS_DIR [--out DIR]``."""

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str):
            print(f"{PROG}: error: {message}", file=sys.stderr)
            raise SystemExit(2)

    parser = _Parser(prog="spikebench")
    add_parser(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(["report", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as e:
        return int(e.code or 0)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
