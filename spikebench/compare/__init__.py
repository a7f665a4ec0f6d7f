"""``spikebench compare``: groups of existing runs compared as a study, and its report.

Runs read from disk (:class:`~spikebench.runs.model.RunLog`, whatever wrote them) are
grouped (:mod:`.groups`), cut to the steps they share (:mod:`.align`), scored by the run
API and written as a spikebench study (:mod:`.study`): the same results folder a sweep
leaves, so one report (:func:`spikebench.report.build_report`) reads a sweep's trials, a
command trial's and runs read from disk through one interface. The report then has the
strategy table with each group's effect against the baseline group and its exact interval
(paired by seed where every run of both groups has a known, shared seed; the exact
two-sample permutation test where not), spike counts, loss curves with events marked, time
to target, and the article's claims only when a recipe group is named.

:func:`plan` decides everything and writes nothing, so bad input (a group matching no
run, a baseline that is not a group, a parameter some runs lack) is one line and no file;
:func:`write` writes the study and the report under one folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.compare import groups as grouping
from spikebench.compare.align import Aligned, Prepared, align
from spikebench.compare.groups import Groups, listed
from spikebench.errors import UserError
from spikebench.runs.model import RunLog
from spikebench.values import finite, json_safe

__all__ = ["Plan", "compare", "plan", "write"]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def plain(value: Any) -> Any:
    """``value`` as JSON holds it: non-finite floats as None, anything JSON has no type
    for (a date a YAML file parsed, a path) as its text."""
    return json.loads(json.dumps(json_safe(value), default=str))


@dataclass
class Plan:
    """Every decision of a comparison, made before anything is written."""

    name: str
    groups: dict[str, list[Prepared]]  # group -> its runs as compared, in group order
    grouped: Groups
    baseline: str
    recipe: str | None
    pairing: dict[str, grouping.Pairing]
    labels: dict[str, int]  # run name -> its seed label
    aligned: Aligned
    target: float
    target_from: str
    detector: str
    gap: int
    sources: list[str]
    baseline_default: bool
    notes: list[str] = field(default_factory=list)  # runs left out, and why

    def params(self, group: str) -> dict[str, Any]:
        """The parameters every run of ``group`` shares (with one value)."""
        runs = [p.run for p in self.groups[group]]
        first = runs[0].params
        return plain({k: v for k, v in first.items()
                      if all(k in r.params and r.params[k] == v for r in runs[1:])})

    def spec(self) -> dict[str, Any]:
        """The sweep spec the report reads (the study's ``spec`` attribute)."""
        from spikebench.sweep.spec import SweepSpec

        return SweepSpec(
            path="spikebench compare", name=self.name, trials=0,
            seeds=sorted({label for label in self.labels.values()}), objective="multi",
            target_loss=float(self.target), spike_limit=2.0, spike_metric="severity",
            sampler="none", pruner="none", storage="", base={}, space=[],
            arms={g: self.params(g) for g in self.groups}, steps=self.aligned.budget,
            eval_every=self.aligned.eval_every,
            notes=f"runs read from disk and compared by spikebench compare ({self.name})",
            trainer={"imported": "spikebench compare"}).to_dict()

    def time_note(self) -> str:
        """Which runs have no wall time (their logs carry no elapsed training time)."""
        untimed = [p.run.name for ps in self.groups.values() for p in ps if not p.timed]
        if not untimed:
            return ""
        n = sum(len(ps) for ps in self.groups.values())
        if len(untimed) == n:
            head = f"none of the {n} runs' logs carry an elapsed training time ({M.ELAPSED_S})"
        else:
            head = (f"{len(untimed)} of the {n} runs' logs carry no elapsed training time "
                    f"({M.ELAPSED_S}): {listed(untimed, 3)}")
        return head + ", so wall time to target is not measured for them"

    def info(self) -> dict[str, Any]:
        """What the study's ``compare`` attribute holds: see :attr:`Study.compare`."""
        a = self.aligned
        return plain({
            "sources": self.sources, "grouping": self.grouped.kind, "by": self.grouped.by,
            "groups": {g: {"rule": self.grouped.rules.get(g, ""), "runs": [
                {"name": p.run.name, "path": str(p.run.path), "format": p.run.format,
                 "seed": p.run.seed, "label": self.labels[p.run.name], "rows": p.rows,
                 "last_step": p.last_step,
                 "cut": "; ".join([*p.cut, *([f"read: {p.run.note}"] if p.run.note else [])])}
                for p in sorted(runs, key=lambda p: self.labels[p.run.name])]}
                for g, runs in self.groups.items()},
            "baseline": self.baseline, "baseline_default": self.baseline_default,
            "recipe": self.recipe,
            "pairing": {g: {"paired": p.paired, "why": p.why} for g, p in self.pairing.items()},
            "budget": a.budget, "budget_from": a.budget_from,
            "cut": a.cut + [f"left out: {n}" for n in a.dropped + self.notes],
            "target_loss": self.target, "target_from": self.target_from,
            "loss": a.loss, "loss_note": a.loss_note, "time_note": self.time_note(),
            "detector": self.detector, "gap": self.gap,
        })


def _unique(sources: dict[str, list[RunLog]]) -> dict[str, list[RunLog]]:
    """Run names unique across every path read: a name two paths share is prefixed by its
    path."""
    seen: dict[str, int] = {}
    for runs in sources.values():
        for r in runs:
            seen[r.name] = seen.get(r.name, 0) + 1
    return {src: [dataclasses.replace(r, name=f"{src.rstrip('/')}/{r.name}")
                  if seen[r.name] > 1 else r for r in runs] for src, runs in sources.items()}


def _final_losses(prepared: list[Prepared]) -> list[float]:
    out = []
    for p in prepared:
        if not p.records or (p.diverged_at is not None
                             and p.diverged_at <= max(r[M.STEP] for r in p.records)):
            continue
        vals = [r[M.VAL_LOSS] for r in p.records if finite(r.get(M.VAL_LOSS))]
        if vals:
            out.append(vals[-1])
    return out


def plan(sources: dict[str, list[RunLog]] | list[RunLog], *, out: str | Path,
         groups: list[str] | list[tuple[str, str]] = (), by: str | None = None,
         baseline: str | None = None, recipe: str | None = None,
         target_loss: float | None = None, max_step: int | None = None,
         unpaired: bool = False, detector: str = "default", gap: int = 5,
         name: str = "compare", skipped: list[str] = ()) -> Plan:
    """Decide a comparison of ``sources`` (runs by the path they were read from, or one
    list) and write nothing. ``groups``: ``NAME=GLOB`` strings or (name, glob) pairs;
    ``by``: a parameter of the runs' own metadata; neither: one group per path;
    ``skipped``: what the reading left out, and why (the report names each). Raises
    :class:`UserError` (one line) for every problem of the input, ``out`` included (see
    :mod:`.paths`)."""
    from spikebench.compare.paths import check_out

    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UserError(f"--name {name!r}: must be letters, digits, '.', '_' or '-' (a "
                        "folder name)")
    if groups and by:
        raise UserError("give --group or --by, not both")
    inputs: list[str | Path] = [] if isinstance(sources, list) else list(sources)
    if isinstance(sources, list):
        sources = {"runs": sources}
    sources = _unique(dict(sources))
    check_out(out, name, [*inputs, *(r.path for rs in sources.values() for r in rs)])
    notes = list(skipped)
    runs = [r for rs in sources.values() for r in rs]
    if not runs:
        raise UserError(f"no run found in {listed(list(sources))}")
    if groups:
        pairs = [grouping.parse_group(g) if isinstance(g, str) else tuple(g) for g in groups]
        grouped = grouping.by_globs(runs, pairs)
    elif by:
        grouped = grouping.by_param(runs, by)
    else:
        if len(sources) < 2:
            raise UserError(f"{listed(list(sources))}: one path and no grouping: name groups "
                            "with --group NAME=GLOB or --by PARAM, or give one path per group")
        grouped = grouping.by_source(sources)
    if len(grouped.runs) < 2:
        only = next(iter(grouped.runs))
        raise UserError(f"only one group ({only}, {len(grouped.runs[only])} runs): a "
                        "comparison needs two or more")
    base = grouping.pick(grouped, baseline, "--baseline") or next(iter(grouped.runs))
    rec = grouping.pick(grouped, recipe, "--recipe")
    if rec is not None and rec == base:
        raise UserError(f"--recipe {recipe}: is the baseline; name another group")
    if grouped.ungrouped:
        notes.append(f"{len(grouped.ungrouped)} run(s) in no group: "
                     f"{listed(grouped.ungrouped)}")
    members = [r for rs in grouped.runs.values() for r in rs]
    aligned = align(members, max_step=max_step)
    kept = {g: [aligned.runs[r.name] for r in rs if r.name in aligned.runs]
            for g, rs in grouped.runs.items()}
    emptied = [g for g, rs in kept.items() if not rs]
    if emptied:
        raise UserError(f"--max-step {max_step}: leaves group {emptied[0]} no run")
    group_runs = {g: [p.run for p in ps] for g, ps in kept.items()}
    labels = {n: label for rs in group_runs.values()
              for n, label in grouping.labels(rs).items()}
    if target_loss is None:
        finals = _final_losses(kept[base])
        if not finals:
            raise UserError(f"the baseline {base}'s runs end with no loss to take a target "
                            "from; give --target-loss")
        target = statistics.median(finals)
        target_from = (f"the median final {'validation' if aligned.loss == 'val' else 'training'}"
                       f" loss of the baseline {base}, as no --target-loss was given")
    else:
        if not (finite(target_loss) and target_loss > 0):
            raise UserError(f"--target-loss {target_loss}: must be a loss > 0")
        target, target_from = float(target_loss), "--target-loss"
    return Plan(name=name, groups=kept, grouped=grouped, baseline=base, recipe=rec,
                pairing=grouping.pair(group_runs, base, unpaired=unpaired), labels=labels,
                aligned=aligned, target=target, target_from=target_from, detector=detector,
                gap=gap, sources=list(sources), baseline_default=baseline is None,
                notes=notes)


def _fresh(out: Path, name: str, what: str) -> Path:
    """A new hidden folder in ``out`` (made with the usual permissions, as a sweep's)."""
    for n in range(1000):
        path = out / f".{name}.{os.getpid()}-{n}.{what}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise UserError(f"--out {out}: cannot make a working folder there")


def write(p: Plan, out: str | Path) -> dict[str, Path]:
    """Write the comparison's study into ``out/<name>`` (replacing one an earlier
    comparison wrote there, only once the new one is whole) and its report into ``out``:
    ``report.md``, ``report.html`` and the plots. Returns their paths and ``study``."""
    from spikebench.compare.study import MARKER, write_study
    from spikebench.report import build_report

    out = Path(out)
    final = out / p.name
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: not a folder")
    if final.exists() and not (final / MARKER).is_file():
        raise UserError(f"--out {out}: {final} exists and is not a comparison spikebench "
                        "compare wrote; give another --out or --name")
    out.mkdir(parents=True, exist_ok=True)
    tmp = _fresh(out, p.name, "partial")
    try:
        write_study(tmp, final.resolve(), name=p.name, groups=p.groups, seed_labels=p.labels,
                    params={g: p.params(g) for g in p.groups}, spec=p.spec(), info=p.info(),
                    detector=p.detector, gap=p.gap, target=p.target, steps=p.aligned.budget)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if final.exists():  # the earlier comparison goes only once the new one is whole
        old = _fresh(out, p.name, "old")
        final.rename(old / p.name)
    try:
        tmp.rename(final)
    except OSError as e:
        if old is not None:
            (old / p.name).rename(final)
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"--out {out}: cannot write {final} ({e.strerror or e})") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return {**build_report(final, out), "study": final}


def compare(sources: dict[str, list[RunLog]] | list[RunLog], *, out: str | Path,
            **options: Any) -> dict[str, Path]:
    """:func:`plan` then :func:`write`: the comparison's study and report under ``out``."""
    return write(plan(sources, out=out, **options), out)
