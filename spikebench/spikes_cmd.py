"""``spikebench spikes FILE``: spike events and scores of any training log.

Runs the same :class:`~spikebench.detectors.SpikeMonitor` the trainer runs online over the
rows of a CSV/JSONL log (see :mod:`spikebench.logs` for the accepted formats). Output is a
short table of events and the OLMo spike scores, or with ``--json`` exactly one JSON object::

    {"steps": N, "events": [{"onset": S, "peak": S, "metric": "loss", "height_sigma": X,
     "recovery_steps": R, "height": H}, ...], "spike_score": {"loss": X, "grad_norm": Y}}

``height`` is peak minus pre-onset level in the metric's own units (nats for a loss); it is
given for every event, including those found before 4 values existed, whose
``height_sigma`` is null (no noise scale yet). Both are null for a non-finite peak.

Every user error is one line on stderr, ``spikebench spikes: error: ...``, and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from spikebench.detectors import INJECTED_KEY, RULES, SpikeMonitor
from spikebench.events import json_safe
from spikebench.logs import Log, LogError, read_log
from spikebench.scores import spike_score

PROG = "spikebench spikes"
# Keys of each event in the --json output (height: metric units; height_sigma: in sigma).
JSON_EVENT_KEYS = ("onset", "peak", "metric", "height_sigma", "recovery_steps", "height")


class _Parser(argparse.ArgumentParser):
    """Argparse errors as one line (no usage dump), exit code 2, as for our own errors."""

    def error(self, message: str):
        print(f"{PROG}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="training log: CSV or JSONL with a step and a loss column")
    p.add_argument("--metric", help="loss column name (default: loss, train/loss, ...)")
    p.add_argument("--grad-metric", help="grad-norm column name (default: grad_norm, optim/grad_norm)")
    p.add_argument(
        "--detector", default="default", metavar="NAME",
        help=f"spike rule: {', '.join(RULES)} (default: default)",
    )
    p.add_argument("--gap", type=int, default=5, help="max unflagged rows inside one event (default 5)")
    p.add_argument("--json", action="store_true", help="print one JSON object, nothing else")
    p.add_argument("--plot", metavar="PNG", help="draw the curve(s) with events marked")
    p.set_defaults(func=run)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``spikes`` subcommand to an argparse subparsers object (``func=run``)."""
    p = subparsers.add_parser("spikes", help="find loss spikes in a training log")
    _configure(p)
    return p


def analyse(log: Log, detector: str = "default", gap: int = 5) -> dict:
    """Events and spike scores of a parsed log (JSON-safe dict, the ``--json`` payload)."""
    keys = ("loss", "grad_norm") if log.has_grad_norm else ("loss",)
    mon = SpikeMonitor(detector, keys, gap=gap)
    frame = log.frame
    loss = frame["loss"].tolist()
    if log.has_grad_norm:
        grad = frame["grad_norm"].tolist()
        grad_missing = frame["grad_norm_missing"].tolist()
    injected = frame["injected"].tolist() if "injected" in frame else None
    for i, step in enumerate(frame["step"].tolist()):
        row = {"loss": loss[i]}
        if injected is not None and injected[i]:
            row[INJECTED_KEY] = 1
        if log.has_grad_norm and not grad_missing[i]:
            row["grad_norm"] = grad[i]
        mon.update(int(step), row)
    mon.finish()
    events = [
        {
            "onset": e.onset,
            "peak": e.peak,
            "metric": e.metric,
            "height_sigma": e.height_sigma,
            "height": e.height,
            "recovery_steps": e.recovery_steps,
            "recovered": e.recovered,
            "area": e.area,
        }
        for e in mon.events
    ]
    return json_safe({
        "steps": len(frame),
        "events": events,
        "spike_score": {
            "loss": spike_score(frame["loss"].tolist()),
            "grad_norm": spike_score(frame["grad_norm"].tolist()) if log.has_grad_norm else None,
        },
        "_events": mon.events,
    } | {"detector": detector})


def _print_table(res: dict, log: Log) -> None:
    from tabulate import tabulate

    evs = res["events"]
    print(f"{log.path}: {res['steps']} steps, loss column {log.loss_column!r}"
          + (f", grad norm column {log.grad_column!r}" if log.grad_column else "")
          + f", detector {res['detector']}")
    if evs:
        rows = [
            [e["onset"], e["peak"], e["metric"],
             "-" if e["height"] is None else f"{e['height']:.3g}",
             "-" if e["height_sigma"] is None else f"{e['height_sigma']:.1f}",
             e["recovery_steps"] if e["recovered"] else f"{e['recovery_steps']} (unrecovered)",
             "-" if e["area"] is None else f"{e['area']:.3g}"]
            for e in evs
        ]
        headers = ["onset", "peak", "metric", "height", "height σ", "recovery", "area"]
        print(tabulate(rows, headers=headers))
    else:
        print("no spike events")
    sc = res["spike_score"]

    def fmt(x):
        return "n/a (needs > 1000 values)" if x is None else f"{100 * x:.3f}%"

    print(f"spike score (OLMo 7σ share): loss {fmt(sc['loss'])}"
          + (f", grad_norm {fmt(sc['grad_norm'])}" if log.has_grad_norm else ""))


def _plot(res: dict, log: Log, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ["loss"] + (["grad_norm"] if log.has_grad_norm else [])
    fig, axes = plt.subplots(len(keys), 1, figsize=(10, 3.2 * len(keys)), sharex=True, squeeze=False)
    f = log.frame
    for ax, k in zip(axes[:, 0], keys, strict=True):
        ax.plot(f["step"], f[k], lw=0.7, color="C0")
        for e in res["_events"]:
            if e.metric != k:
                continue
            ax.axvspan(e.onset, e.onset + max(e.recovery_steps, 1), color="C3", alpha=0.15)
            ax.axvline(e.onset, color="C3", lw=0.8)
        ax.set_ylabel(k)
        if k == "grad_norm":
            ax.set_yscale("log")
    axes[-1, 0].set_xlabel("step")
    axes[0, 0].set_title(f"{log.path} — {len(res['events'])} events ({res['detector']})")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    try:
        if args.detector not in RULES:
            raise LogError(f"unknown detector {args.detector!r}; choose from: {', '.join(RULES)}")
        if args.gap < 0:
            raise LogError(f"--gap must be >= 0, got {args.gap}")
        log = read_log(args.file, args.metric, args.grad_metric)
        res = analyse(log, args.detector, args.gap)
        if args.plot:
            try:
                _plot(res, log, args.plot)
            except (OSError, ValueError) as e:
                raise LogError(f"cannot write plot {args.plot}: {e}") from None
        if args.json:
            payload = {k: res[k] for k in ("steps", "events", "spike_score")}
            payload["events"] = [
                {k: e[k] for k in JSON_EVENT_KEYS} for e in payload["events"]
            ]
            print(json.dumps(payload, allow_nan=False))
        else:
            _print_table(res, log)
    except LogError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m spikebench.spikes_cmd FILE [options]``."""
    p = _Parser(prog=PROG, description="Find loss spikes in a training log.")
    _configure(p)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
