"""The ``spikebench`` command line: parsing and dispatch only.

Each command's logic lives in its package (``spikebench.train.command``,
``spikebench.runs.spikes_command``, ``spikebench.compare.command``, ...); the argument
types are in :mod:`spikebench.cli_args`, each command's help text in
:mod:`spikebench.cli_help`. Every user error is a :class:`~spikebench.errors.UserError`, caught once in :func:`main`:
one line ``spikebench <command>: error: ...`` on stderr and exit code 2. Heavy imports
(torch, Optuna) happen inside the command that needs them.
"""

from __future__ import annotations

import argparse
import os
import sys

from spikebench.cli_args import count, finite, port, rule_name
from spikebench.cli_help import COMMAND_HELP
from spikebench.cli_options import compare_arguments, precursors_arguments
from spikebench.errors import UserError
from spikebench.spikes.rules import RULES
from spikebench.sweep import slurm


def cmd_train(args: argparse.Namespace) -> int:
    from spikebench.train.command import run_train

    def live_sinks() -> list:
        exporter = _exporter(args)
        if exporter is None:
            return []
        from spikebench.live.sink import PrometheusSink

        return [PrometheusSink(exporter)]

    def warning_sinks(cfg) -> list:  # the [warning] table's: the rule sits above train
        from spikebench.api.engine_warning import sinks_for

        return sinks_for(cfg)

    return run_train(args, check_metrics=lambda: _check_metrics(args), live_sinks=live_sinks,
                     warning_sinks=warning_sinks)


def cmd_sweep(args: argparse.Namespace) -> int:
    from spikebench.sweep.spec import load_sweep

    spec = load_sweep(args.sweep, args.overrides)
    if args.trials is not None:
        spec.trials = args.trials
    if args.dry_run:
        _check_metrics(args)
        from spikebench.sweep.plan import describe_plan

        print(describe_plan(spec, jobs=args.jobs, storage=args.storage, results=args.results))
        return 0
    from spikebench.sweep.driver import run_sweep

    out = run_sweep(spec, results=args.results, jobs=args.jobs, storage=args.storage,
                    metrics=_exporter(args))
    print(f"{out['done']}/{out['total']} trials done; table: {out['trials_csv']}")
    if out["all_failed"]:  # the work failed (1), not the input (2)
        print(f"spikebench sweep: {out['all_failed']}", file=sys.stderr)
        return 1
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from spikebench.bench.run import run_bench

    if args.jobs == 0:
        raise UserError("--jobs 0: a bench runs its own trials; use --jobs >= 1")
    return run_bench(args.suite, baseline_path=args.baseline, update=args.update_baseline,
                     results=args.results, jobs=args.jobs, perf=not args.no_perf)


def cmd_worker(args: argparse.Namespace) -> int:
    from spikebench.sweep.worker import run_worker

    if args.storage is None:  # Slurm's tasks pass it in the environment (sweep/slurm.py)
        raise UserError("--storage: missing; give the study's storage URL or set "
                        "SPIKEBENCH_STORAGE")
    return run_worker(args.storage, args.study, results=args.results, metrics=_exporter(args))


def cmd_slurm(args: argparse.Namespace) -> int:
    from spikebench.sweep.slurm import run_slurm

    return run_slurm(args)


def cmd_spikes(args: argparse.Namespace) -> int:
    from spikebench.runs.spikes_command import run_spikes

    return run_spikes(args)


def cmd_precursors(args: argparse.Namespace) -> int:
    from spikebench.precursors.command import run_precursors

    return run_precursors(args)


def cmd_report(args: argparse.Namespace) -> int:
    from spikebench.report import build_report, default_out_dir

    out = default_out_dir(args.results_dir, args.study, args.out)
    try:
        paths = build_report(args.results_dir, out, storage=args.storage, study=args.study)
    except OSError as e:
        where = f"--out {args.out}" if args.out else str(out)
        raise UserError(f"{where}: cannot write the report ({e.strerror or e})") from None
    print(f"report: {paths['markdown']} and {paths['html']}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from spikebench.compare.command import run_compare

    return run_compare(args)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line and exit code 2, like every other user error here."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _metrics_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-port", type=port, default=None, metavar="PORT",
                   help="serve Prometheus metrics on PORT (0: any free; needs "
                        "spikebench[monitor])")
    p.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="address the metrics endpoint binds to (default: 127.0.0.1)")


def _check_metrics(args: argparse.Namespace) -> None:
    """What --metrics-port would refuse, checked without serving (--dry-run refuses it too)."""
    from spikebench.live.server import check_listen

    check_listen(args.metrics_port, args.metrics_host)


def _exporter(args: argparse.Namespace):
    """The exporter behind --metrics-port, serving; None without the flag."""
    from spikebench.live.server import start_exporter

    return start_exporter(args.metrics_port, args.metrics_host)


