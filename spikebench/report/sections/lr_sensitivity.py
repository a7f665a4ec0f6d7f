"""LR sensitivity per setting (Wortsman et al. 2023), paired over seeds against the baseline.

A strategy that stabilises training makes the final loss depend less on the learning rate:
its sensitivity, the mean over the grid of min(final, initial) minus the best final loss,
is lower. Each seed gets one sensitivity per setting, from its runs across the grid, so a
setting's is compared with the baseline's seed by seed, by the exact paired test the other
sections use.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from spikebench.report import exact
from spikebench.report.blocks import Block, Cell, Table, delta, interval, notes, para
from spikebench.report.data import Study
from spikebench.report.lr_grid import Setting, lr_grid, lr_text
from spikebench.report.sections.lr_curves import CAPPED
from spikebench.report.sections.section import Info, own_params
from spikebench.scoring.lr import lr_sensitivity

TEST = ("Δ: the setting's sensitivity minus the baseline's, mean over matched seeds [exact "
        "sign-flip 95% interval]; verdict: lower or higher where the two-sided sign-flip "
        f"test gives p < {exact.ALPHA:g}, else no difference shown (with fewer than "
        f"{exact.MIN_PAIRS} differing pairs it cannot reach that, and says so)")
UNADJUSTED = "p-values are not adjusted for the number of settings compared"


@dataclass(frozen=True, kw_only=True)
class LrSensitivityInfo(Info):
    lrs: list[float] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # baseline first
    notes: list[str] = field(default_factory=list)


def per_seed(setting: Setting, lrs: list[float]) -> dict[int, float]:
    """Each seed's sensitivity over the whole grid; a seed missing from any grid point, or
    a setting missing a point, has none."""
    if any(lr not in setting.trials for lr in lrs):
        return {}
    cells = [setting.trials[lr].by_seed() for lr in lrs]
    seeds = set.intersection(*(set(c) for c in cells))
    out = {}
    for seed in sorted(seeds):
        runs = [c[seed] for c in cells]
        value = lr_sensitivity(
            [r.get("final_val_loss") if r.get("status") == "completed" else None for r in runs],
            [r.get("initial_val_loss") for r in runs])
        if value is not None:
            out[seed] = value
    return out


def _verdict(d: exact.Interval, diffs: list[float]) -> dict[str, Any]:
    nonzero = sum(x != 0 for x in diffs)
    if nonzero < exact.MIN_PAIRS:
        return {"verdict": "not tested", "p": None,
                "why": f"{nonzero} differing pair(s): the exact test needs {exact.MIN_PAIRS}"}
    p = exact.sign_flip_p(diffs)
    if p >= exact.ALPHA:
        return {"verdict": "no difference shown", "p": p, "why": ""}
    return {"verdict": "lower" if d.value < 0 else "higher", "p": p, "why": ""}


def info(study: Study) -> LrSensitivityInfo:
    if study.own_trainer:
        return LrSensitivityInfo.unavailable(own_params(study, "is the learning rate"))
    grid = lr_grid(study)
    if grid is None:
        return LrSensitivityInfo.unavailable(
            "no learning-rate grid (see the section on final loss against the LR)")
    base = grid.baseline
    base_seeds = per_seed(base, grid.lrs) if base is not None else {}
    rows = []
    for s in grid.settings:
        seeds = per_seed(s, grid.lrs)
        row: dict[str, Any] = {
            "label": s.label, "baseline": s.baseline, "seeds": len(seeds),
            "missing": [lr for lr in grid.lrs if lr not in s.trials],
            "sensitivity": asdict(exact.t_interval(list(seeds.values()))),
            "delta": None, "verdict": None}
        if base is not None and not s.baseline and seeds and base_seeds:
            common = sorted(set(seeds) & set(base_seeds))
            diffs = [seeds[k] - base_seeds[k] for k in common]
            d = exact.shift_interval(diffs)
            row["delta"] = asdict(d)
            if common:
                row["verdict"] = _verdict(d, diffs)
        rows.append(row)
    texts = [CAPPED, TEST, UNADJUSTED]
    if base is None:
        texts.append("no baseline setting (no baseline arm, and not exactly one setting "
                     "with every known strategy off), so no paired differences")
    return LrSensitivityInfo(lrs=grid.lrs, rows=rows, notes=texts)


def _verdict_text(v: dict[str, Any] | None) -> str:
    if v is None:
        return "—"
    if v["p"] is None:
        return f"{v['verdict']} ({v['why']})"
    return f"{v['verdict']} (p = {v['p']:.4f}, sign-flip)"


def blocks(info: LrSensitivityInfo, images: frozenset[str]) -> list[Block]:
    rows = []
    for r in info.rows:
        sens = interval(r["sensitivity"], explain=False)
        if r["missing"]:
            sens = "— (no trial at LR " + ", ".join(lr_text(x) for x in r["missing"]) + ")"
        rows.append([Cell(r["label"]), Cell(str(r["seeds"])),
                     Cell(sens, r["sensitivity"]["value"]),
                     Cell(delta(r["delta"], explain=False).strip() or "—"),
                     Cell(_verdict_text(r["verdict"]))])
    grid = ", ".join(lr_text(x) for x in info.lrs)
    return [para(f"LR sensitivity over the grid {grid} (Wortsman et al. 2023): per seed, the "
                 "mean over the grid of the final loss minus the best final loss on the "
                 "grid, in nats; lower is more stable. Mean over seeds [95% t-interval]."),
            Table(["Setting", "Seeds", "LR sensitivity", "Δ vs baseline", "Verdict"], rows),
            *notes(info.notes)]
