"""The options of the command line's longer subcommands, kept out of :mod:`spikebench.cli`
(which is parsing and dispatch only) and out of their packages (whose imports a parser
should not pay for)."""

from __future__ import annotations

import argparse

from spikebench.cli_args import count, draws, positive, positive_loss, rule_name
from spikebench.spikes.rules import RULES


def compare_arguments(p: argparse.ArgumentParser) -> None:
    """``spikebench compare``'s options."""
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="run folders or log files (walked; each run's format detected)")
    p.add_argument("--group", action="append", default=[], metavar="NAME=GLOB",
                   help="a group: the runs whose name or path matches GLOB (repeatable)")
    p.add_argument("--by", metavar="PARAM",
                   help="one group per value of PARAM in each run's own metadata")
    p.add_argument("--baseline", metavar="NAME",
                   help="the group the others are compared with (default: the first)")
    p.add_argument("--recipe", metavar="NAME",
                   help="the group the article's claims are tested on (the claims section)")
    p.add_argument("--target-loss", type=positive_loss, metavar="X",
                   help="time to target: the first evaluation <= X (default: see below)")
    p.add_argument("--max-step", type=count, metavar="N",
                   help="compare up to step N, leaving out runs that end before it")
    p.add_argument("--unpaired", action="store_true",
                   help="compare every group as independent runs, even where seeds match")
    p.add_argument("--step", metavar="NAME", help="the step column (or tag) of the runs")
    p.add_argument("--metric", metavar="NAME", help="the loss column (or tag) of the runs")
    p.add_argument("--grad-metric", metavar="NAME", help="the grad-norm column (or tag)")
    p.add_argument("--detector", default="default", metavar="NAME", type=rule_name,
                   help=f"spike rule: {', '.join(RULES)}")
    p.add_argument("--gap", type=count, default=5,
                   help="max unflagged rows inside one event (default 5)")
    p.add_argument("--name", default="compare",
                   help="the comparison's study goes to OUT/NAME/ (default: compare)")
    p.add_argument("--out", default="reports/compare", metavar="OUT",
                   help="report.md, report.html and the study (default: reports/compare)")


def precursors_arguments(p: argparse.ArgumentParser) -> None:
    """``spikebench precursors``'s options."""
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run folders, study folders or logs (as spikebench spikes reads)")
    p.add_argument("--budget", type=positive, default=1.0, metavar="N",
                   help="false alarms allowed per 10k steps, which sets each threshold "
                   "(default 1)")
    p.add_argument("--burn-in", type=count, default=50, metavar="STEPS",
                   help="leave out each run's first STEPS steps and their events (default 50)")
    p.add_argument("--gap", type=count, default=5,
                   help="max unflagged rows inside one event (default 5)")
    p.add_argument("--boot", type=draws, default=1000, metavar="N",
                   help="bootstrap draws over seeds for the intervals, >= 100 (default 1000)")
    p.add_argument("--json", action="store_true", help="print one JSON object only")
