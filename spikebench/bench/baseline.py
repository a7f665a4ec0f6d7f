"""A bench's baseline file: its format and reading it back, every value checked.

``spikebench bench --update-baseline`` writes the file (:mod:`.run`); a baseline read back
is refused in one line naming the first field that is not what such a file holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spikebench import config as cfgmod
from spikebench.bench.compare import METRICS, PERF_METRICS
from spikebench.errors import UserError
from spikebench.values import finite

FORMAT = 1  # of the baseline file


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _number_or_null(x: Any, *, low: float | None = 0.0, null: bool = True) -> bool:
    return (x is None and null) or (finite(x) and (low is None or x >= low))


def check_baseline(b: Any) -> tuple[str, Any, str] | None:
    """The first value of a loaded baseline that is not what :func:`spikebench.bench.run.collect`
    and :func:`~spikebench.bench.run.measure_perf` write: (field, value, what is allowed); None when all are."""
    if not isinstance(b, dict):
        return "the file", b, "a JSON object"
    if b.get("format") != FORMAT:
        return "format", b.get("format"), f"{FORMAT} (record one with --update-baseline)"
    env = b.get("environment")
    if not isinstance(env, dict):
        return "environment", env, "a table of strings and numbers"
    for k, v in env.items():
        if not (v is None or isinstance(v, str) or finite(v)):
            return f"environment.{k}", v, "a string, a finite number or null"
    if "suite" in b and not isinstance(b["suite"], str):
        return "suite", b["suite"], "a string"
    if "seconds" in b and not _number_or_null(b["seconds"], null=False):
        return "seconds", b["seconds"], "a finite number >= 0"
    scenarios = b.get("scenarios")
    if not isinstance(scenarios, dict):
        return "scenarios", scenarios, "a table of scenarios"
    for name, sc in scenarios.items():
        where = f"scenarios.{name}"
        if not isinstance(sc, dict):
            return where, sc, "a table with seeds"
        if not isinstance(sc.get("config", {}), dict):
            return f"{where}.config", sc["config"], "a table of settings"
        seeds = sc.get("seeds")
        if not isinstance(seeds, dict):
            return f"{where}.seeds", seeds, "a table of seeds"
        for seed, v in seeds.items():
            at = f"{where}.seeds.{seed}"
            if not isinstance(v, dict):
                return at, v, "a table of metrics and losses"
            for metric in METRICS:
                if metric not in v:
                    return f"{at}.{metric}", "(missing)", "a finite number >= 0 or null"
                if not _number_or_null(v[metric]):
                    return f"{at}.{metric}", v[metric], "a finite number >= 0 or null"
            losses = v.get("losses")
            if not isinstance(losses, list):
                return f"{at}.losses", losses, "a list of numbers or nulls"
            for i, x in enumerate(losses):
                if not _number_or_null(x, low=None):
                    return f"{at}.losses[{i}]", x, "a finite number or null"
            speed = v.get("speed", {})
            if not isinstance(speed, dict):
                return f"{at}.speed", speed, "a table of a trainer's logged speeds"
            for k, x in speed.items():
                if k.endswith("_column"):
                    if not isinstance(x, str):
                        return f"{at}.speed.{k}", x, "a column name (a string)"
                elif not (finite(x) and x > 0):
                    return f"{at}.speed.{k}", x, "a finite number > 0"
    det = b.get("determinism", {})
    if not isinstance(det, dict):
        return "determinism", det, "a table (deterministic, how, evidence)"
    if "deterministic" in det and not isinstance(det["deterministic"], bool):
        return "determinism.deterministic", det["deterministic"], "true or false"
    for k in ("how", "evidence"):
        if k in det and not isinstance(det[k], str):
            return f"determinism.{k}", det[k], "a string"
    perf = b.get("perf", {})
    if not isinstance(perf, dict):
        return "perf", perf, "a table of measurements"
    for k, v in perf.items():
        if k in PERF_METRICS:
            if not (finite(v) and v > 0):
                return f"perf.{k}", v, "a finite number > 0"
        elif not (v is None or isinstance(v, str) or finite(v)):
            return f"perf.{k}", v, "a string, a finite number or null"
    return None


def read_baseline(path: Path) -> dict[str, Any]:
    """The baseline at ``path``, every value checked: one line naming the first field that
    is not what a recorded baseline holds, its value and what is allowed."""
    where = f"--baseline {str(path)[:200]!r}"
    cfgmod.regular_file(path, "--baseline")
    try:
        b = json.loads(path.read_bytes().decode("utf-8"))
    except RecursionError:
        raise UserError(f"{where}: nested more than {cfgmod.MAX_DEPTH} levels deep; not a "
                        f"bench baseline of format {FORMAT}") from None
    except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON, a 5000-digit number
        raise UserError(f"{where}: not a bench baseline of format {FORMAT} (not valid JSON: "
                        f"{(str(e).splitlines() or [type(e).__name__])[0][:100]}; record one "
                        "with --update-baseline)") from None
    cfgmod.check_depth(b, where)
    bad = check_baseline(b)
    if bad is not None:
        field, value, allowed = bad
        raise UserError(f"{where}: {field} = {_shown(value)}: must be {allowed} (not a "
                        f"bench baseline of format {FORMAT} as --update-baseline records it)")
    return b
