"""Section 6, Optuna's parameter importances (its default evaluator, PED-ANOVA) per objective.

Optuna's own errors (too few trials, one value everywhere) make the section unavailable with
Optuna's message rather than end the report. Conditional parameters (``optim.clip`` exists
only when clipping is on) are assessed by PED-ANOVA over the trials that have them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from spikebench.report.blocks import Block, Cell, Table, image, num, para
from spikebench.report.data import Study
from spikebench.report.figures import figure, png, tex
from spikebench.report.sections.section import Info


@dataclass(frozen=True, kw_only=True)
class ImportanceInfo(Info):
    evaluator: str = "PED-ANOVA (Optuna's default)"
    objectives: list[dict[str, Any]] = field(default_factory=list)  # {"name", "importances"}
    n_trials: int = 0


def info(study: Study) -> ImportanceInfo:
    """Importances per objective; needs the Optuna study and two completed trials."""
    import optuna

    st = study.optuna_study
    done = [t for t in study.trials if t.complete]
    if study.compare is not None:
        return ImportanceInfo.unavailable(
            "the runs were read from disk and grouped (spikebench compare), not drawn by a "
            "sampler: there are no search parameters to rank; the strategy table compares "
            "the groups")
    if st is None or len(done) < 2:
        return ImportanceInfo.unavailable("needs at least two completed trials")
    names = (["spikes", "convergence"] if len(study.directions) == 2 else
             ["convergence"] if len(study.directions) == 1 else
             [f"objective {i}" for i in range(len(study.directions))])
    objectives = []
    for i, name in enumerate(names):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = optuna.importance.get_param_importances(
                    st, target=lambda t, i=i: t.values[i])
        except Exception as e:  # noqa: BLE001 - an optional section must not end the report
            return ImportanceInfo.unavailable(f"Optuna could not compute importances "
                                              f"({type(e).__name__}: {e})")
        objectives.append({"name": name, "importances": {k: float(v) for k, v in imp.items()}})
    if not any(o["importances"] for o in objectives):
        return ImportanceInfo.unavailable("no parameter varies across the completed trials")
    return ImportanceInfo(objectives=objectives, n_trials=len(done))


def blocks(im: ImportanceInfo, images: frozenset[str]) -> list[Block]:
    objs = im.objectives
    params: list[str] = []
    for o in objs:
        params += [p for p in o["importances"] if p not in params]
    rows = [[Cell(p)] + [Cell(num(o["importances"].get(p)), o["importances"].get(p))
                         for o in objs] for p in params]
    return [para(f"Optuna, {im.evaluator}, over {im.n_trials} completed trials."),
            *image("importance", "Parameter importance", images),
            Table(["Parameter"] + [f"Importance for {o['name']}" for o in objs], rows)]


def plot(info: ImportanceInfo) -> bytes:
    objs = info.objectives
    fig = figure(4.2 * len(objs), 3.2)
    for i, o in enumerate(objs):
        ax = fig.add_subplot(1, len(objs), i + 1)
        items = sorted(o["importances"].items(), key=lambda kv: kv[1])
        ax.barh([tex(k) for k, _ in items], [v for _, v in items], color="C0")
        ax.set_title(tex(f"importance for {o['name']}"), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlim(0, max([v for _, v in items] + [1e-9]) * 1.1)
    return png(fig)
