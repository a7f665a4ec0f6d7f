"""``spikebench bench``: run a suite with the sweep's workers, compare it with a committed
baseline, print and write the verdicts, and fail on a regression.

Each run gets a fresh folder ``results/bench/<suite>-<time>/`` (the study, ``bench.json``,
``bench.md``), so a bench never resumes an older one. ``--update-baseline`` records this
run as the baseline instead of comparing; without it a missing baseline is an error, never
a silent recording.

A suite with a ``[trainer]`` runs the team's command per seed (the sweep's command trials,
:mod:`spikebench.sweep.command`). Its losses are compared bit for bit only where the
trainer is deterministic: declared by the suite (``bench.deterministic``), or, by default,
checked when the baseline is recorded by running the first seed of every scenario a second
time (``repeat/``) and comparing every loss; otherwise the run is compared by the tests
alone and says why. Its performance is the throughput its own log records.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

from spikebench import config as cfgmod
from spikebench.bench.baseline import FORMAT, read_baseline
from spikebench.bench.compare import (
    METRICS,
    PERF_METRICS,
    TRAINER_PERF,
    Judged,
    MetricCase,
    false_alarm_note,
    family_of,
    first_mismatch,
    gates_note,
    judge_metrics,
    judge_perf,
    judged_gates,
    same_environment,
)
from spikebench.bench.suite import (
    COLUMN_KEY,
    COLUMN_METRIC,
    COLUMN_NAMES,
    Suite,
    default_baseline,
    load_suite,
)
from spikebench.errors import UserError
from spikebench.report.data import load_study, seed_log
from spikebench.runio import atomic_write_json, atomic_write_text
from spikebench.study import layout as L
from spikebench.values import finite

FAILING = ("regressed", "changed")


def _incomplete(study: Any, name: str, study_dir: Path) -> UserError:
    """A scenario that did not complete: its trial's own reason where it recorded one (a
    command trial's: the seed and the last line of the command's stderr)."""
    tried = [t for t in study.trials if t.arm == name]
    error = str(tried[-1].attrs.get("error") or "")[:300] if tried else ""
    return UserError(f"bench: scenario {name!r} did not complete ("
                     + (f"{error}; " if error else "")
                     + f"see {study_dir}/trials/*/stderr.log)")


def collect(study_dir: Path, suite: Suite, *, speed: bool = False) -> dict[str, Any]:
    """Per scenario and seed the judged metrics and every step's training loss, and the
    environment the trials ran in (from their meta.json); ``speed``: also each seed's
    throughput from a trainer's own log (:func:`log_speed`)."""
    study = load_study(study_dir)
    scenarios: dict[str, Any] = {}
    env: dict[str, Any] = {}
    for name in suite.spec.arms:
        t = study.arm_trial(name)
        if t is None or not t.complete:
            raise _incomplete(study, name, study_dir)
        seeds = {}
        for s in t.per_seed:
            log = seed_log(t, int(s["seed"])) or {}
            # Non-finite as None, as the baseline file stores them (JSON has no NaN).
            losses = [float(r["train/loss"]) if finite(r["train/loss"]) else None
                      for r in log.get("rows") or [] if "train/loss" in r]
            seeds[str(s["seed"])] = {**{k: s.get(k) for k in METRICS}, "losses": losses}
            if speed and t.folder is not None:
                seeds[str(s["seed"])]["speed"] = log_speed(
                    t.folder / L.seed_name(s['seed']), suite, f"scenario {name!r}, seed {s['seed']}")
            meta = log.get("meta") or {}
            if not env and meta.get("environment"):
                env = {**meta["environment"], "corpus": (meta.get("corpus") or {}).get("sha256")}
        scenarios[name] = {"config": suite.spec.arms[name], "seeds": seeds}
    if suite.trainer:
        env = {**env, **_machine_gpu(env)}
    return {"environment": env, "scenarios": scenarios}