def _set_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=help)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spikebench", description=COMMAND_HELP["spikebench"][0],
                     epilog=COMMAND_HELP["spikebench"][1],
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="run one pretraining trial")
    p.add_argument("config", nargs="?", help="TOML config or a run's config.json (default: "
                                             "gpt-tiny, stdlib corpus)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its newest "
                   "checkpoint (train.checkpoint_every)")
    _set_option(p, "dotted override, e.g. --set optim.lr=3e-3 (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")
    _metrics_options(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("sweep", help="run (or resume) an Optuna sweep of pretraining trials")
    p.add_argument("sweep", nargs="?", default="sweeps/default.toml",
                   help="sweep TOML file (default: sweeps/default.toml)")
    _set_option(p, "override the sweep's base config, e.g. --set train.steps=100")
    p.add_argument("--jobs", type=count, default=None,
                   help="workers (default: one per GPU, else per core); 0: only create "
                        "the study")
    p.add_argument("--trials", type=count, default=None,
                   help="search trials (overrides the file)")
    p.add_argument("--storage", default=None, help="Optuna storage URL (default: SQLite in "
                   "results/<study>/)")
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the search space and trial plan; run nothing")
    _metrics_options(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("worker", help="join a shared study (PostgreSQL) and run its trials")
    p.add_argument("--storage", default=os.environ.get("SPIKEBENCH_STORAGE"),
                   help="Optuna storage URL (PostgreSQL; default: $SPIKEBENCH_STORAGE)")
    p.add_argument("--study", required=True, help="study name (its sweep file's study.name)")
    p.add_argument("--results", default="results", help="results folder (default: results)")
    _metrics_options(p)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("slurm", help="start a shared study's workers as a Slurm job array")
    slurm.add_arguments(p)
    p.set_defaults(func=cmd_slurm)

    p = sub.add_parser("spikes", help="find loss spikes in a training log or a folder of runs")
    p.add_argument("file", metavar="PATH", help="a log file, or a folder of runs (one line each)")
    p.add_argument("--metric", help="loss column, tag or metric key (default: loss, train/loss, ...)")
    p.add_argument("--step", metavar="NAME",
                   help="step column (default: step, global_step, train/global_step, ...)")
    p.add_argument("--grad-metric",
                   help="grad-norm column name (default: grad_norm, optim/grad_norm)")
    p.add_argument("--detector", default="default", metavar="NAME", type=rule_name,
                   help=f"spike rule: {', '.join(RULES)}")
    p.add_argument("--gap", type=count, default=5,
                   help="max unflagged rows inside one event (default 5)")
    p.add_argument("--target-loss", type=finite, default=None, metavar="X",
                   help="also show the first step with loss <= X (validation loss if logged)")
    p.add_argument("--json", action="store_true",
                   help="print JSON only: one object (a folder: one per run, a line each)")
    p.add_argument("--plot", metavar="PNG", help="draw the curve(s) with events marked (one run)")
    p.set_defaults(func=cmd_spikes)

    p = sub.add_parser("precursors", help="score which signals warn of a loss spike, and "
                       "how early")
    precursors_arguments(p)
    p.set_defaults(func=cmd_precursors)

    p = sub.add_parser("report", help="write a sweep's report (markdown and HTML)")
    p.add_argument("results_dir", nargs="?",
                   help="a study's results folder, e.g. results/default")
    p.add_argument("--storage", metavar="URL",
                   help="the study's storage: report from it alone, with --study")
    p.add_argument("--study", metavar="NAME", help="the study's name in --storage")
    p.add_argument("--out", default="reports",
                   help="reports folder (default: reports), for OUT/<study>/")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="compare groups of existing runs (markdown and HTML)")
    compare_arguments(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("bench", help="run a regression suite against its baseline; exit 1 "
                       "on a regression")
    p.add_argument("--suite", default="benchmarks/suites/cpu.toml", help="suite TOML "
                   "(default: benchmarks/suites/cpu.toml)")
    p.add_argument("--baseline", default=None, help="baseline JSON (default: "
                   "baselines/<suite name>.json, placed as said below)")
    p.add_argument("--update-baseline", action="store_true",
                   help="record this run as the baseline instead of comparing")
    p.add_argument("--jobs", type=count, default=None,
                   help="workers (default: one per GPU, else per core)")
    p.add_argument("--results", default="results", help="the run goes to "
                   "RESULTS/bench/<suite>-<time>/ (default: results)")
    p.add_argument("--no-perf", action="store_true",
                   help="skip the performance measurements (stability metrics only)")
    p.set_defaults(func=cmd_bench)
    for name, p in sub.choices.items():
        p.description, p.epilog = COMMAND_HELP[name]
        p.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # to start ranks with
    except SystemExit as e:  # usage errors and --help: a code, not an exception, for callers
        return int(e.code or 0)
    func = args.func
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a rank: its exception, for torchrun's one line
        from spikebench.train.launch import recorded

        func = recorded(func)
    try:
        return func(args)
    except UserError as e:
        print(f"spikebench {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"spikebench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
