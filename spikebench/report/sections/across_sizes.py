"""Across model sizes: does each strategy's effect at a small size hold at the largest?

Shown for a study whose comparison grid crosses a size key (``model.preset``, the shape's
keys): every arm at every size, on the same seeds (``sweeps/scale.toml``). At each size a
strategy is compared with that size's baseline on matched seeds, by the exact paired
sign-flip test the strategy table uses, and its verdict is read off the printed interval.
A strategy *transfers* when a measure is better (or worse) at every size and none changes,
*changes with size* when a measure's verdict differs between sizes, shows *no effect at any
size* when every tested measure's interval holds no change at every size (nothing to
transfer), and is *not tested* when a size lacks its trial or its baseline, or no measure
has an interval at every size. Kendall's tau compares each size's ranking of the arms with the largest size's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from spikebench.report import exact, kendall
from spikebench.report.arms import has_comparison
from spikebench.report.blocks import (
    DASH,
    Block,
    Bullets,
    Cell,
    Span,
    Table,
    delta,
    interval,
    notes,
    num,
    para,
)
from spikebench.report.data import Study, TrialRecord
from spikebench.report.model_size import millions, params_of, size_keys
from spikebench.report.sections.section import Info, own_params
from spikebench.values import finite

# (key, name): every measure is lower-is-better.
# Both spike measures: where every run has the same events (the start-up transient alone),
# their count ties and only their size, the sweep's severity objective, can differ.
MEASURES = (("spikes", "Spike events / 1k steps"),
            ("severity", "Spike area (nats x steps)"),
            ("steps_to_target", "Steps to target"), ("final_loss", "Final val loss"))
BETTER, WORSE, NO_DIFF, NOT_TESTED = "better", "worse", "no difference shown", "not tested"
TRANSFERS, CHANGES = "transfers", "changes with size"
# Every size's interval holds no change: no effect to transfer (and none seen to change).
NO_EFFECT = "no effect shown at any size"
NO_SIZES = ("no model-size dimension: the study's comparison grid crosses no size key "
            "(model.preset, model.n_layer, model.n_embd) with two or more values")


@dataclass(frozen=True, kw_only=True)
class AcrossSizesInfo(Info):
    keys: list[str] = field(default_factory=list)  # the grid's size keys
    sizes: list[dict[str, Any]] = field(default_factory=list)  # ascending; the largest last
    rows: list[dict[str, Any]] = field(default_factory=list)  # the baseline first
    taus: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    target_loss: float | None = None
    notes: list[str] = field(default_factory=list)


def _get_grid_info(study: Study, keys: list[str]) -> tuple[list[dict], dict[str, dict]]:
    """The sizes (ascending by parameters where every one is known, else in the grid's
    order) and the settings: each arm's values without the size keys, its name (the arm's
    at the base config's size) and its arm at each size. Arms crossed with other grid keys
    count only at the baseline's values of those (as the strategy table compares them)."""
    grid = study.spec.grid
    base = study.arms[study.baseline_arm]
    fixed = {k: base.get(k) for k in grid if k not in keys}
    at_base = {k: base.get(k) for k in keys}
    order = [json.dumps(list(combo), default=str) for combo in _product(grid, keys)]
    base_rest = _rest(base, keys)
    sizes: dict[str, dict[str, Any]] = {}
    settings: dict[str, dict[str, Any]] = {}
    for arm, values in study.arms.items():
        if any(values.get(k) != v for k, v in fixed.items()):
            continue
        point = {k: values.get(k) for k in keys}
        size = json.dumps(list(point.values()), default=str)
        rest = _rest(values, keys)
        s = settings.setdefault(rest, {"name": arm.split(" @ ")[0], "arms": {},
                                       "baseline": False})
        if point == at_base:
            s["name"] = arm
        s["baseline"] = rest == base_rest
        s["arms"][size] = arm
        # A size's count is its baseline's (qk-layernorm adds a few parameters).
        if size not in sizes or rest == base_rest:
            n, source = params_of(study, values, study.arm_trial(arm))
            sizes[size] = {"id": size, "values": point, "params": n, "params_from": source}
    ranked = sorted(sizes.values(), key=lambda s: order.index(s["id"]) if s["id"] in order
                    else len(order))
    if all(s["params"] is not None for s in ranked):
        ranked.sort(key=lambda s: s["params"])
    for s in ranked:
        shown = ", ".join(str(v) if k == "model.preset" else f"{k}={v}"
                          for k, v in s["values"].items())
        s["label"] = f"{shown} ({millions(s['params'])})"
    return ranked, settings


