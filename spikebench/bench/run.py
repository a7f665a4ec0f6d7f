"""``spikebench bench``: run a suite with the sweep's workers, compare it with a committed
baseline, print and write the verdicts, and fail on a regression.

Each run gets a fresh folder ``results/bench/<suite>-<time>/`` (the study, ``bench.json``,
``bench.md``), so a bench never resumes an older one. ``--update-baseline`` records this
run as the baseline instead of comparing; without it a missing baseline is an error, never
a silent recording.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

from spikebench import config as cfgmod
from spikebench.bench.compare import (
    METRICS,
    PERF_METRICS,
    Judged,
    MetricCase,
    false_alarm_note,
    family_of,
    first_mismatch,
    judge_metrics,
    judge_perf,
    same_environment,
)
from spikebench.bench.suite import Suite, default_baseline, load_suite
from spikebench.errors import UserError
from spikebench.report.data import load_study, seed_log
from spikebench.runio import atomic_write_json, atomic_write_text
from spikebench.values import finite

FORMAT = 1  # of the baseline file
FAILING = ("regressed", "changed")


def collect(study_dir: Path, suite: Suite) -> dict[str, Any]:
    """Per scenario and seed the judged metrics and every step's training loss, and the
    environment the trials ran in (from their meta.json)."""
    study = load_study(study_dir)
    scenarios: dict[str, Any] = {}
    env: dict[str, Any] = {}
    for name in suite.spec.arms:
        t = study.arm_trial(name)
        if t is None or not t.complete:
            raise UserError(f"bench: scenario {name!r} did not complete (see "
                            f"{study_dir}/trials/*/stderr.log)")
        seeds = {}
        for s in t.per_seed:
            log = seed_log(t, int(s["seed"])) or {}
            # Non-finite as None, as the baseline file stores them (JSON has no NaN).
            losses = [float(r["train/loss"]) if finite(r["train/loss"]) else None
                      for r in log.get("rows") or [] if "train/loss" in r]
            seeds[str(s["seed"])] = {**{k: s.get(k) for k in METRICS}, "losses": losses}
            meta = log.get("meta") or {}
            if not env and meta.get("environment"):
                env = {**meta["environment"], "corpus": (meta.get("corpus") or {}).get("sha256")}
        scenarios[name] = {"config": suite.spec.arms[name], "seeds": seeds}
    return {"environment": env, "scenarios": scenarios}


def measure_perf(suite: Suite, out_dir: Path, jobs: int | None) -> dict[str, Any]:
    from spikebench.bench.perf import overhead, report_time, sweep_scaling
    from spikebench.sweep.spec import resolve_config

    p, perf = suite.perf, {}
    if p.overhead_steps:
        base = {k: v for k, v in suite.spec.base.items() if k not in cfgmod.BUDGET_KEYS}
        cfg = resolve_config(base, {"train.steps": p.overhead_steps, "train.progress": False,
                                    "train.eval_every": p.overhead_steps})
        perf.update(overhead(cfg, p.overhead_repeats))
    workers = jobs or os.cpu_count() or 1
    if p.sweep_trials and workers > 1:
        perf.update(sweep_scaling(suite.spec, trials=p.sweep_trials, steps=p.sweep_steps,
                                  jobs=workers, results=out_dir / "perf"))
    if p.report_trials:
        perf.update(report_time(p.report_trials))
    return perf


def metric_cases(current: dict[str, Any], baseline: dict[str, Any], suite: Suite
                 ) -> list[MetricCase]:
    """The run's Mann-Whitney tests, one Holm family per direction: every metric of every
    scenario that is in both the run and the baseline."""
    return [MetricCase(name, metric, [s.get(metric) for s in cur["seeds"].values()],
                       [s.get(metric) for s in baseline["scenarios"][name]["seeds"].values()],
                       suite.min_effect[metric])
            for name, cur in current["scenarios"].items() if name in baseline["scenarios"]
            for metric in METRICS]


def compare(current: dict[str, Any], baseline: dict[str, Any], suite: Suite
            ) -> tuple[list[Judged], list[str]]:
    """Every verdict, and the environment keys that differ (empty: the exact check ran).
    The metrics' verdicts are decided together, by Holm's procedure over the whole run."""
    differs = same_environment(current["environment"], baseline["environment"])
    judged = {(j.scenario, j.metric): j for j in judge_metrics(
        metric_cases(current, baseline, suite), level=suite.level)}
    out: list[Judged] = []
    for name, cur in current["scenarios"].items():
        base = baseline["scenarios"].get(name)
        if base is None:
            out.append(Judged(name, "scenario", "pass", None, None, None, None,
                              "new scenario: not in the baseline"))
            continue
        if not differs:
            bad = first_mismatch({k: v["losses"] for k, v in cur["seeds"].items()},
                                 {k: v["losses"] for k, v in base["seeds"].items()})
            out.append(Judged(name, "losses", "changed" if bad else "pass",
                              None if not bad else bad[3], None if not bad else bad[2], None,
                              None, "every step's training loss bit for bit (same environment)"
                              + (f": seed {bad[0]} differs from step {bad[1]}" if bad else "")))
        out.extend(judged[name, metric] for metric in METRICS)
    for metric in PERF_METRICS:
        cur_v, base_v = current.get("perf", {}).get(metric), baseline.get("perf", {}).get(metric)
        if cur_v is not None or base_v is not None:
            out.append(judge_perf(metric, cur_v, base_v,
                                  tolerance=suite.perf.tolerance[metric]))
    return out, differs


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def table(verdicts: list[Judged]) -> str:
    """One row per verdict: "p" is the raw one-sided p, "Holm p" the adjusted one that
    decides a metric's verdict (with its minimum effect)."""
    rows = [[v.scenario, v.metric, v.verdict.upper() if v.verdict in FAILING else v.verdict,
             _fmt(v.baseline), _fmt(v.current), _fmt(v.effect), _fmt(v.p), _fmt(v.p_holm),
             v.test] for v in verdicts]
    return tabulate(rows, headers=["scenario", "metric", "verdict", "baseline", "now",
                                   "change", "p", "Holm p (decides)", "test"],
                    tablefmt="github")


