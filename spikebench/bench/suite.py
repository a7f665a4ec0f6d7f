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

A suite with a ``[trainer]`` table (a sweep file's: :mod:`spikebench.sweep.command`) benches
a trainer of the team's own: its scenarios are the trainer's free-form parameters, each seed
runs the command, and its performance is what the trainer's own log says::

    [bench]
    deterministic = "check"  # true | false | "check": repeat one seed per scenario when
                             # recording; exact loss comparison only if deterministic
    [bench.perf]
    tokens_per_s = "perf/tokens_per_s"  # the log's tokens/s column (higher is better)
    step_s = "step_time"                # or its seconds-per-step column (lower is better)
    tolerance = { trainer_tokens_per_s = 0.15, trainer_step_s = 0.15 }

Every problem is one line naming the file, the key, the value and what is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spikebench import config as cfgmod
from spikebench import metrics as M
from spikebench.bench.compare import (
    BUILTIN_PERF,
    EXACT_UP_TO,
    METRICS,
    PERF_METRICS,
    TRAINER_PERF,
    min_p,
)
from spikebench.errors import UserError
from spikebench.runs.columns import STEP_S_NAMES, TOKENS_PER_S_NAMES
from spikebench.sweep.spec import SweepSpec, load_sweep

# tokens/s is an absolute speed: shown beside the ratios, never judged. A trainer's logged
# speed is judged against its baseline's on the same environment only (run.compare).
DEFAULT_TOLERANCE = {"tokens_per_s": None, "overhead_ratio": 0.10, "mfu": 0.15,
                     "sweep_scaling": 0.25, "report_ratio": 0.25,
                     "trainer_tokens_per_s": 0.15, "trainer_step_s": 0.15}
# A trainer log's throughput columns, found case-insensitively when the suite names none.
# A trainer log's throughput columns, by kind: the record key they are read under and the
# names looked for (spikebench.runs.columns, the one table).
COLUMN_KEY = {"tokens_per_s": M.TOKENS_PER_S, "step_s": M.STEP_S}
COLUMN_NAMES = {"tokens_per_s": TOKENS_PER_S_NAMES, "step_s": STEP_S_NAMES}
# The perf figure each column becomes.
COLUMN_METRIC = {"tokens_per_s": "trainer_tokens_per_s", "step_s": "trainer_step_s"}
DETERMINISTIC = 'true, false or "check"'
MAX_COLUMN = 200  # characters of a column name
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
    # A [trainer] suite's: the log columns named (``{"tokens_per_s": "perf/tokens_per_s"}``;
    # empty: found by COLUMN_NAMES).
    columns: dict[str, str] = field(default_factory=dict)


BUILTIN_PERF_KEYS = ("overhead_steps", "overhead_repeats", "sweep_trials", "sweep_steps",
                     "report_trials", "tolerance")
TRAINER_PERF_KEYS = ("tokens_per_s", "step_s", "tolerance")


@dataclass(frozen=True)
class Suite:
    path: str
    spec: SweepSpec  # its arms are the scenarios
    level: float = 0.05
    min_effect: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIN_EFFECT))
    perf: PerfSettings = PerfSettings()
    # A [trainer] suite's: True (declared), False (declared: never compared exactly) or
    # "check" (a seed of every scenario run twice when the baseline is recorded). The
    # built-in engine is deterministic on one environment: always True.
    deterministic: bool | str = True

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def trainer(self) -> bool:
        return bool(self.spec.trainer)


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


def _tolerance(path: str, raw: Any, allowed: tuple[str, ...] = BUILTIN_PERF
                ) -> dict[str, float | None]:
    """One number for every performance ratio, or a table of them by metric ("off", in any
    case: shown, not judged); ``allowed``: the suite's ratios (the built-in engine's, or a
    trainer's)."""
    if not isinstance(raw, dict):
        if _off(raw):
            return dict.fromkeys(PERF_METRICS)
        t = float(_number(path, "perf.tolerance", raw, lo=0.0, hi=MAX_TOLERANCE, lo_open=True,
                          off=True))
        return {k: None if DEFAULT_TOLERANCE[k] is None else t for k in PERF_METRICS}
    if set(raw) - set(allowed):
        bad = sorted(set(raw) - set(allowed))[0]
        what = ("is a [trainer] suite's ratio, not the built-in engine's" if bad in TRAINER_PERF
                else "is the built-in engine's ratio, not a [trainer]'s" if bad in PERF_METRICS
                else "is not a performance ratio")
        raise UserError(f"{path}: bench.perf.tolerance = {{ {bad} = {_toml(raw[bad])} }}: "
                        f"{bad!r} {what} (allowed: "
                        + ", ".join(allowed) + ")")
    return {**DEFAULT_TOLERANCE, **{k: None if v is None or _off(v) else float(_number(
        path, f"perf.tolerance.{k}", v, lo=0.0, hi=MAX_TOLERANCE, lo_open=True, off=True))
        for k, v in raw.items()}}


