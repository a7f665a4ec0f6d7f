"""Runs of different lengths and logging intervals, cut to what they share.

Every run is compared over the same step budget: the last step of the shortest run that did
not diverge (a divergence ends a run early without shortening the budget), or ``--max-step``,
which drops the runs that end before it. The training loss is compared at the steps every
run logged (a run that logs every step is thinned to the steps one that logs every tenth
shares), so the detector sees the same resolution everywhere; validation losses likewise.
Where not every run logged a validation loss, none is used: time to target and final loss
then read the training loss, averaged over the logged steps before each of
:data:`EVAL_POINTS` evenly spaced steps, for every run alike. Everything cut is said, run by
run, and goes into the report.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from spikebench import metrics as M
from spikebench.compare.groups import listed
from spikebench.errors import UserError
from spikebench.runs.model import RunLog

MIN_SHARED = 10  # logged training-loss steps the runs must share
EVAL_POINTS = 20  # evaluations derived from the training loss where no validation loss is
TRAIN_KEYS = (M.TRAIN_LOSS, M.GRAD_NORM)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


@dataclass
class Prepared:
    """One run as it is compared: its records cut to the shared steps, and what was cut."""

    run: RunLog
    records: list[dict[str, Any]]
    last_step: int  # its last logged training step, as read
    rows: int  # training-loss rows as read
    diverged_at: int | None  # first step with a non-finite training loss
    cut: list[str] = field(default_factory=list)
    timed: bool = False  # its records carry the elapsed training time


@dataclass
class Aligned:
    runs: dict[str, Prepared]  # by run name
    budget: int
    budget_from: str
    cut: list[str]  # what was cut, for the report's header
    dropped: list[str]  # runs left out, and why
    loss: str  # "val" or "train": what time to target and final loss read
    loss_note: str = ""
    eval_every: int = 0


def clean_records(run: RunLog) -> list[dict[str, Any]]:
    """The run's records with numeric values only, one per integer step in step order
    (records of the same step merge, a later value winning)."""
    by_step: dict[int, dict[str, Any]] = {}
    for r in run.records:
        step = r.get(M.STEP)
        if not _number(step) or not math.isfinite(step) or step != int(step) or step < 0:
            continue
        rec = {k: float(v) for k, v in r.items() if k != M.STEP and _number(v)}
        by_step.setdefault(int(step), {}).update(rec)
    return [{M.STEP: s, **by_step[s]} for s in sorted(by_step)]


def _train_steps(records: list[dict[str, Any]]) -> list[int]:
    return [r[M.STEP] for r in records if M.TRAIN_LOSS in r]


def _diverged(records: list[dict[str, Any]]) -> int | None:
    return next((r[M.STEP] for r in records if M.TRAIN_LOSS in r
                 and not math.isfinite(r[M.TRAIN_LOSS])), None)


def _shared(sets: list[tuple[set[int], int]], budget: int) -> set[int]:
    """The steps up to ``budget`` that every run logged, a run counting only up to its own
    end (a diverged run's missing tail does not thin the others)."""
    union = sorted({s for steps, _ in sets for s in steps if s <= budget})
    return {s for s in union if all(s in steps or s > end for steps, end in sets)}


def _interval(steps: list[int]) -> int:
    gaps = [b - a for a, b in zip(steps, steps[1:], strict=False)]
    return int(statistics.median(gaps)) if gaps else 0


def align(runs: list[RunLog], *, max_step: int | None = None) -> Aligned:
    """Cut ``runs`` (all groups together) to what they share; see the module's docstring.
    A run without a training loss, a budget no run reaches, or steps that do not line up
    (fewer than :data:`MIN_SHARED` shared) raise :class:`UserError`."""
    prepared: dict[str, Prepared] = {}
    no_loss = []
    for run in runs:
        records = clean_records(run)
        steps = _train_steps(records)
        if not steps:
            no_loss.append(run.name)
            continue
        moved = _last_evaluation(records, steps)
        prepared[run.name] = Prepared(run, records, steps[-1], len(steps), _diverged(records),
                                      cut=[moved] if moved else [],
                                      timed=any(M.ELAPSED_S in r for r in records))
    if no_loss:
        raise UserError(f"{len(no_loss)} run(s) have no training loss: {listed(no_loss)}")
    dropped: list[str] = []
    cut: list[str] = []
    healthy = {n: p for n, p in prepared.items() if p.diverged_at is None}
    if max_step is not None:
        short = [n for n, p in healthy.items() if p.last_step < max_step]
        if len(short) == len(healthy) and healthy:
            longest = max(p.last_step for p in healthy.values())
            raise UserError(f"--max-step {max_step}: no run reaches it (the longest that did "
                            f"not diverge ends at step {longest})")
        for n in short:
            dropped.append(f"{n} (ends at step {prepared[n].last_step}, before --max-step "
                           f"{max_step})")
            del prepared[n]
        _enough_steps(prepared, max_step)
        budget, budget_from = max_step, "--max-step"
    elif healthy:
        shortest = min(healthy.values(), key=lambda p: (p.last_step, p.run.name))
        budget = shortest.last_step
        longer = sum(p.last_step > budget for p in prepared.values())
        budget_from = (f"the last step of the shortest run, {shortest.run.name}"
                       if longer else "every run's last step")
    else:
        budget = max(p.last_step for p in prepared.values())
        budget_from = "every run diverged: the last step any reached"
    for p in prepared.values():
        beyond = [r for r in p.records if r[M.STEP] > budget]
        if beyond:
            p.records = [r for r in p.records if r[M.STEP] <= budget]
            p.cut.append(f"steps {beyond[0][M.STEP]}-{beyond[-1][M.STEP]} cut "
                         f"({len(beyond)} rows)")
    longer = [n for n, p in prepared.items() if p.last_step > budget]
    if longer:
        cut.append(f"every step after {budget} of {len(longer)} run(s) ({listed(longer)})")
    _thin(prepared, budget, cut)
    loss, note, every = _evaluations(prepared, budget, cut)
    return Aligned(prepared, budget, budget_from, cut, dropped, loss, note, every)


def _last_evaluation(records: list[dict[str, Any]], steps: list[int]) -> str:
    """A validation loss logged after the last training step, within one logging interval
    (Lightning logs the final evaluation at the next step), is that step's evaluation: moved
    onto it (where it has none), said in the returned note; later records are left as
    they are (and cut with the rest past the budget)."""
    last, reach = steps[-1], max(1, _interval(steps))
    at = {r[M.STEP]: r for r in records}
    after = [r for r in records if last < r[M.STEP] <= last + reach and M.VAL_LOSS in r
             and not any(k in r for k in TRAIN_KEYS)]
    if not after or M.VAL_LOSS in at[last]:
        return ""
    evaluation = after[-1]
    at[last][M.VAL_LOSS] = evaluation.pop(M.VAL_LOSS)
    if len(evaluation) == 1:  # nothing but its step left
        records.remove(evaluation)
    return (f"the validation loss logged at step {evaluation[M.STEP]}, after the last "
            f"training step, read as step {last}'s evaluation")


def _enough_steps(prepared: dict[str, Prepared], max_step: int) -> None:
    """Every run keeps :data:`MIN_SHARED` logged training steps up to ``--max-step``."""
    for p in prepared.values():
        kept = [s for s in _train_steps(p.records) if s <= max_step]
        if len(kept) < MIN_SHARED:
            raise UserError(f"--max-step {max_step}: leaves {p.run.name} {len(kept)} logged "
                            f"training step(s) (its first: {_train_steps(p.records)[0]}); a "
                            f"comparison needs {MIN_SHARED}: give a larger --max-step")


def _thin(prepared: dict[str, Prepared], budget: int, cut: list[str]) -> None:
    """Training losses (and grad norms) at the steps every run logged only."""
    sets = [(set(_train_steps(p.records)), p.diverged_at if p.diverged_at is not None
             else budget) for p in prepared.values()]
    shared = _shared(sets, budget)
    thinned = []
    for name, p in prepared.items():
        before = _train_steps(p.records)
        if all(s in shared for s in before):
            continue
        if len(shared) < MIN_SHARED:
            intervals = ", ".join(f"{n} every {_interval(_train_steps(q.records))}"
                                  for n, q in list(prepared.items())[:4])
            raise UserError(f"the runs share only {len(shared)} logged training steps up to "
                            f"step {budget} (logging {intervals}, ...): their steps do not "
                            "line up; compare runs that log at common steps")
        for r in p.records:
            if r[M.STEP] not in shared:
                for k in TRAIN_KEYS:
                    r.pop(k, None)
        p.records = [r for r in p.records if len(r) > 1]
        after = len(_train_steps(p.records))
        p.cut.append(f"training loss thinned from {len(before)} to {after} logged steps")
        thinned.append(f"{name} ({len(before)} -> {after})")
    if thinned:
        cut.append(f"the training loss is compared at the {len(shared)} steps every run "
                   f"logged (logging intervals differ): thinned {listed(thinned)}")


def _evaluations(prepared: dict[str, Prepared], budget: int,
                 cut: list[str]) -> tuple[str, str, int]:
    """Validation losses at the steps every run evaluated; or, where a run has none, the
    training loss averaged before evenly spaced steps for every run. Returns (what is read,
    its note, the evaluation interval)."""
    def vals(p):
        return [r[M.STEP] for r in p.records if M.VAL_LOSS in r and math.isfinite(r[M.VAL_LOSS])]

    without = [n for n, p in prepared.items() if not vals(p)]
    if not without:
        sets = [(set(vals(p)), p.diverged_at if p.diverged_at is not None else budget)
                for p in prepared.values()]
        shared = _shared(sets, budget)
        if shared and any(set(vals(p)) - shared for p in prepared.values()):
            thinned = []
            for name, p in prepared.items():
                n_before = len(vals(p))
                for r in p.records:
                    if r[M.STEP] not in shared:
                        r.pop(M.VAL_LOSS, None)
                if len(vals(p)) < n_before:
                    p.cut.append(f"validation loss thinned from {n_before} to {len(vals(p))} "
                                 "evaluations")
                    thinned.append(name)
            cut.append(f"validation losses are compared at the {len(shared)} steps every run "
                       f"evaluated: thinned {listed(thinned)}")
        elif not shared:
            cut.append("the runs' evaluation steps do not line up: time to target reads each "
                       "run's own evaluations")
        every = _interval(sorted(shared)) if shared else 0
        return "val", "", every
    for p in prepared.values():
        for r in p.records:
            r.pop(M.VAL_LOSS, None)
        _train_evals(p, budget)
    every = max(1, budget // EVAL_POINTS)
    note = (f"{len(without)} of {len(prepared)} runs log no validation loss "
            f"({listed(without, 3)}), so for every run time to target and final loss read "
            "the training loss, averaged over the logged steps since the previous of "
            f"{EVAL_POINTS} evenly spaced evaluation steps (every {every} steps)")
    return "train", note, every


def _train_evals(p: Prepared, budget: int) -> None:
    """Evaluations from the training loss: at each of EVAL_POINTS evenly spaced steps (the
    last at the budget), the mean training loss logged since the previous one."""
    every = max(1, budget // EVAL_POINTS)
    points = sorted({min(budget, every * k) for k in range(1, EVAL_POINTS + 1)} | {budget})
    train = [(r[M.STEP], r[M.TRAIN_LOSS]) for r in p.records if M.TRAIN_LOSS in r]
    at = {r[M.STEP]: r for r in p.records}
    i = 0
    for point in points:
        window = []
        while i < len(train) and train[i][0] <= point:
            window.append(train[i])
            i += 1
        if not window:
            continue
        if not all(math.isfinite(v) for _, v in window):
            break  # diverged: no evaluation from here on
        at[window[-1][0]][M.VAL_LOSS] = statistics.fmean(v for _, v in window)
