"""The report as neutral blocks (headings, paragraphs, lists, tables, images) for both renderers.

:func:`document` lays the sections' data out once; :mod:`.markdown` and :mod:`.html` only
render blocks. Every text here is raw text, never markup: each renderer escapes every span
and cell (markdown escaping, ``html.escape``), so a user's string (a study or arm name, a
parameter value, an error message) cannot become markup in either output, and no caller
has to remember which strings came from users. A newline inside a table cell is a line
break in both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from spikebench.report.stats import VERDICT_RULES

DASH = "—"


@dataclass(frozen=True)
class Span:
    text: str
    bold: bool = False


@dataclass
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass
class Para:
    spans: list[Span]


@dataclass
class Bullets:
    items: list[list[Span]]


@dataclass
class Image:
    name: str
    alt: str


@dataclass(frozen=True)
class Cell:
    """A cell's text and the key a sortable HTML table sorts it by (numbers sort as such;
    None sorts last)."""

    text: str
    sort: float | str | None = None


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Cell]]
    sortable: bool = False
    numeric: list[bool] = field(default_factory=list)  # right-align these columns


def num(x: Any) -> str:
    """A number for a table: about 3 significant digits, no exponent for everyday sizes;
    None/NaN/non-numbers: a dash; infinities: ±inf."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return DASH if x is None else str(x)
    if math.isnan(x):
        return DASH
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 0.01:
        return f"{x:.3g}"
    return f"{x:.2e}"


def signed(x: Any, fmt=num) -> str:
    text = fmt(x)
    return "+" + text if isinstance(x, int | float) and x > 0 and not text.startswith("+") \
        else text


def pct(x: Any, *, sign: bool = False) -> str:
    if not isinstance(x, int | float) or isinstance(x, bool) or math.isnan(x):
        return DASH
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    text = f"{100 * x:.0f}%"
    return ("+" + text) if sign and x > 0 else text


def points(x: Any) -> str:
    """A difference of two rates in percentage points: ``+33 pp``."""
    if not isinstance(x, int | float) or isinstance(x, bool) or math.isnan(x):
        return DASH
    return f"{100 * x:+.0f} pp" if x else "0 pp"


def interval(m: dict[str, Any] | None, fmt=num) -> str:
    """``value [lo, hi]``; one value: ``value (no CI, n=1)``; none: a dash."""
    if not m or m.get("value") is None:
        return DASH
    if m.get("lo") is None or m.get("hi") is None:
        return f"{fmt(m['value'])} (no CI, n={m.get('n', 0)})"
    return f"{fmt(m['value'])} [{fmt(m['lo'])}, {fmt(m['hi'])}]"


def _delta(m: dict[str, Any], fmt=num) -> str:
    d = m.get("delta")
    if d is None:
        return ""
    if d.get("value") is None:
        return "\nΔ vs baseline: no matched seeds"
    sfmt = lambda v: signed(v, fmt)  # noqa: E731
    return f"\nΔ {interval(d, sfmt)}, {d['n']} matched"


def _sort(m: dict[str, Any] | None) -> float | None:
    return m.get("value") if m else None


def strategy_table(info: dict[str, Any]) -> Table:
    cols = ["Strategy", "Arm", "Seeds", "Spike events / 1k steps", "Steps to target",
            "Wall time to target (s)", "Final val loss", "Success rate",
            "Article: where it applies", "Article: expected effect", "Article: difficulty"]
    rows = []
    for r in info.get("rows", []):
        claim = r["claim"]
        article = [Cell(claim["applies"]), Cell(claim["effect"]), Cell(claim["difficulty"])]
        head = [Cell(r["label"]), Cell(r["arm"])]
        if r.get("status") != "complete":
            rows.append(head + [Cell(r["status"])] + [Cell(DASH)] * 5 + article)
            continue
        seeds = f"{r['seeds']}" + (f" ({r['diverged']} diverged)" if r["diverged"] else "")

        def reached(m):
            return f"{interval(m)}\n{m['n']}/{m['of']} reached" + _delta(m)

        s = r["success"]
        succ = f"{interval(s, pct)} ({s['k']}/{s['n']})"
        if s.get("delta") is not None:
            d = s["delta"]
            succ += ("\nΔ vs baseline: no matched seeds" if d.get("value") is None else
                     f"\nΔ {interval(d, points)}, {d['n']} matched")
        rows.append(head + [
            Cell(seeds, r["seeds"]),
            Cell(interval(r["spikes"]) + _delta(r["spikes"]), _sort(r["spikes"])),
            Cell(reached(r["steps_to_target"]), _sort(r["steps_to_target"])),
            Cell(reached(r["seconds_to_target"]), _sort(r["seconds_to_target"])),
            Cell(interval(r["final_loss"]) + f"\n{r['final_loss']['n']}/"
                 f"{r['final_loss']['of']} completed" + _delta(r["final_loss"]),
                 _sort(r["final_loss"])),
            Cell(succ, s.get("value")),
        ] + article)
    return Table(cols, rows)


