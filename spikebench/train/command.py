"""The ``spikebench train`` command: resolve the config (or a run's, with ``--resume``),
``--dry-run`` it, start the ranks of a data-parallel run, and train.

:func:`run_train` is what :mod:`spikebench.cli` dispatches to. The live metrics endpoint
sits above this package (:mod:`spikebench.live` imports it), so the command line hands in
its checks and its sink as callables, and so does the ``[warning]`` table's sink.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spikebench import config as cfgmod
from spikebench.errors import UserError
from spikebench.study import layout as L


def run_train(args: argparse.Namespace, *, check_metrics: Callable[[], None],
              live_sinks: Callable[[], list[Any]],
              warning_sinks: Callable[[Any], list[Any]] = lambda cfg: []) -> int:
    """Train as the parsed command line says; the exit code. ``check_metrics()`` refuses
    what ``--metrics-port`` would (run for ``--dry-run`` too); ``live_sinks()`` gives the
    sinks that serve it, asked for on the main rank only; ``warning_sinks(cfg)`` the sink
    of the config's ``[warning]`` table (:mod:`spikebench.api.engine_warning`)."""
    run_dir = None
    if args.resume is not None:
        if args.config or args.overrides:
            raise UserError(f"--resume {args.resume}: resumes the run's own config.json; "
                            "give no config file and no --set")
        run_dir = Path(args.resume)
        if not (run_dir / L.CONFIG_JSON).is_file():
            raise UserError(f"--resume {args.resume}: not a run folder (no config.json)")
        args.config = str(run_dir / L.CONFIG_JSON)
    cfg = cfgmod.load(args.config, args.overrides)
    from spikebench.train.loop import train
    from spikebench.train.setup import describe_memory, preflight

    if args.dry_run:
        check_metrics()
        n_params = preflight(cfg)  # what a run would refuse (device, model class, corpus path)
        print(cfg.to_json())
        print(f"spikebench train: {describe_memory(cfg, n_params)}", file=sys.stderr)
        return 0

    if cfg.train.nproc > 1 and "WORLD_SIZE" not in os.environ:  # start the ranks
        import subprocess

        from spikebench.train.launch import command

        threads = cfg.train.threads or os.cpu_count() or 1  # shared by the ranks
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, threads // cfg.train.nproc)),
               "SPIKEBENCH_PARENT_PID": str(os.getpid())}
        return subprocess.call(command(cfg.train.nproc, "spikebench", *args.argv), env=env)
    if "TORCHELASTIC_RUN_ID" in os.environ and "SPIKEBENCH_PARENT_PID" in os.environ:
        from spikebench.runio import die_with_parent  # a rank spikebench's launcher started

        if not die_with_parent():
            return 3
    from spikebench.train.dist import from_env, teardown
    from spikebench.train.sinks import ProgressBar

    main_rank = from_env().main  # data-parallel: only rank 0 shows progress and exports
    sinks = [ProgressBar(cfg.train.steps)] if cfg.train.progress and main_rank else []
    if main_rank:
        sinks += live_sinks() + warning_sinks(cfg)
    try:
        summary = train(cfg, run_dir=run_dir, sinks=sinks, resume=run_dir is not None)
    finally:
        teardown()
    return 0 if summary["status"] in ("completed", "diverged") else 1
