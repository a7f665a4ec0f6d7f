"""What a report section is: a key and title, the info it computes from a study, the blocks
it lays that info out as, and the plot it may draw.

Every info is a frozen dataclass derived from :class:`Info`, so a section that cannot be
computed is still a value of its own type, one that says why (``available=False`` and a
``reason``) and that the report prints instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Self

from spikebench.report.blocks import Block
from spikebench.report.data import Study

# Why a section about the built-in engine's switches says nothing of a study whose trials
# ran the team's own command (its parameters are free-form).
OWN_TRAINER = ("the trials ran the study's own trainer command, whose parameters are its "
               "own: spikebench cannot tell which of them {what}")
# The same for runs read from disk and compared (spikebench compare).
IMPORTED = ("the runs were read from disk (spikebench compare), with parameters of their "
            "own trainer: spikebench cannot tell which of them {what}")


def own_params(study: Study, what: str) -> str:
    """Why a section about the built-in engine's switches is empty for ``study``."""
    return (IMPORTED if study.compare is not None else OWN_TRAINER).format(what=what)


@dataclass(frozen=True, kw_only=True)
class Info:
    available: bool = True
    reason: str = ""

    @classmethod
    def unavailable(cls, reason: str) -> Self:
        return cls(available=False, reason=reason)


class Section(NamedTuple):
    """One entry of the report's list of sections; ``title`` "" opens the page unnumbered."""

    key: str
    title: str
    info: Callable[[Study], Any]
    blocks: Callable[[Any, frozenset[str]], list[Block]]
    plot: Callable[[Any], bytes | None] | None = None
    # Shown only where it applies (its info available): a section most studies lack the
    # dimension for (model sizes), left out rather than a heading that says so.
    optional: bool = False