def _machine_gpu(env: dict[str, Any]) -> dict[str, Any]:
    """A trainer scored from its own log has the environment of spikebench's process,
    which never touches a GPU: this machine's first GPU, so that a baseline from another
    GPU is never compared exactly."""
    if env.get("gpu"):
        return {}
    import torch

    return {"gpu": torch.cuda.get_device_name(0)} if torch.cuda.is_available() else {}


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def log_speed(run_dir: Path, suite: Suite, where: str) -> dict[str, Any]:
    """A seed's throughput as its trainer logged it: for each column the suite names
    (``bench.perf.tokens_per_s``, ``step_s``; none named: the first of
    :data:`COLUMN_NAMES` the log has), the median of its positive values over the steps
    (robust to the slow first steps), and the column's name. The log is the trainer's
    ``log``, else the run API's ``metrics.jsonl``. A named column the log lacks is one
    line naming the key, the value and the columns there are."""
    from spikebench.runs import read_runs
    from spikebench.runs.columns import MissingColumn
    from spikebench.sweep.command import API_LOG

    name = suite.spec.trainer["log"] or API_LOG
    named = suite.perf.columns
    keys = {kind: COLUMN_KEY[kind] for kind in named or COLUMN_NAMES}
    try:
        runs = read_runs(run_dir / name, extra={keys[k]: v for k, v in named.items()})
    except MissingColumn as e:
        kind = next((k for k, v in named.items() if v == e.name), None)
        if kind is None:
            raise UserError(f"{suite.path}: cannot read the trainer's log ({where}: {e})"
                            ) from None
        has = ", ".join(repr(k) for k in e.found[:20]) + (", ..." if len(e.found) > 20 else "")
        raise UserError(f"{suite.path}: bench.perf.{kind} = {named[kind]!r}: not a column of "
                        f"the trainer's log ({where}: {name} has the columns {has})") from None
    except UserError as e:
        raise UserError(f"{suite.path}: cannot read the trainer's log ({where}: {e})") from None
    out: dict[str, Any] = {}
    for kind, key in keys.items():
        col = runs[0].columns.get(key) if len(runs) == 1 else None
        values = [x for r in runs[0].records if (x := _float(r.get(key))) is not None
                  and x > 0] if col else []
        if not values and named:
            raise UserError(f"{suite.path}: bench.perf.{kind} = {named[kind]!r}: the column "
                            f"holds no number > 0 ({where}: {name})")
        if values:
            out[kind] = statistics.median(values)
            out[f"{kind}_column"] = col
    return out


def trainer_perf(current: dict[str, Any]) -> dict[str, Any]:
    """A [trainer] suite's performance: per column, the median over every seed of every
    scenario of the seed's median (:func:`log_speed`), and the column it came from."""
    perf: dict[str, Any] = {}
    seeds = [s.get("speed") or {} for sc in current["scenarios"].values()
             for s in sc["seeds"].values()]
    for kind, metric in COLUMN_METRIC.items():
        values = [s[kind] for s in seeds if s.get(kind) is not None]
        if values:
            perf[metric] = statistics.median(values)
            perf[f"{metric}_column"] = next(s[f"{kind}_column"] for s in seeds if kind in s)
            perf[f"{metric}_seeds"] = len(values)
    return perf


def check_determinism(suite: Suite, current: dict[str, Any], out_dir: Path,
                      jobs: int | None) -> dict[str, Any]:
    """Run the first seed of every scenario again, as the sweep ran it (the same workers,
    threads and environment), and compare every loss with the first run's bit for bit."""
    from spikebench.sweep.driver import run_sweep

    seed = suite.spec.seeds[0]
    spec = dataclasses.replace(suite.spec, name=f"{suite.name}-repeat", seeds=[seed],
                               storage="", pruner="none")
    run_sweep(spec, results=out_dir / "repeat", jobs=jobs)
    again = collect(out_dir / "repeat" / spec.name, suite)["scenarios"]
    for name, sc in current["scenarios"].items():
        bad = first_mismatch({str(seed): again[name]["seeds"][str(seed)]["losses"]},
                             {str(seed): sc["seeds"][str(seed)]["losses"]})
        if bad:
            return {"how": "checked", "deterministic": False,
                    "evidence": f"scenario {name!r}, seed {seed} run twice: step {bad[1]}'s "
                                f"loss was {bad[3]!r}, then {bad[2]!r}"}
    n = len(current["scenarios"])
    return {"how": "checked", "deterministic": True,
            "evidence": f"seed {seed} of {'every' if n > 1 else 'the'} scenario run twice: "
                        "every loss bit for bit"}


