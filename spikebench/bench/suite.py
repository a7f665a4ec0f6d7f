"""A benchmark suite (``benchmarks/suites/*.toml``): a sweep file whose arms are the
scenarios, plus a ``[bench]`` table with the test's level, the minimum effect per metric and
the performance checks::

    [bench]
    level = 0.05
    min_effect = { n_events = 1, severity = 10, steps_to_target = 20, final_val_loss = 0.05 }
    [bench.perf]
    overhead_steps = 150   # 0: no overhead / MFU measurement
    overhead_repeats = 3
    sweep_trials = 4       # 0: no sweep-scaling measurement
    sweep_steps = 40
    report_trials = 500    # 0: no report-time measurement
    # How much worse each performance ratio may be: one number, or per metric ("off":
    # shown, not judged).
    tolerance = { overhead_ratio = 0.10, mfu = 0.15, sweep_scaling = 0.25, report_ratio = 0.25 }

Every problem is one line naming the file, the key, the value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spikebench import config as cfgmod
from spikebench.bench.compare import EXACT_UP_TO, METRICS, PERF_METRICS, min_p
from spikebench.errors import UserError
from spikebench.sweep.spec import SweepSpec, load_sweep

# tokens/s is an absolute speed: shown beside the ratios, never judged.
DEFAULT_TOLERANCE = {"tokens_per_s": None, "overhead_ratio": 0.10, "mfu": 0.15,
                     "sweep_scaling": 0.25, "report_ratio": 0.25}
DEFAULT_MIN_EFFECT = {"n_events": 1.0, "severity": 10.0, "steps_to_target": 20.0,
                      "final_val_loss": 0.05}


@dataclass(frozen=True)
class PerfSettings:
    overhead_steps: int = 150
    overhead_repeats: int = 3
    sweep_trials: int = 4
    sweep_steps: int = 40
    report_trials: int = 500
    tolerance: dict[str, float | None] = field(
        default_factory=lambda: dict(DEFAULT_TOLERANCE))


@dataclass(frozen=True)
class Suite:
    path: str
    spec: SweepSpec  # its arms are the scenarios
    level: float = 0.05
    min_effect: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIN_EFFECT))
    perf: PerfSettings = PerfSettings()

    @property
    def name(self) -> str:
        return self.spec.name


# Upper bounds of the suite's numbers: past these a setting is a typo, not a plan.
MAX_EFFECT = 1e6  # a minimum effect of more than a million events, nats or steps
MAX_TOLERANCE = 100.0  # a ratio allowed to be 100 times worse is no check: use "off"
MAX_STEPS = 10**7
MAX_COUNT = 10**5


def _number(path: str, key: str, value: Any, *, lo: float, hi: float = math.inf,
            integer: bool = False, lo_open: bool = False, off: bool = False) -> float:
    """A finite number (an integer with ``integer``) in [lo, hi] ((lo, hi] with
    ``lo_open``), else one line naming the key, the value and what is allowed."""
    kind = "an integer" if integer else "a finite number"
    ok = (isinstance(value, int) if integer else isinstance(value, int | float)) \
        and not isinstance(value, bool) and math.isfinite(value) \
        and (lo < value if lo_open else lo <= value) and value <= hi
    if not ok:
        bound = f"> {lo:g}" if lo_open else f">= {lo:g}"
        allowed = f"{kind} {bound}" + (f" and <= {hi:g}" if hi < math.inf else "")
        shown = (f"{str(value)[:20]}... ({len(str(value))} digits)"
                 if isinstance(value, int) and len(str(value)) > 30 else repr(value))
        raise UserError(f"{path}: bench.{key} = {shown}: must be {allowed}"
                        + (' or "off" (shown, not judged)' if off else ""))
    return value


def _off(value: Any) -> bool:
    """ "off" in any case: a check shown, not judged."""
    return isinstance(value, str) and value.strip().lower() == "off"


def _tolerance(path: str, raw: Any) -> dict[str, float | None]:
    """One number for every performance ratio, or a table of them by metric ("off", in any
    case: shown, not judged)."""
    if not isinstance(raw, dict):
        if _off(raw):
            return dict.fromkeys(PERF_METRICS)
        t = float(_number(path, "perf.tolerance", raw, lo=0.0, hi=MAX_TOLERANCE, lo_open=True,
                          off=True))
        return {k: None if DEFAULT_TOLERANCE[k] is None else t for k in PERF_METRICS}
    if set(raw) - set(PERF_METRICS):
        raise UserError(f"{path}: bench.perf.tolerance: {sorted(set(raw) - set(PERF_METRICS))[0]!r}"
                        " is not a performance ratio (allowed: " + ", ".join(PERF_METRICS) + ")")
    return {**DEFAULT_TOLERANCE, **{k: None if v is None or _off(v) else float(_number(
        path, f"perf.tolerance.{k}", v, lo=0.0, hi=MAX_TOLERANCE, lo_open=True, off=True))
        for k, v in raw.items()}}


def load_suite(path: str | Path) -> Suite:
    path = str(path)
    spec = load_sweep(path, extra_tables=("bench",))
    if spec.trainer:
        raise UserError(f"{path}: [trainer]: a bench suite runs the built-in engine only "
                        "(command trainers in suites are not supported yet)")
    if spec.trials:
        raise UserError(f"{path}: study.trials = {spec.trials}: a bench suite runs its "
                        "scenarios (the comparison arms) only; set 0")
    raw = cfgmod.load_toml(path, "suite").get("bench", {})
    if not isinstance(raw, dict):
        raise UserError(f"{path}: bench = {raw!r}: must be a table")
    unknown = set(raw) - {"level", "min_effect", "perf"}
    if unknown:
        raise UserError(f"{path}: unknown key 'bench.{sorted(unknown)[0]}' (allowed: level, "
                        "min_effect, perf)")
    level = _number(path, "level", raw.get("level", 0.05), lo=0.0, hi=0.5, lo_open=True)
    n = len(spec.seeds)
    if n > EXACT_UP_TO:
        raise UserError(f"{path}: study.seeds has {n} seeds: a bench suite takes at most "
                        f"{EXACT_UP_TO} (its exact test enumerates every split of the seeds)")
    # Holm's first threshold over the run's tests (every metric of every scenario): a test
    # whose smallest p lies above it can never call a regression.
    tests = len(spec.arms) * len(METRICS)
    first = level / tests
    if min_p(n, n) > first:
        need = next((k for k in range(1, EXACT_UP_TO + 1) if min_p(k, k) <= first), None)
        fix = (f"use at least {need} seeds" if need else
               f"raise bench.level or use fewer scenarios ({EXACT_UP_TO} seeds cannot reach it)")
        raise UserError(f"{path}: study.seeds has {n} seed(s): the exact test's smallest p is "
                        f"then {min_p(n, n):.3g} > bench.level / {tests} tests = {first:.3g} "
                        f"(Holm's first threshold), so no regression could ever be found; "
                        f"{fix}")
    effects = raw.get("min_effect", {})
    if not isinstance(effects, dict) or set(effects) - set(METRICS):
        bad = sorted(set(effects) - set(METRICS))[0] if isinstance(effects, dict) else effects
        raise UserError(f"{path}: bench.min_effect: {bad!r} is not a metric (allowed: "
                        + ", ".join(METRICS) + ")")
    min_effect = {**DEFAULT_MIN_EFFECT, **{
        k: float(_number(path, f"min_effect.{k}", v, lo=0.0, hi=MAX_EFFECT))
        for k, v in effects.items()}}
    p = raw.get("perf", {})
    if not isinstance(p, dict):
        raise UserError(f"{path}: bench.perf = {p!r}: must be a table")
    defaults = PerfSettings()
    if set(p) - set(defaults.__dict__):
        raise UserError(f"{path}: unknown key 'bench.perf.{sorted(set(p) - set(defaults.__dict__))[0]}'"
                        f" (allowed: {', '.join(defaults.__dict__)})")
    perf = PerfSettings(
        overhead_steps=int(_number(path, "perf.overhead_steps", p.get(
            "overhead_steps", defaults.overhead_steps), lo=0, hi=MAX_STEPS, integer=True)),
        overhead_repeats=int(_number(path, "perf.overhead_repeats", p.get(
            "overhead_repeats", defaults.overhead_repeats), lo=1, hi=MAX_COUNT, integer=True)),
        sweep_trials=int(_number(path, "perf.sweep_trials", p.get(
            "sweep_trials", defaults.sweep_trials), lo=0, hi=MAX_COUNT, integer=True)),
        sweep_steps=int(_number(path, "perf.sweep_steps", p.get(
            "sweep_steps", defaults.sweep_steps), lo=1, hi=MAX_STEPS, integer=True)),
        report_trials=int(_number(path, "perf.report_trials", p.get(
            "report_trials", defaults.report_trials), lo=0, hi=MAX_COUNT, integer=True)),
        tolerance=_tolerance(path, p.get("tolerance", defaults.tolerance)))
    return Suite(path=path, spec=spec, level=float(level), min_effect=min_effect, perf=perf)


def default_baseline(suite: Suite) -> Path:
    """``baselines/<suite name>.json`` beside the suites folder for a suite in a folder
    named ``suites`` (``benchmarks/suites/cpu.toml`` -> ``benchmarks/baselines/cpu.json``),
    else in a ``baselines`` folder beside the suite: never above the suite's own folder."""
    folder = Path(suite.path).resolve().parent
    home = folder.parent if folder.name == "suites" else folder
    return home / "baselines" / f"{suite.name}.json"