def markdown(name: str, summary: str, note: str, verdicts: list[Judged]) -> str:
    """bench.md: the summary line, what a false alarm's chance is, and the table."""
    return f"# Bench {name}\n\n{summary}\n\n{note}\n\n{table(verdicts)}\n"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _number_or_null(x: Any, *, low: float | None = 0.0, null: bool = True) -> bool:
    return (x is None and null) or (finite(x) and (low is None or x >= low))


def _check_baseline(b: Any) -> tuple[str, Any, str] | None:
    """The first value of a loaded baseline that is not what :func:`collect` and
    :func:`measure_perf` write: (field, value, what is allowed); None when all are."""
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


def _read_baseline(path: Path) -> dict[str, Any]:
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
    bad = _check_baseline(b)
    if bad is not None:
        field, value, allowed = bad
        raise UserError(f"{where}: {field} = {_shown(value)}: must be {allowed} (not a "
                        f"bench baseline of format {FORMAT} as --update-baseline records it)")
    return b


def _check_output(results: str, out_dir: Path, base_file: Path | None) -> None:
    """Before a bench runs anything: its run folder can be made (every existing part of
    the path a folder, each name short enough, the nearest existing one writable), and so
    can the baseline it is asked to record."""
    for path, what in ((out_dir, f"--results {results!r}"),
                       *(((base_file, f"--baseline {str(base_file)!r}"),) if base_file else ())):
        for part in path.parts:
            if len(os.fsencode(part)) > 255:
                raise UserError(f"{what}: the folder name {part[:40]!r}... is "
                                f"{len(os.fsencode(part))} bytes; at most 255")
        target = path if path is out_dir else path.parent
        try:
            existing = next(p for p in (target, *target.parents) if p.exists())
        except StopIteration:
            continue
        except OSError as e:
            raise UserError(f"{what}: not a usable path ({e.strerror or e})") from None
        if not existing.is_dir():
            raise UserError(f"{what}: {str(existing)!r} is a file, not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UserError(f"{what}: the folder {str(existing)!r} is not writable")
        if path is base_file and path.exists() and not path.is_file():
            raise UserError(f"{what}: is a folder or not a regular file; the baseline is "
                            "written there")


def run_bench(suite_path: str, *, baseline_path: str | None = None, update: bool = False,
              results: str = "results", jobs: int | None = None, perf: bool = True) -> int:
    from spikebench.sweep.driver import run_sweep

    suite = load_suite(suite_path)
    base_file = Path(baseline_path) if baseline_path else default_baseline(suite)
    baseline = None
    if not update:
        if not base_file.exists():
            raise UserError(f"--baseline {str(base_file)!r}: no such file (record one with "
                            "--update-baseline)")
        baseline = _read_baseline(base_file)
    out_dir = Path(results) / "bench" / f"{suite.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    _check_output(results, out_dir, base_file if update else None)
    started = time.perf_counter()
    run_sweep(dataclasses.replace(suite.spec, storage=""), results=out_dir, jobs=jobs)
    current = {"format": FORMAT, "suite": suite.name, **collect(out_dir / suite.name, suite)}
    current["perf"] = measure_perf(suite, out_dir, jobs) if perf else {}
    current["seconds"] = time.perf_counter() - started
    if baseline is None:
        atomic_write_json(base_file, current)
        print(f"bench {suite.name}: recorded the baseline {base_file} "
              f"({current['seconds']:.0f} s)")
        return 0
    verdicts, differs = compare(current, baseline, suite)
    how = ("same environment: losses compared bit for bit, metrics by the test" if not differs
           else "another environment (" + ", ".join(
               f"{k}: {baseline['environment'].get(k)!r} -> {current['environment'].get(k)!r}"
               for k in differs) + "): compared statistically only, never exactly")
    family = family_of(metric_cases(current, baseline, suite), suite.level)
    note = false_alarm_note(family)
    failed = [v for v in verdicts if v.verdict in FAILING]
    summary = (f"bench {suite.name}: {len(failed)} regression(s) against {base_file} "
               f"({how}; {current['seconds']:.0f} s)")
    atomic_write_json(out_dir / "bench.json", {
        **current, "baseline": str(base_file), "environment_differs": differs,
        "family": {**dataclasses.asdict(family), "smallest_p": family.smallest_p,
                   "first_threshold": family.first_threshold,
                   "can_reject": family.can_reject, "note": note},
        "verdicts": [v.as_dict() for v in verdicts]})
    atomic_write_text(out_dir / "bench.md", markdown(suite.name, summary, note, verdicts))
    print(table(verdicts))
    print(summary)
    print(note)
    print(f"written: {out_dir / 'bench.md'}, {out_dir / 'bench.json'}")
    return 1 if failed else 0