def not_exact(suite: Suite, baseline: dict[str, Any]) -> str | None:
    """Why this suite's losses are not compared bit for bit even on the baseline's
    environment: a [trainer] that is not deterministic, declared or found so when the
    baseline was recorded, or one whose baseline does not say. None: they are compared."""
    if not suite.trainer or suite.deterministic is True:
        return None
    if suite.deterministic is False:
        return "the suite declares the trainer not deterministic (bench.deterministic = false)"
    d = baseline.get("determinism") or {}
    if d.get("deterministic") is True:
        return None
    if d.get("deterministic") is False:
        return (f"the trainer is not deterministic (when the baseline was recorded, "
                f"{d.get('evidence', 'a repeated seed differed')})")
    return ("the baseline does not say whether the trainer is deterministic (record it "
            "again with --update-baseline, or set bench.deterministic)")


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
    exact = not differs and not_exact(suite, baseline) is None
    judged = {(j.scenario, j.metric): j for j in judge_metrics(
        metric_cases(current, baseline, suite), level=suite.level)}
    out: list[Judged] = []
    for name, cur in current["scenarios"].items():
        base = baseline["scenarios"].get(name)
        if base is None:
            out.append(Judged(name, "scenario", "pass", None, None, None, None,
                              "new scenario: not in the baseline"))
            continue
        if exact:
            bad = first_mismatch({k: v["losses"] for k, v in cur["seeds"].items()},
                                 {k: v["losses"] for k, v in base["seeds"].items()})
            out.append(Judged(name, "losses", "changed" if bad else "pass",
                              None if not bad else bad[3], None if not bad else bad[2], None,
                              None, "every step's training loss bit for bit (same environment"
                              + (", a deterministic trainer" if suite.trainer else "") + ")"
                              + (f": seed {bad[0]} differs from step {bad[1]}" if bad else "")))
        out.extend(judged[name, metric] for metric in METRICS)
    for metric in PERF_METRICS:
        cur_v, base_v = current.get("perf", {}).get(metric), baseline.get("perf", {}).get(metric)
        if cur_v is None and base_v is None:
            continue
        if metric in TRAINER_PERF and differs:  # an absolute speed: of one machine only
            out.append(dataclasses.replace(
                judge_perf(metric, cur_v, base_v, tolerance=None),
                test="not judged: an absolute speed, and the baseline's environment differs"))
        else:
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
        baseline = read_baseline(base_file)
    out_dir = Path(results) / "bench" / f"{suite.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    _check_output(results, out_dir, base_file if update else None)
    stamp, tries = out_dir.name, 1
    while out_dir.exists():  # two runs in one second: never resume the first's study
        tries += 1
        out_dir = out_dir.with_name(f"{stamp}-{tries}")
    # Absolute: a [trainer]'s command runs in its seed's folder, and the paths it is handed
    # (its parameters file, its run folder) are made from this one.
    out_dir = Path(os.path.abspath(out_dir))
    started = time.perf_counter()
    # No pruning: every scenario must run its whole budget to be compared.
    run_sweep(dataclasses.replace(suite.spec, storage="", pruner="none"), results=out_dir,
              jobs=jobs)
    current = {"format": FORMAT, "suite": suite.name,
               **collect(out_dir / suite.name, suite, speed=perf and suite.trainer)}
    notes = []
    if suite.trainer:
        current["perf"] = trainer_perf(current) if perf else {}
        if perf and not current["perf"]:
            notes.append("performance: not measured, the trainer's log has no throughput "
                         "column (looked for " + ", ".join(
                             n for names in COLUMN_NAMES.values() for n in names)
                         + "); name one with bench.perf.tokens_per_s or step_s")
        if baseline is None:
            current["determinism"] = (
                check_determinism(suite, current, out_dir, jobs)
                if suite.deterministic == "check" else
                {"how": "declared", "deterministic": suite.deterministic,
                 "evidence": f"bench.deterministic = {str(suite.deterministic).lower()}"})
    else:
        current["perf"] = measure_perf(suite, out_dir, jobs) if perf else {}
    current["seconds"] = time.perf_counter() - started
    if baseline is None:
        atomic_write_json(base_file, current)
        print(f"bench {suite.name}: recorded the baseline {base_file} "
              f"({current['seconds']:.0f} s)")
        if suite.trainer:
            d = current["determinism"]
            print(f"the trainer is {'' if d['deterministic'] else 'NOT '}deterministic "
                  f"({d['how']}: {d['evidence']}): on this environment later runs compare "
                  + ("every loss bit for bit" if d["deterministic"] else
                     "by the tests only, never bit for bit"))
        for note in notes:
            print(note)
        return 0
    verdicts, differs = compare(current, baseline, suite)
    reason = not_exact(suite, baseline)
    how = ("another environment (" + ", ".join(
               f"{k}: {baseline['environment'].get(k)!r} -> {current['environment'].get(k)!r}"
               for k in differs) + "): compared statistically only, never exactly" if differs
           else f"{reason}: compared statistically only, never exactly" if reason
           else "same environment: losses compared bit for bit, metrics by the test")
    family = family_of(metric_cases(current, baseline, suite), suite.level)
    note = (false_alarm_note(family) + " "
            + gates_note(family, judged_gates(verdicts, suite.perf.tolerance),
                         exact=not differs and reason is None))
    failed = [v for v in verdicts if v.verdict in FAILING]
    summary = (f"bench {suite.name}: {len(failed)} regression(s) against {base_file} "
               f"({how}; {current['seconds']:.0f} s)")
    atomic_write_json(out_dir / "bench.json", {
        **current, "baseline": str(base_file), "environment_differs": differs,
        "exact": not differs and reason is None, "not_exact": reason,
        "family": {**dataclasses.asdict(family), "smallest_p": family.smallest_p,
                   "first_threshold": family.first_threshold,
                   "can_reject": family.can_reject, "note": note},
        "verdicts": [v.as_dict() for v in verdicts]})
    atomic_write_text(out_dir / "bench.md", markdown(suite.name, summary,
                                                      "\n\n".join([note, *notes]), verdicts))
    print(table(verdicts))
    print(summary)
    print(note)
    for line in notes:
        print(line)
    print(f"written: {out_dir / 'bench.md'}, {out_dir / 'bench.json'}")
    return 1 if failed else 0
