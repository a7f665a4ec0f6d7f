"""The ``spikebench spikes`` command: read a log file or a folder of runs, score it with the
detector, print the events (``--json``: JSON), draw ``--plot``.

:func:`run_spikes` is what :mod:`spikebench.cli` dispatches to. A plain CSV/JSONL file goes
through the fast reader (:mod:`.text`), anything else through :func:`.discover.discover`;
one run is shown in full, several one line each (:func:`.score.score_run`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from spikebench.errors import UserError

# Keys of each event in `spikes --json` (height: metric units; height_sigma: in sigma).
JSON_EVENT_KEYS = ("onset", "peak", "metric", "height_sigma", "recovery_steps", "height")


def run_spikes(args: argparse.Namespace) -> int:
    """``spikebench spikes PATH``: score one run in full, or a folder of runs one line each;
    ``args`` as the command line parsed them. Returns the exit code."""
    from spikebench.spikes.offline import score_log  # the monitor's events, whole-log fast

    if args.plot is not None:
        from spikebench.spikes.plot import check_plot_path

        check_plot_path(args.plot, args.file)
    log, found = _spikes_input(args)
    if found is not None and not found.single:
        return _spikes_table(found, args)
    res = score_log(log, rule=args.detector, gap=args.gap)
    ttt = None
    if args.target_loss is not None:
        from spikebench.runs.score import time_to_target

        ttt = time_to_target(found.runs[0], args.target_loss)
    if args.plot is not None:
        from spikebench.spikes.plot import plot_events

        try:
            plot_events(log, res["events"], args.detector, args.plot)
        except (OSError, ValueError) as e:
            raise UserError(f"--plot {args.plot}: cannot write the plot ({e})") from None
    if args.json:
        out = {"steps": res["steps"], **columns_of(log),
               "events": [{k: e[k] for k in JSON_EVENT_KEYS} for e in res["events"]],
               "spike_score": res["spike_score"]}
        if ttt is not None:
            out["time_to_target"] = ttt
        print(json.dumps(out, allow_nan=False))
        if log.note:  # stdout holds the JSON only
            print(f"spikebench spikes: note: {log.note}", file=sys.stderr)
    else:
        _print_spikes(res, log, args.detector, ttt)
    return 0


def columns_of(log) -> dict:
    """The columns a reading took, as every reading states them (``--json`` too)."""
    return {"step_column": log.step_column, "loss_column": log.loss_column,
            "grad_column": log.grad_column}


def _spikes_input(args: argparse.Namespace):
    """(the log to score, None) for a plain CSV/JSONL file, read by the fast reader as
    before; else (the one run's log, or None, and what :mod:`spikebench.runs` found)."""
    from spikebench.runs.detect import FLAT, detect_file
    from spikebench.runs.text import is_dir, read_log

    path = Path(args.file)
    if not is_dir(path) and args.target_loss is None and detect_file(path) in FLAT:
        return read_log(path, args.metric, args.grad_metric, args.step), None
    # Every format's reader, imported only here: a plain log needs none of them.
    from spikebench.runs.discover import discover
    from spikebench.runs.table import to_log

    found = discover(path, step=args.step, metric=args.metric, grad_metric=args.grad_metric)
    for line in found.skipped:
        print(f"spikebench spikes: note: skipped {line}", file=sys.stderr)
    if not found.single:
        return None, found
    return to_log(found.runs[0]), found


def _spikes_table(found, args: argparse.Namespace) -> int:
    """A folder of runs (or a file of several): one line (``--json``: one object) per run."""
    from spikebench.runs.score import score_run

    if args.plot is not None:
        raise UserError(f"--plot {args.plot}: draws one run; {args.file} holds "
                        f"{len(found.runs)} runs (give one run's file or folder)")
    rows = [score_run(r, rule=args.detector, gap=args.gap, target=args.target_loss)
            for r in found.runs]
    if args.json:
        try:
            for row in rows:
                print(json.dumps(row, allow_nan=False), flush=True)
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    from tabulate import tabulate

    def reached(t):
        if t["step"] is None:
            return "not reached"
        return f"{t['step']} ({'val' if t['metric'] == 'val/loss' else 'train'})"

    headers = ["run", "format", "steps", "step column", "loss column", "events",
               "worst severity"]
    if args.target_loss is not None:
        headers.append(f"step at loss <= {args.target_loss:g}")
    table = [[r["run"], r["format"], r["steps"], r["step_column"], r["loss_column"],
              r["n_events"],
              "-" if r["worst_severity"] is None else f"{r['worst_severity']:.3g}",
              *([reached(r["time_to_target"])] if args.target_loss is not None else [])]
             for r in rows]
    print(tabulate(table, headers=headers, disable_numparse=True))
    print(f"{len(rows)} run{'' if len(rows) == 1 else 's'}, detector {args.detector}; "
          "events: loss spike events; worst severity: the largest event's area (loss x "
          "steps above the pre-spike trend)")
    for r in rows:
        if r["note"]:
            print(f"note: {r['run']}: {r['note']}")
    return 0


def _print_spikes(res: dict, log, detector: str, ttt: dict | None = None) -> None:
    from tabulate import tabulate

    print(f"{log.path}: {res['steps']} steps, loss column {log.loss_column!r}"
          + (f", grad norm column {log.grad_column!r}" if log.grad_column else "")
          + f", step column {log.step_column!r}, detector {detector}")
    if log.note:
        print(f"note: {log.note}")
    if res["events"]:
        rows = [
            [e["onset"], e["peak"], e["metric"],
             "-" if e["height"] is None else f"{e['height']:.3g}",
             "-" if e["height_sigma"] is None else f"{e['height_sigma']:.1f}",
             e["recovery_steps"] if e["recovered"] else f"{e['recovery_steps']} (unrecovered)",
             "-" if e["area"] is None else f"{e['area']:.3g}"]
            for e in res["events"]
        ]
        print(tabulate(rows, headers=["onset", "peak", "metric", "height", "height σ",
                                      "recovery", "area"]))
    else:
        print("no spike events")
    sc = res["spike_score"]

    def fmt(x):
        return "n/a (needs > 1000 values)" if x is None else f"{100 * x:.3f}%"

    print(f"spike score (OLMo 7σ share): loss {fmt(sc['loss'])}"
          + (f", grad_norm {fmt(sc['grad_norm'])}" if log.has_grad_norm else ""))
    if ttt is not None:
        print(f"loss <= {ttt['target']:g} ({ttt['metric']}): "
              + ("not reached" if ttt["step"] is None else f"first at step {ttt['step']}"))