def _deterministic(path: str, raw: dict[str, Any], trainer: bool) -> bool | str:
    """``bench.deterministic``: a [trainer] suite's only (default "check")."""
    if "deterministic" not in raw:
        return "check" if trainer else True
    value = raw["deterministic"]
    if not trainer:
        raise UserError(f"{path}: bench.deterministic = {_toml(value)}: only for a suite with "
                        "a [trainer] (the built-in engine is deterministic on one "
                        "environment: its losses are always compared bit for bit there)")
    if isinstance(value, str) and value.strip().lower() == "check":
        return "check"
    if not isinstance(value, bool):
        raise UserError(f"{path}: bench.deterministic = {_toml(value)}: must be "
                        f"{DETERMINISTIC} (repeat a seed per scenario when recording)")
    return value


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _columns(path: str, p: dict[str, Any]) -> dict[str, str]:
    """``bench.perf.tokens_per_s`` / ``step_s``: the names of a trainer log's columns."""
    out = {}
    for key in COLUMN_NAMES:
        if key not in p:
            continue
        value = p[key]
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_COLUMN:
            raise UserError(f"{path}: bench.perf.{key} = {_toml(value)}: must be the name of "
                            f"a column of the trainer's log (a string of 1 to {MAX_COLUMN} "
                            "characters), e.g. " + repr(COLUMN_NAMES[key][0]))
        out[key] = value.strip()
    return out


def _trainer_perf(path: str, p: dict[str, Any]) -> PerfSettings:
    """A [trainer] suite's ``[bench.perf]``: the log's columns and their tolerances; the
    built-in engine's measurements are refused (they time spikebench's own loop)."""
    for key in sorted(set(p) & (set(BUILTIN_PERF_KEYS) - set(TRAINER_PERF_KEYS))):
        if p[key] != 0:
            raise UserError(f"{path}: bench.perf.{key} = {_toml(p[key])}: measures "
                            "spikebench's built-in engine, not a [trainer]; leave it out (a "
                            "trainer's speed is its log's column: bench.perf.tokens_per_s "
                            "or step_s)")
    unknown = sorted(set(p) - set(BUILTIN_PERF_KEYS) - set(TRAINER_PERF_KEYS))
    if unknown:
        raise UserError(f"{path}: unknown key 'bench.perf.{unknown[0]}' (allowed with a "
                        f"[trainer]: {', '.join(TRAINER_PERF_KEYS)})")
    return PerfSettings(overhead_steps=0, sweep_trials=0, report_trials=0,
                        tolerance=_tolerance(path, p.get("tolerance", {}), TRAINER_PERF),
                        columns=_columns(path, p))


def load_suite(path: str | Path) -> Suite:
    path = str(path)
    spec = load_sweep(path, extra_tables=("bench",))
    if spec.trials:
        raise UserError(f"{path}: study.trials = {spec.trials}: a bench suite runs its "
                        "scenarios (the comparison arms) only; set 0")
    raw = cfgmod.load_toml(path, "suite").get("bench", {})
    if not isinstance(raw, dict):
        raise UserError(f"{path}: bench = {raw!r}: must be a table")
    keys = ("level", "min_effect", "perf", *(("deterministic",) if spec.trainer else ()))
    unknown = set(raw) - set(keys) - {"deterministic"}  # the latter: refused below, with why
    if unknown:
        raise UserError(f"{path}: unknown key 'bench.{sorted(unknown)[0]}' (allowed: "
                        f"{', '.join(keys)})")
    deterministic = _deterministic(path, raw, bool(spec.trainer))
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
    if spec.trainer:
        return Suite(path=path, spec=spec, level=float(level), min_effect=min_effect,
                     perf=_trainer_perf(path, p), deterministic=deterministic)
    defaults = PerfSettings()
    if set(p) - set(BUILTIN_PERF_KEYS):
        bad = sorted(set(p) - set(BUILTIN_PERF_KEYS))[0]
        why = " is a [trainer] suite's (its log's column)" if bad in COLUMN_NAMES else ""
        raise UserError(f"{path}: unknown key 'bench.perf.{bad}'{why} (allowed: "
                        f"{', '.join(BUILTIN_PERF_KEYS)})")
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
        tolerance=_tolerance(path, p.get("tolerance", {})))
    return Suite(path=path, spec=spec, level=float(level), min_effect=min_effect, perf=perf)


def default_baseline(suite: Suite) -> Path:
    """``baselines/<suite name>.json`` beside the suites folder for a suite in a folder
    named ``suites`` (``benchmarks/suites/cpu.toml`` -> ``benchmarks/baselines/cpu.json``),
    else in a ``baselines`` folder beside the suite: never above the suite's own folder."""
    folder = Path(suite.path).resolve().parent
    home = folder.parent if folder.name == "suites" else folder
    return home / "baselines" / f"{suite.name}.json"