def claims_table(info: dict[str, Any]) -> Table:
    cols = ["Claim (article)", "Measured as", "Baseline", "Recipe", "Matched seeds",
            "Change [95% CI]", "Verdict", "Seeds to settle"]
    rows = []
    for r in info.get("rows", []):
        fmt = pct if r["key"] == "success" else num
        if r["seeds_needed"] is None:
            need = DASH if r["verdict"] != "inconclusive" else "unknown"
        else:
            need = ("≥" if r["seeds_capped"] else "") + str(r["seeds_needed"])
        if r.get("scale") == "absolute":
            rel = interval(r["relative"], lambda v: pct(v, sign=True).replace("%", " pp"))
        else:
            rel = interval(r["relative"], lambda v: pct(v, sign=True))
        rows.append([
            Cell(f"{r['claim']} ({pct(r['claimed'], sign=True)})"), Cell(r["metric"]),
            Cell(fmt(r["baseline"])), Cell(fmt(r["recipe"])),
            Cell(f"{r['n_pairs']}/{r['of']}"), Cell(rel),
            Cell(f"{r['verdict']}\n({r['why']})"), Cell(need)])
    return Table(cols, rows)


def trials_table(info: dict[str, Any]) -> Table:
    keys = info.get("param_keys", [])
    cols = (["#", "State", "Arm"] + keys
            + ["Spikes", "Convergence", "Events (median)", "Diverged", "Reached",
               "Final loss (median)", "Duration (s)", "Note"])
    rows = []
    for r in info.get("rows", []):
        params = []
        for k in keys:
            v = r["params"].get(k)
            params.append(Cell(num(v) if isinstance(v, float) else
                               DASH if v is None else str(v),
                               v if isinstance(v, int | float) and not isinstance(v, bool)
                               else (None if v is None else str(v))))
        reached = (f"{r['reached_seeds']}/{r['seeds']}" if r["seeds"] is not None else DASH)
        rows.append([Cell(str(r["number"]), r["number"]), Cell(r["state"]), Cell(r["arm"])]
                    + params + [
            Cell(num(r["spikes"]), r["spikes"]), Cell(num(r["convergence"]), r["convergence"]),
            Cell(num(r["events_median"]), r["events_median"]),
            Cell(num(r["diverged_seeds"]), r["diverged_seeds"]),
            Cell(reached, r["reached_seeds"]),
            Cell(num(r["final_loss"]), r["final_loss"]),
            Cell(num(r["duration_s"]), r["duration_s"]), Cell(r["note"])])
    numeric = [True, False, False] + [False] * len(keys) + [True] * 7 + [False]
    return Table(cols, rows, sortable=True, numeric=numeric)


def pareto_table(info: dict[str, Any]) -> Table:
    by = {p["number"]: p for p in info.get("points", [])}
    rows = [[Cell(str(n), n), Cell(by[n]["arm"]), Cell(num(by[n]["spikes"]), by[n]["spikes"]),
             Cell(num(by[n]["convergence"]), by[n]["convergence"])]
            for n in info.get("front", [])]
    return Table(["#", "Arm", "Spikes", "Convergence"], rows)


def importance_table(info: dict[str, Any]) -> Table:
    objs = info.get("objectives", [])
    params: list[str] = []
    for o in objs:
        params += [p for p in o["importances"] if p not in params]
    rows = [[Cell(p)] + [Cell(num(o["importances"].get(p)), o["importances"].get(p))
                         for o in objs] for p in params]
    return Table(["Parameter"] + [f"Importance for {o['name']}" for o in objs], rows)