def _rest(values: dict[str, Any], keys: list[str]) -> str:
    """An arm's setting: its values but the size keys, as JSON."""
    return json.dumps(sorted((k, v) for k, v in values.items() if k not in keys), default=str)


def _product(grid: dict[str, list], keys: list[str]) -> list[tuple]:
    combos: list[tuple] = [()]
    for k in keys:
        combos = [c + (v,) for c in combos for v in grid[k]]
    return combos


def _get_seed_values(t: TrialRecord, measure: str, budget: int) -> dict[int, float]:
    """Each seed's value of ``measure``: spikes per 1k steps; the loss events' total area
    (the sweep's severity score, capped for a diverged seed); steps to target restricted at
    the budget (a miss or a divergence counts the budget, as in the strategy table); final
    loss of a completed seed, +inf for a diverged one (so it ranks last; no paired
    difference uses it)."""
    out: dict[int, float] = {}
    for seed, v in t.by_seed().items():
        done = v.get("status") == "completed"
        if measure == "spikes":
            x = v.get("events_per_1k")
        elif measure == "severity":
            x = v.get("severity")
        elif measure == "steps_to_target":
            x = v["steps_to_target"] if done and finite(v.get("steps_to_target")) else budget
        else:
            x = v.get("final_val_loss") if done else (
                float("inf") if v.get("status") == "diverged" else None)
        if isinstance(x, int | float) and not isinstance(x, bool) and x == x:
            out[seed] = float(x)
    return out


def read(d: exact.Interval) -> str:
    """The verdict on a paired difference (lower is better), read off its printed exact
    interval: better or worse where it excludes no change, else no difference shown; no
    interval at all, not tested."""
    if d.lo is None or d.hi is None:
        return NOT_TESTED
    if d.hi < 0:
        return BETTER
    if d.lo > 0:
        return WORSE
    return NO_DIFF


def _get_effect_info(arm: TrialRecord, base: TrialRecord, budget: int) -> dict[str, Any]:
    """Per measure: the mean paired difference arm - baseline over matched seeds with finite
    values, its exact sign-flip interval, the test's two-sided p and the verdict."""
    out = {}
    for key, _ in MEASURES:
        a, b = _get_seed_values(arm, key, budget), _get_seed_values(base, key, budget)
        seeds = sorted(s for s in set(a) & set(b) if finite(a[s]) and finite(b[s]))
        diffs = [a[s] - b[s] for s in seeds]
        d = exact.shift_interval(diffs)
        out[key] = {**asdict(d), "p": exact.sign_flip_p(diffs) if diffs else None,
                    "verdict": read(d)}
    return out


def _get_mean_info(base: TrialRecord, budget: int) -> dict[str, Any]:
    """The baseline's mean per measure over its seeds with a finite value [t-interval]."""
    return {key: asdict(exact.t_interval([v for v in _get_seed_values(base, key, budget)
                                          .values() if finite(v)], 0.0))
            for key, _ in MEASURES}


