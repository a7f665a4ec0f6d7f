"""The report's sections, in report order: the one list every stage iterates.

Each module holds a section's ``info`` (a frozen dataclass computed from the loaded study),
its ``blocks`` and, if it draws one, its ``plot``; :data:`SECTIONS` names them once, so
adding a section is one module and one entry here. Computing, laying out, plotting and the
HTML page's navigation all walk this list, so they cannot disagree on what sections exist.
"""

from __future__ import annotations

from spikebench.report.blocks import Block, Heading, unavailable
from spikebench.report.data import Study
from spikebench.report.sections import (
    across_sizes,
    claims,
    cleaning,
    curves,
    header,
    importance,
    lr,
    lr_curves,
    lr_sensitivity,
    pareto,
    precursors,
    spike_counts,
    strategy,
    summary,
    trials,
)
from spikebench.report.sections.section import Info, Section

__all__ = ["SECTIONS", "Info", "Report", "Section", "document", "headings", "plots",
           "report_info"]

SECTIONS: tuple[Section, ...] = (
    Section("header", "", header.info, header.blocks),
    Section("summary", "Summary: the verdicts, each arm's effect, the curves", summary.info,
            summary.blocks, summary.plot),
    Section("strategy", "The strategy table, measured", strategy.info, strategy.blocks),
    Section("claims", "The article's headline claims, measured (recipe vs baseline)",
            claims.info, claims.blocks),
    Section("spike_counts", "Spike counts by strategy", spike_counts.info, spike_counts.blocks,
            spike_counts.plot),
    Section("cleaning", "Data cleaning: what was removed, against what was planted",
            cleaning.info, cleaning.blocks),
    Section("curves", "Loss curves: baseline, best and worst trials", curves.info,
            curves.blocks, curves.plot),
    Section("pareto", "Pareto front: spikes vs convergence", pareto.info, pareto.blocks,
            pareto.plot),
    Section("importance", "Parameter importance", importance.info, importance.blocks,
            importance.plot),
    Section("lr_curves", "Final loss and attention logits against the learning rate",
            lr_curves.info, lr_curves.blocks, lr_curves.plot),
    Section("lr_sensitivity", "LR sensitivity per strategy, paired vs the baseline",
            lr_sensitivity.info, lr_sensitivity.blocks),
    Section("lr", "Spikes and convergence against the learning rate", lr.info, lr.blocks,
            lr.plot),
    Section("precursors", "Precursors: which signal moved first, per arm", precursors.info,
            precursors.blocks, optional=True),
    Section("across_sizes", "Across model sizes: does each strategy's effect transfer?",
            across_sizes.info, across_sizes.blocks, optional=True),
    Section("trials", "Every trial", trials.info, trials.blocks),
    Section("setup", "Setup: environment, search space, definitions", header.info,
            header.setup_blocks),
)

# Every section's info by key, in report order.
Report = dict[str, Info]


def report_info(study: Study) -> Report:
    """Every section's info, in report order."""
    return {s.key: s.info(study) for s in SECTIONS}


def shown(report: Report | None, s: Section) -> bool:
    """Whether ``report`` shows section ``s``: an optional one only where it applies."""
    return not s.optional or report is None or report[s.key].available


def headings(report: Report | None = None) -> list[tuple[str, str]]:
    """(key, numbered title) of the titled sections ``report`` shows (None: every one): the
    h2 headings and the page's nav."""
    titled = [s for s in SECTIONS if s.title and shown(report, s)]
    return [(s.key, f"{i}. {s.title}") for i, s in enumerate(titled, 1)]


def document(report: Report, images: set[str] | frozenset[str] = frozenset()) -> list[Block]:
    """The whole report as blocks; ``images`` names the plots that exist. A section whose
    info is unavailable shows its reason instead of its body."""
    titles = dict(headings(report))
    out: list[Block] = []
    for s in SECTIONS:
        if not shown(report, s):
            continue
        info = report[s.key]
        if s.key in titles:
            out.append(Heading(2, titles[s.key], s.key))
        out.extend(s.blocks(info, frozenset(images)) if info.available
                   else unavailable(info.reason))
    return out


def plots(report: Report) -> dict[str, bytes]:
    """PNG bytes by section key, for every available section whose plot has something to
    draw."""
    out = {}
    for s in SECTIONS:
        if s.plot is None or not report[s.key].available:
            continue
        png = s.plot(report[s.key])
        if png is not None:
            out[s.key] = png
    return out