def spike_count_tables(info: dict[str, Any]) -> tuple[Table, Table]:
    arms = Table(["Arm", "Strategy", "Loss-spike events per seed", "Mean per seed", "Diverged"],
                 [[Cell(a["arm"]), Cell(a["label"]), Cell(", ".join(map(str, a["events"]))),
                   Cell(num(a["mean"]), a["mean"]), Cell(str(a["diverged"]))]
                  for a in info.get("arms", [])])
    feats = Table(["Strategy", "Trials with it", "Mean events / seed with it",
                   "Trials without", "Mean events / seed without"],
                  [[Cell(f["label"]), Cell(str(f["on_trials"])), Cell(num(f["on_mean"])),
                    Cell(str(f["off_trials"])), Cell(num(f["off_mean"]))]
                   for f in info.get("features", [])])
    return arms, feats


def lr_table(info: dict[str, Any]) -> Table:
    rows = [[Cell(f"{num(b['lo'])} – {num(b['hi'])}"), Cell(str(b["trials"])),
             Cell(num(b["spikes"])), Cell(num(b["convergence"])),
             Cell(f"{b['diverged_trials']}/{b['trials']}")]
            for b in info.get("bins", [])]
    return Table(["Learning rate", "Trials", "Spikes (median)", "Convergence (median)",
                  "Trials with a diverged seed"], rows)


Block = Heading | Para | Bullets | Table | Image


def _p(*parts: str | Span) -> Para:
    return Para([x if isinstance(x, Span) else Span(x) for x in parts])


def _joined(values: list[str]) -> str:
    return ", ".join(values) if values else "unknown"


def header_blocks(h: dict[str, Any]) -> list[Block]:
    env = h["environment"]
    states = ", ".join(f"{n} {s}" for s, n in sorted(h["states"].items()))
    out: list[Block] = [Heading(1, f"Spike report: {h['study']}", "top"),
                        _p(f"Results folder {h['folder']}; {h['n_trials']} trials ({states}).")]
    if not h["has_spec"]:
        out.append(_p("This study has no spikebench sweep definition in its user attributes; "
                      "sections that need it are empty."))
    else:
        goal = ("minimise spikes and convergence (Pareto front)" if h["objective"] == "multi"
                else "minimise convergence under spike constraints")
        items = [
            [Span("Objective: ", True), Span(f"{h['objective']} ({goal}); spike metric "
                                             f"{h['spike_metric']}")],
            [Span("Target: ", True), Span(
                f"validation loss {num(h['target_loss'])} within {h['steps']} steps "
                f"(evaluated every {h['eval_every']}); seeds "
                + ", ".join(map(str, h["seeds"])))],
            [Span("Search: ", True), Span(f"sampler {h['sampler']}, pruner {h['pruner']}; "
                                          f"sweep file {h['sweep_file']}")],
        ]
        if h["notes"]:
            items.append([Span("Notes: ", True), Span(h["notes"])])
        out.append(Bullets(items))
    out += [Heading(3, "Environment", "environment"), Bullets([
        [Span(f"{label}: ", True), Span(_joined(vals))] for label, vals in (
            ("Device", env["device"] + env["gpu"]),
            ("Precision (emulated or real)", env["precision"]),
            ("torch", env["torch"]), ("Python", env["python"]),
            ("Platform", env["platform"]), ("Git", env["git"]),
            ("Corpus", env["corpus"]), ("Corpus sha256", env["corpus_sha256"]),
            ("Injected faults", h["faults"] or ["none"]))])]
    if h["space"]:
        out += [Heading(3, "Search space", "space"),
                Bullets([[Span(f"{p['key']}: ", True), Span(p["describe"])]
                         for p in h["space"]])]
    if h["base"]:
        out.append(_p(Span("Base config (every trial): ", True), "; ".join(
            f"{k} = {v}" for k, v in h["base"].items())))
    if h["arms"]:
        out.append(_p(Span("Designed comparison arms: ", True), "; ".join(
            f"{a} ({lab})" for a, lab in h["arms"].items())))
    out.append(_p(Span("Spike definition: ", True), h["spike_definition"]))
    return out