def _get_transfer_info(cells: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    """A strategy's verdict across sizes from its cells (one per size, ascending): per
    measure transfers / changes with size / not tested, and the strategy's one line."""
    missing = [lab for c, lab in zip(cells, labels, strict=True) if c["status"] != "complete"]
    if missing:
        return {"verdict": NOT_TESTED, "measures": {},
                "why": "no completed trial of the strategy or its baseline at "
                       + ", ".join(missing)}
    measures = {}
    for key, name in MEASURES:
        verdicts = [c[key]["verdict"] for c in cells]
        if NOT_TESTED in verdicts:
            where = [lab for v, lab in zip(verdicts, labels, strict=True) if v == NOT_TESTED]
            measures[key] = {"verdict": NOT_TESTED, "text": f"{name}: not tested (no "
                             f"interval at {', '.join(where)})"}
        elif set(verdicts) == {NO_DIFF}:
            measures[key] = {"verdict": NO_EFFECT, "text": f"{name}: {NO_DIFF} at every size"}
        elif len(set(verdicts)) == 1:
            measures[key] = {"verdict": TRANSFERS, "text": f"{name}: {verdicts[0]} at every "
                             "size"}
        else:
            measures[key] = {"verdict": CHANGES, "text": f"{name}: " + ", ".join(
                f"{v} at {lab}" for v, lab in zip(verdicts, labels, strict=True))}
    found = {m["verdict"] for m in measures.values()}
    verdict = next((v for v in (CHANGES, TRANSFERS, NO_EFFECT) if v in found), NOT_TESTED)
    return {"verdict": verdict, "measures": measures,
            "why": "; ".join(m["text"] for m in measures.values())}


def _get_tau_info(study: Study, sizes: list[dict], settings: dict[str, dict],
                  trials: dict[tuple[str, str], TrialRecord]) -> list[dict[str, Any]]:
    """Per smaller size and measure: Kendall's tau between the arms' means there and at the
    largest size, over the arms with a completed trial at both and the seeds every one of
    them has a value for."""
    largest = sizes[-1]
    out = []
    for size in sizes[:-1]:
        names = [k for k in settings if (k, size["id"]) in trials
                 and (k, largest["id"]) in trials]
        for key, name in MEASURES:
            per = [[_get_seed_values(trials[(k, s["id"])], key, study.steps)
                    for s in (size, largest)] for k in names]
            seeds = sorted(set.intersection(*(set(v) for pair in per for v in pair))
                           if per else set())
            small = np.array([[pair[0][s] for s in seeds] for pair in per]).reshape(
                len(names), len(seeds))
            large = np.array([[pair[1][s] for s in seeds] for pair in per]).reshape(
                len(names), len(seeds))
            tau = kendall.agreement(small, large)
            out.append({"size": size["label"], "largest": largest["label"], "measure": name,
                        **asdict(tau)})
    return out


def info(study: Study) -> AcrossSizesInfo:
    if study.own_trainer or study.compare is not None:
        return AcrossSizesInfo.unavailable(own_params(study, "sets the model's size"))
    keys = size_keys(study)
    if not keys or not has_comparison(study):
        return AcrossSizesInfo.unavailable(NO_SIZES)
    sizes, settings = _get_grid_info(study, keys)
    if len(sizes) < 2:
        return AcrossSizesInfo.unavailable(NO_SIZES)
    base_key = next((k for k, s in settings.items() if s["baseline"]), None)
    trials = {(k, size["id"]): t for k, s in settings.items() for size in sizes
              if (arm := s["arms"].get(size["id"])) and (t := study.arm_trial(arm))}
    labels = [s["label"] for s in sizes]
    rows = []
    for k, s in sorted(settings.items(), key=lambda kv: not kv[1]["baseline"]):
        cells = []
        for size in sizes:
            t, b = trials.get((k, size["id"])), trials.get((base_key, size["id"]))
            if t is None or b is None:
                cells.append({"status": "no completed trial" if t is None
                              else "no completed baseline"})
            elif s["baseline"]:
                cells.append({"status": "complete", "seeds": len(t.per_seed),
                              **_get_mean_info(t, study.steps)})
            else:
                cells.append({"status": "complete", "seeds": len(t.per_seed),
                              **_get_effect_info(t, b, study.steps)})
        row = {"label": s["name"], "baseline": s["baseline"], "cells": cells}
        if not s["baseline"]:
            row["transfer"] = _get_transfer_info(cells, labels)
        rows.append(row)
    return AcrossSizesInfo(keys=keys, sizes=sizes, rows=rows,
                           taus=_get_tau_info(study, sizes, settings, trials),
                           steps=study.steps, target_loss=study.spec.target_loss)


TEST = ("Each cell: the strategy's mean paired difference Δ from the baseline at that size "
        "over matched seeds [exact sign-flip 95% interval: every shift the two-sided "
        "sign-flip test does not reject], then the verdict read off that interval: better or "
        "worse where it excludes no change, no difference shown where it holds it, not "
        f"tested where there is none (fewer than {exact.MIN_PAIRS} differing pairs, or every "
        "pair equal). The baseline's row: its mean over seeds [95% t-interval].")
TRANSFER = ("A strategy transfers when a measure is better (or worse) at every size and "
            "no measure changes, changes with size when a measure's verdict differs between "
            "sizes, shows no effect at any size when every tested measure's interval holds "
            "no change at every size (nothing to transfer, and nothing seen to change), and "
            "is not tested when a size lacks its trial or its baseline's, or no measure has "
            "an interval at every size.")
TAU = ("Kendall's tau-b between the arms' means at the size and at the largest (the "
       "baseline and every strategy with a completed trial at both; 1: the same order, -1: "
       "reversed), with a 95% percentile bootstrap interval over seeds ({boot} resamples of "
       "the seeds, the same draw for every arm and both sizes): it covers the seeds' "
       "randomness (initialisation and data order) for these arms, sizes and budget, not "
       "the choice of strategies; p: the exact permutation test (every assignment of the "
       "larger size's means to the arms) of agreement no better than chance, one-sided.")


def _cell(c: dict[str, Any], key: str, baseline: bool) -> Cell:
    if c["status"] != "complete":
        return Cell(c["status"])
    m = c[key]
    if baseline:
        return Cell(interval(m, explain=False), m.get("value"))
    text = delta(m, explain=False).strip().removeprefix("Δ ") or DASH
    return Cell(f"{text}\n{m['verdict']}", m.get("value"))


def _tau_cell(t: dict[str, Any]) -> str:
    if t["value"] is None:
        return f"— ({t['why']})"
    if t["lo"] is None:
        return f"{t['value']:.2f} (no interval)"
    if t["lo"] == t["hi"]:  # never printed as a zero-width interval
        return f"{t['value']:.2f} (every resample gives {t['lo']:.2f})"
    iv = f" [{t['lo']:.2f}, {t['hi']:.2f}]"
    return f"{t['value']:.2f}{iv}"


def blocks(info: AcrossSizesInfo, images: frozenset[str]) -> list[Block]:
    labels = [s["label"] for s in info.sizes]
    rows = [[Cell(r["label"]), Cell(name)] + [_cell(c, key, r["baseline"]) for c in r["cells"]]
            + [Cell(r["transfer"]["measures"].get(key, {}).get("verdict", NOT_TESTED)
                    if "transfer" in r else DASH)]
            for r in info.rows for key, name in MEASURES]
    lines = [[Span(f"{r['label']}: ", bold=True), Span(r["transfer"]["verdict"]),
              Span(f" ({r['transfer']['why']})")] for r in info.rows if "transfer" in r]
    taus = [[Cell(t["size"]), Cell(t["measure"]), Cell(str(t["n"]), t["n"]),
             Cell(str(t["seeds"]), t["seeds"]), Cell(_tau_cell(t), t["value"]),
             Cell(f"{t['p']:.3f}" if t["p"] is not None else DASH, t["p"])]
            for t in info.taus]
    sizes = "; ".join(f"{s['label']}: parameters {s['params_from']}" for s in info.sizes)
    return [para(f"Every arm at each size of {', '.join(info.keys)}, against that size's "
                 f"baseline on the same seeds ({info.steps} steps; time to target: "
                 f"validation loss {num(info.target_loss)}, a miss counting the budget). "
                 + TEST),
            Table(["Strategy", "Measure", *labels, "Across sizes"], rows),
            para("The verdict per strategy, across sizes. " + TRANSFER),
            Bullets(lines),
            para(f"Rank agreement with the largest size, {labels[-1]}. "
                 + TAU.format(boot=kendall.N_BOOT)),
            Table(["Size", "Measure", "Arms", "Seeds", "Kendall's tau [95% bootstrap]",
                   "Permutation p"], taus),
            *notes([f"sizes: {sizes}", "marks and intervals are unadjusted for "
                    "multiplicity (strategies x sizes x measures)", *info.notes])]
