"""The ``spikebench`` command line. Every user error ends in one line and exit code 2."""

from __future__ import annotations

import argparse
import sys

from spikebench import config as cfgmod
from spikebench import spikes_cmd
from spikebench.config import ConfigError


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="TOML config (default: gpt-tiny on the stdlib corpus)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted override, e.g. --set optim.lr=3e-3 (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the resolved config and exit")


def cmd_train(args: argparse.Namespace) -> int:
    cfg = cfgmod.load(args.config, args.overrides)
    if args.dry_run:
        print(cfg.to_json())
        return 0
    from spikebench.sinks import ProgressBar
    from spikebench.train import train

    sinks = [ProgressBar(cfg.train.steps)] if cfg.train.progress else []
    summary = train(cfg, sinks=sinks)
    return 0 if summary["status"] in ("completed", "diverged") else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spikebench", description="Measure and tame loss spikes in LM pretraining."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="run one pretraining trial")
    _add_config_args(p)
    p.set_defaults(func=cmd_train)
    spikes_cmd.add_parser(sub)
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
