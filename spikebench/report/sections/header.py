"""The report's opening: the study, its environment, search space and arms, and what a spike is.

Environment values are collected over every trial's first seed ``meta.json``; where trials
disagree (a sweep resumed on another machine or commit) all distinct values are listed, and
values no trial recorded are empty lists. A study without a readable sweep spec says so, and
that the sections needing it are empty.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from spikebench.report.arms import classify_arm, table_arms
from spikebench.report.blocks import Block, Bullets, Cell, Heading, Span, Table, num, para
from spikebench.report.data import Study, TrialRecord, trial_job
from spikebench.report.sections.section import Info
from spikebench.spikes.evidence import EvidenceParams
from spikebench.spikes.rules import DefaultRule
from spikebench.study.records import BUCKETS
from spikebench.values import finite


# The spike rules of spikebench.spikes.rules, in one line each.
def _default_rule_text() -> str:
    """The default rule in words, from its own defaults (so the text cannot go stale)."""
    d = {k: v.default for k, v in inspect.signature(DefaultRule.__init__).parameters.items()
         if v.default is not inspect.Parameter.empty}
    e = EvidenceParams()
    return (f"residual above the median of the previous {d['level_window']} values, in "
            "sigmas of the local noise (MAD of the step differences over the previous "
            f"{d['window']} values); on the loss, multi-step evidence: a residual above "
            f"{e.k_big:g} sigma is a spike at once, a rise that comes back within "
            f"{e.max_len} rows is a spike if its peak exceeds {e.k_peak:g} sigma or its "
            f"summed residuals {e.k_multi:g} sigma (against the larger of the long-run "
            "sigma and the noise around it), and a rise that does not come back is a level "
            f"shift, not a spike; on log(grad norm), a residual above {d['k']:g} sigma; plus "
            f"a loss jump over {d['jump']:g} nat above the running minimum in the first "
            f"{d['min_periods']} steps")


RULE_TEXT = {
    "default": _default_rule_text(),
    "zscore": "value > mean + 3 sd of the previous 100 values",
    "olmo": "|value - mean| >= 7 sd of the previous 1000 values (OLMo 2 spike score)",
    "olmo_online": "value > mean + 6 sd of the previous 128 values (OLMo-core)",
    "loss_ratio": "loss / min(previous losses) > 1.1 (Li et al. 2022)",
    "persistent": "> 2x the mean of the previous 100 values for more than 4 steps",
}


class Pruning(NamedTuple):
    """What the pruner saved: a pruned trial trained its first seed up to the step it was
    stopped at and never started the others."""

    pruned: int  # trials
    spent: int  # training steps the pruned trials ran
    saved: int  # steps of their budget they did not run
    budget: int  # steps every finished or pruned trial would have run unpruned


def pruning(trials: list[TrialRecord], steps: int | None, n_seeds: int) -> Pruning:
    if not steps:
        return Pruning(0, 0, 0, 0)
    ran = [t for t in trials if t.state in ("COMPLETE", "PRUNED")]
    pruned = [t for t in ran if t.state == "PRUNED"]
    spent = sum(min(int(t.attrs.get("pruned_at_step", steps)), steps) for t in pruned)
    return Pruning(len(pruned), spent, len(pruned) * steps * n_seeds - spent,
                   len(ran) * steps * n_seeds)


@dataclass(frozen=True, kw_only=True)
class HeaderInfo(Info):
    study: str
    folder: str
    source: str  # "Results folder X", or the storage (password masked) and study
    n_trials: int
    states: dict[str, int]
    objective: str
    directions: list[str]
    spike_metric: str
    target_loss: float | None
    spike_limit: float | None
    steps: int | None
    eval_every: int | None
    seeds: list[int]
    sampler: str | None
    pruner: str | None
    sweep_file: str | None
    notes: str
    has_spec: bool
    spec_problem: str  # why a stored spec could not be read; "" if none was stored
    environment: dict[str, list[str]]
    faults: list[str]
    space: list[dict[str, str]]  # {"key", "describe"} per dimension
    base: dict[str, Any]
    arms: dict[str, str]  # arm -> the strategy it tests
    grid: dict[str, list] = field(default_factory=dict)  # [comparison] grid
    spike_definition: str
    pruning: Pruning = Pruning(0, 0, 0, 0)
    # Where the full logs of a study read from its storage are (by host, or artifact store).
    full_logs: list[str] = field(default_factory=list)
    # What spikebench compare recorded, for a study of runs read from disk; None otherwise.
    compare: dict[str, Any] | None = None


def _distinct(values) -> list[str]:
    out: list[str] = []
    for v in values:
        if v is not None and str(v) not in out:
            out.append(str(v))
    return out


def _first_config(study: Study) -> dict[str, Any]:
    for t in study.trials:
        job = trial_job(t)
        if job and isinstance(job.get("config"), dict):
            return job["config"]
    return {}


def _fault_text(inj: dict[str, Any]) -> str:
    where = f" ({inj['target']})" if inj.get("target") else ""
    if finite(inj.get("first_step")) and finite(inj.get("last_step")):
        return f"{inj.get('kind', '?')}{where} at steps {inj['first_step']}-{inj['last_step']}"
    return f"{inj.get('kind', '?')}{where}"


def _spike_definition(study: Study) -> str:
    spikes_cfg = _first_config(study).get("spikes") or {}
    rule = str(spikes_cfg.get("detector", "default"))
    gap = spikes_cfg.get("gap", 5)
    return (
        f"rule {rule!r}: {RULE_TEXT.get(rule, 'see spikebench.spikes.rules')}, on the training "
        f"loss and on log(grad norm); flagged steps with at most {gap} unflagged log rows "
        "between them form one event. Counts and severity use loss events only (grad-norm events are precursors). "
        + ("The spike objective is the total severity: the area between the loss and its "
           "pre-spike trend over each event and its recovery (nats x steps; steps on an "
           "injected faulty batch add no area, so it measures damage on clean batches), "
           if study.spike_metric == "severity" else "The spike objective is the number of loss events, ")
        + "median over seeds; a diverged seed adds one event and the area of a loss stuck at "
        "its initial value for the rest of the budget.")


def info(study: Study) -> HeaderInfo:
    """Study, environment, search space, arms and how a spike was defined."""
    metas = list(study.metas.values())
    envs = [m.get("environment") or {} for m in metas]
    corp = [m.get("corpus") or {} for m in metas]
    states: dict[str, int] = {}
    for t in study.trials:
        states[t.state.lower()] = states.get(t.state.lower(), 0) + 1
    spec = study.spec
    return HeaderInfo(
        study=study.name, folder=str(study.folder), source=study.source,
        full_logs=full_logs(study) if study.folder is None else [],
        n_trials=len(study.trials),
        states=states, objective=study.objective, directions=study.directions,
        spike_metric=study.spike_metric,
        target_loss=spec.target_loss if spec else None,
        spike_limit=spec.spike_limit if spec else None,
        steps=spec.steps if spec else None, eval_every=spec.eval_every if spec else None,
        seeds=study.seeds, sampler=spec.sampler if spec else None,
        pruner=spec.pruner if spec else None, sweep_file=spec.path if spec else None,
        notes=(spec.notes if spec else "") or "", has_spec=spec is not None,
        spec_problem=study.spec_problem,
        environment={
            "device": _distinct(e.get("device") for e in envs),
            "gpu": _distinct(e.get("gpu") for e in envs),
            "precision": _distinct(m.get("precision") for m in metas),
            "torch": _distinct(e.get("torch") for e in envs),
            "python": _distinct(e.get("python") for e in envs),
            "platform": _distinct(e.get("platform") for e in envs),
            "git": _distinct(e.get("git") for e in envs),
            "corpus": _distinct(f"{c.get('source', '?')} ({c.get('bytes', '?')} bytes)"
                                for c in corp if c),
            "corpus_sha256": _distinct(c.get("sha256") for c in corp),
        },
        faults=_distinct(_fault_text(i) for m in metas for i in m.get("injections") or []
                         if isinstance(i, dict)),
        space=[{"key": p.key, "describe": p.describe()} for p in study.space],
        base=study.base,
        arms={a: classify_arm(study, a)["label"] for a in table_arms(study)},
        grid=dict(study.spec.grid) if study.spec else {},
        spike_definition=_spike_definition(study),
        pruning=pruning(study.trials, spec.steps if spec else None, len(study.seeds)),
        compare=study.compare,
    )


def full_logs(study: Study) -> list[str]:
    """Where the full-resolution logs of a study read from its storage are: each worker
    host with its trial count and folder, and the trials whose logs went to an artifact
    store; trials that left no record say so."""
    hosts: dict[tuple[str, str], list[int]] = {}
    stores: dict[str, int] = {}
    none = []
    for t in study.trials:
        st = t.stored
        if st is None:
            none.append(t.number)
        elif isinstance(st.where.get("full_logs"), dict) and st.where["full_logs"]:
            for store in {str(v).rsplit("/", 1)[0] for v in st.where["full_logs"].values()}:
                stores[store] = stores.get(store, 0) + 1
        else:
            where = str(Path(str(st.where.get("dir", "?"))).parent)
            hosts.setdefault((str(st.where.get("host", "?")), where), []).append(t.number)
    out = [f"on {host}, {len(ns)} trial{'s' * (len(ns) > 1)} under {where}"
           for (host, where), ns in sorted(hosts.items())]
    out += [f"{n} trial{'s' * (n > 1)} in the artifact store {store} (one artifact per "
            "seed, listed on each trial)" for store, n in sorted(stores.items())]
    if none:
        out.append(f"{len(none)} trial(s) left no record in the storage (unfinished, "
                   "or run by an older spikebench)")
    return out


def _joined(values: list[str]) -> str:
    return ", ".join(values) if values else "unknown"


def _no_spec(h: HeaderInfo) -> str:
    if h.spec_problem:
        return (f"This study's spikebench sweep definition cannot be read ({h.spec_problem}); "
                "sections that need it are empty.")
    return ("This study has no spikebench sweep definition in its user attributes; "
            "sections that need it are empty.")


def blocks(h: HeaderInfo, images: frozenset[str]) -> list[Block]:
    """The page's title and what was run, in two lines: the rest of the setup closes the
    report (:func:`setup_blocks`), after the results a reader came for."""
    states = ", ".join(f"{n} {s}" for s, n in sorted(h.states.items()))
    out: list[Block] = [Heading(1, f"Spike report: {h.study}", "top"),
                        para(f"{h.source}; {h.n_trials} trials ({states}).")]
    if h.full_logs:
        out.append(para("Read from the storage alone: curves are cut to at most "
                        f"{2 * BUCKETS} points per metric. Full logs: "
                        + "; ".join(h.full_logs) + "."))
    if h.compare is not None and h.has_spec:
        return out[:1] + compare_blocks(h)
    if not h.has_spec:
        out.append(para(_no_spec(h)))
        return out
    goal = ("minimise spikes and convergence (Pareto front)" if h.objective == "multi"
            else "minimise convergence under spike constraints")
    items = [
        [Span("Objective: ", True), Span(f"{h.objective} ({goal}); spike metric "
                                         f"{h.spike_metric}")],
        [Span("Target: ", True), Span(
            f"validation loss {num(h.target_loss)} within {h.steps} steps "
            f"(evaluated every {h.eval_every}); seeds " + ", ".join(map(str, h.seeds)))],
        [Span("Search: ", True), Span(f"sampler {h.sampler}, pruner {h.pruner}; "
                                      f"sweep file {h.sweep_file}")],
    ]
    p = h.pruning
    if h.pruner not in (None, "none") and p.budget:
        items.append([Span("Pruning: ", True), Span(
            f"{p.pruned} trial(s) stopped early, saving {p.saved:,} of {p.budget:,} training "
            f"steps ({p.saved / p.budget:.0%}); they ran {p.spent:,} steps of their first "
            "seed")])
    if h.notes:
        items.append([Span("Notes: ", True), Span(h.notes)])
    return out + [Bullets(items)]


def _text(x: Any) -> str:
    return x if isinstance(x, str) else "" if x is None else str(x)


def _list(x: Any) -> list:
    return x if isinstance(x, list) else []


def _groups(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    g = c.get("groups")
    return {k: v for k, v in g.items() if isinstance(v, dict)} if isinstance(g, dict) else {}


def compare_blocks(h: HeaderInfo) -> list[Block]:
    """The opening of a comparison of runs read from disk: what was compared, the baseline
    and the recipe, how each group is paired with the baseline, what was cut, the target."""
    c = h.compare or {}
    groups = _groups(c)
    n_runs = sum(len(_list(g.get("runs"))) for g in groups.values())
    sources = ", ".join(_text(s) for s in _list(c.get("sources"))) or "unknown"
    by = {"param": f"by the parameter {_text(c.get('by'))} of each run's own metadata",
          "glob": "by the --group patterns", "path": "one group per path given"}.get(
              _text(c.get("grouping")), "as given")
    base, recipe = _text(c.get("baseline")), c.get("recipe")
    out: list[Block] = [para(
        f"Runs read from disk and compared by spikebench compare: {n_runs} runs in "
        f"{len(groups)} groups, grouped {by}, read from {sources}. The comparison is stored "
        f"as a study in {h.folder}: spikebench report {h.folder} writes this report again.")]
    items = [[Span("Groups: ", True), Span("; ".join(
        f"{name} ({len(_list(g.get('runs')))} runs"
        + (f": {_text(g.get('rule'))}" if g.get("rule") else "") + ")"
        for name, g in groups.items()))],
        [Span("Baseline: ", True), Span(base + (" (the first group; name another with "
                                                 "--baseline)" if c.get("baseline_default")
                                                 else ""))],
        [Span("Recipe: ", True), Span(
            f"{recipe} (the article's headline claims are tested on it against the baseline)"
            if isinstance(recipe, str) else "none named (--recipe): the claims section is "
            "empty")]]
    pairing = c.get("pairing") if isinstance(c.get("pairing"), dict) else {}
    texts = []
    for name, p in pairing.items():
        if not isinstance(p, dict):
            continue
        if p.get("paired") is True:
            texts.append(f"{name}: paired by seed with {base} (the sign-flip test on matched "
                         "seeds)")
        else:
            texts.append(f"{name}: unpaired ({_text(p.get('why'))}): the exact two-sample "
                         "permutation test")
    if texts:
        items.append([Span("Pairing: ", True), Span("; ".join(texts))])
    cut = [_text(x) for x in _list(c.get("cut"))]
    items.append([Span("Compared on: ", True), Span(
        f"steps up to {num(h.steps)} ({_text(c.get('budget_from')) or 'the budget'})"
        + (". What was cut: " + "; ".join(cut) if cut else "; nothing was cut"))])
    items.append([Span("Target: ", True), Span(
        f"{'training' if c.get('loss') == 'train' else 'validation'} loss "
        f"{num(h.target_loss)} ({_text(c.get('target_from'))})"
        + (f"; {_text(c.get('loss_note'))}" if c.get("loss_note") else ""))])
    if c.get("time_note"):
        items.append([Span("Wall time: ", True), Span(_text(c.get("time_note")))])
    return out + [Bullets(items)]


def _runs_table(h: HeaderInfo) -> list[Block]:
    rows = []
    for name, g in _groups(h.compare or {}).items():
        for r in _list(g.get("runs")):
            if not isinstance(r, dict):
                continue
            seed = r.get("seed")
            rows.append([Cell(name), Cell(_text(r.get("name"))), Cell(_text(r.get("format"))),
                         Cell("unknown" if seed is None else _text(seed)),
                         Cell(_text(r.get("label")), r.get("label")),
                         Cell(f"{num(r.get('rows'))} rows, to step {num(r.get('last_step'))}"),
                         Cell(_text(r.get("cut")) or "—"), Cell(_text(r.get("path")))])
    return [Heading(3, "Runs", "runs"), Table(
        ["Group", "Run", "Format", "Seed", "Shown as seed", "Read", "Cut", "Path"], rows,
        sortable=True)]


def setup_blocks(h: HeaderInfo, images: frozenset[str]) -> list[Block]:
    """Environment, search space, base config, arms and the spike definition."""
    if h.compare is not None:
        return _runs_table(h) + [para(Span("Spike definition: ", True), h.spike_definition)]
    env = h.environment
    out: list[Block] = [Heading(3, "Environment", "environment"), Bullets([
        [Span(f"{label}: ", True), Span(_joined(vals))] for label, vals in (
            ("Device", env["device"] + env["gpu"]),
            ("Precision (emulated or real)", env["precision"]),
            ("torch", env["torch"]), ("Python", env["python"]),
            ("Platform", env["platform"]), ("Git", env["git"]),
            ("Corpus", env["corpus"]), ("Corpus sha256", env["corpus_sha256"]),
            ("Injected faults", h.faults or ["none"]))])]
    if h.space:
        out += [Heading(3, "Search space", "space"),
                Bullets([[Span(f"{p['key']}: ", True), Span(p["describe"])] for p in h.space])]
    if h.base:
        out.append(para(Span("Base config (every trial): ", True), "; ".join(
            f"{k} = {v}" for k, v in h.base.items())))
    if h.arms:
        out.append(para(Span("Designed comparison arms: ", True), "; ".join(
            f"{a} ({lab})" for a, lab in h.arms.items())))
    if h.grid:
        out.append(para(Span("Comparison grid: ", True), "every arm also ran at " + "; ".join(
            f"{k} = " + ", ".join(num(v) if isinstance(v, float) else str(v) for v in vals)
            for k, vals in h.grid.items()) + " (named 'arm @ key=value'; the arms above are "
            "at the base config's values)"))
    out.append(para(Span("Spike definition: ", True), h.spike_definition))
    return out
