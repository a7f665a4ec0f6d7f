"""The ``spikebench`` command line. Every user error ends in one line and exit code 2."""

from __future__ import annotations

import argparse
import sys

from spikebench import config as cfgmod
from spikebench import report_cmd, spikes_cmd
from spikebench.config import ConfigError


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="TOML config (default: gpt-tiny on the stdlib corpus)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. --set optim.lr=3e-3 (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")


def cmd_train(args: argparse.Namespace) -> int:
    cfg = cfgmod.load(args.config, args.overrides)
    from spikebench.train import preflight, train

    if args.dry_run:
        preflight(cfg)  # what a run would refuse (device, model class, corpus path), no data
        print(cfg.to_json())
        return 0
    from spikebench.sinks import ProgressBar

    sinks = [ProgressBar(cfg.train.steps)] if cfg.train.progress else []
    summary = train(cfg, sinks=sinks)
    return 0 if summary["status"] in ("completed", "diverged") else 1


def cmd_sweep(args: argparse.Namespace) -> int:
    from spikebench.sweepfile import load_sweep

    spec = load_sweep(args.sweep, args.overrides)
    if args.trials is not None:
        spec.trials = args.trials
    if args.dry_run:
        from spikebench.plan import describe_plan

        print(describe_plan(spec, jobs=args.jobs, storage=args.storage, results=args.results))
        return 0
    from spikebench.sweep import run_sweep

    out = run_sweep(spec, results=args.results, jobs=args.jobs, storage=args.storage)
    print(f"{out['done']}/{out['total']} trials done; table: {out['trials_csv']}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from spikebench.sweep import run_worker

    return run_worker(args.storage, args.study, results=args.results)


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 0")
    return n


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line and exit code 2, like every other user error here."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="spikebench", description="Measure and tame loss spikes in LM pretraining."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="run one pretraining trial")
    _add_config_args(p)
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("sweep", help="run (or resume) an Optuna sweep of pretraining trials")
    p.add_argument("sweep", nargs="?", default="sweeps/default.toml", help="sweep TOML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override the sweep's base config, e.g. --set train.steps=100")
    p.add_argument("--jobs", type=_jobs, default=None,
                   help="parallel CPU workers (default: one per GPU, else one per core); "
                        "0 creates the study and its plan for `spikebench worker`s only")
    p.add_argument("--trials", type=_jobs, default=None, help="search trials (overrides the file)")
    p.add_argument("--storage", default=None, help="Optuna storage URL (default: SQLite in "
                   "results/<study>/)")
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the search space and trial plan; run nothing")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("worker", help="join a shared study (PostgreSQL) and run its trials")
    p.add_argument("--storage", required=True, help="Optuna storage URL (PostgreSQL)")
    p.add_argument("--study", required=True, help="study name")
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.set_defaults(func=cmd_worker)

    spikes_cmd.add_parser(sub)
    report_cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"spikebench {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"spikebench {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