def _unavailable(info: dict[str, Any]) -> list[Block]:
    return [_p(Span("Not available: ", True), info.get("reason", ""))]


def _notes(info: dict[str, Any]) -> list[Block]:
    notes = info.get("notes") or []
    return [Bullets([[Span(n)] for n in notes])] if notes else []


def _img(name: str, alt: str, images: set[str]) -> list[Block]:
    return [Image(name, alt)] if name in images else []


SECTIONS = [("strategy", "1. The strategy table, measured"),
            ("claims", "2. The article's headline claims, measured (recipe vs baseline)"),
            ("spike_counts", "3. Spike counts by strategy"),
            ("curves", "4. Loss curves: baseline, best and worst trials"),
            ("pareto", "5. Pareto front: spikes vs convergence"),
            ("importance", "6. Parameter importance"),
            ("lr", "7. Learning-rate sensitivity"),
            ("trials", "8. Every trial")]


def _strategy(s: dict[str, Any], images: set[str]) -> list[Block]:
    return [_p("Each strategy alone added to the baseline, and the combined recipe, on "
               "the same seeds. Cells: estimate [95% CI]; Δ: mean paired difference vs the "
               "baseline over matched seeds (bootstrap; for success, Newcombe's score "
               "interval for paired proportions). Spike events: mean per seed (bootstrap); "
               f"time to target (validation loss {num(s['target_loss'])}): median over "
               "the seeds that reached it (bootstrap); final loss: mean over completed "
               "seeds (bootstrap); success: completed without divergence and reached "
               "the target (exact Clopper-Pearson CI)."),
            strategy_table(s), *_notes(s)]


def _claims(c: dict[str, Any], images: set[str]) -> list[Block]:
    return [claims_table(c), *_notes(c),
            _p(Span("How verdicts are decided: ", True), VERDICT_RULES)]


def _spike_counts(k: dict[str, Any], images: set[str]) -> list[Block]:
    arms, feats = spike_count_tables(k)
    out = _img("spike_counts", "Spike events per seed by comparison arm", images)
    if k["arms"]:
        out += [_p("Designed comparison:"), arms]
    if k["features"]:
        out += [_p("Every completed trial, strategy on vs off (descriptive only: in "
                   "search trials the strategies vary together):"), feats]
    return out


def _curves(cv: dict[str, Any], images: set[str]) -> list[Block]:
    shown = "; ".join(f"{p['roles']} #{p['number']} ({p['arm']})" for p in cv["panels"])
    return [_p(f"{cv['selection'][0].upper()}{cv['selection'][1:]}. Shown: {shown}."),
            *_img("curves", "Training loss curves with spike events marked", images)]


def _pareto(p: dict[str, Any], images: set[str]) -> list[Block]:
    return [*_img("pareto", "Pareto front of spikes vs convergence", images),
            _p(f"x: {p['x_label']}; y: {p['y_label']}. Trials on the front:"), pareto_table(p)]


def _importance(im: dict[str, Any], images: set[str]) -> list[Block]:
    return [_p(f"Optuna, {im['evaluator']}, over {im['n_trials']} completed trials."),
            *_img("importance", "Parameter importance", images), importance_table(im)]


def _lr(lr: dict[str, Any], images: set[str]) -> list[Block]:
    return [*_img("lr", "Spikes and convergence against the learning rate", images),
            lr_table(lr)]


def _trials(rows: Any, images: set[str]) -> list[Block]:
    return [_p("In the HTML report, click a column header to sort."), trials_table(rows)]


# Section key -> its body; a section whose data says ``available: False`` shows why instead.
_BODIES = {"strategy": _strategy, "claims": _claims, "spike_counts": _spike_counts,
           "curves": _curves, "pareto": _pareto, "importance": _importance, "lr": _lr,
           "trials": _trials}


def document(report: dict[str, Any], images: set[str] | frozenset = frozenset()) -> list[Block]:
    """The whole report as blocks, in order; ``images`` names the plots that exist."""
    out = header_blocks(report["header"])
    for key, title in SECTIONS:
        out.append(Heading(2, title, key))
        info = report[key]
        if isinstance(info, dict) and not info.get("available", True):
            out.extend(_unavailable(info))
        else:
            out.extend(_BODIES[key](info, images))
    return out
