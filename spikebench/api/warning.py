"""The run's early warning, opt-in: a precursor rule (:mod:`spikebench.precursors.rule`)
fed the rows of each read-back, log-only.

``spikebench.init(warning=...)`` takes a :class:`~spikebench.precursors.rule.WarningRule`,
a dict of its fields, or True for the committed default rule
(``spikebench/precursors/default_rule.toml``); None or False: off. The rule's ``signal`` is
a metric name as logged (``grad_norm``, ``probe/update_ratio``; a short name of
:data:`spikebench.api.checks.ALIASES` reads its metric, ``grad_norm`` the
``optim/grad_norm`` column) or a per-layer ``.../*`` read as the max over its layers.

The rule sees host floats only: rows are read back every ``sync_every`` logged steps
(one transfer), then each row that carries the signal feeds it, O(window) host work per
value and nothing on the device. Each row gets ``spikes/warnings`` (the warnings so far)
and, where it fed the rule, ``spikes/warning_score``; ``summary.json`` gets ``warnings``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.precursors.rule import WarningRule
from spikebench.values import dec_float, enc_float

DEFAULT_RULE = Path(__file__).resolve().parents[1] / "precursors" / "default_rule.toml"
# summary.json lists the steps of the first warnings only; ``n`` counts them all.
MAX_LISTED = 1000
ALLOWED = ("a spikebench.precursors.rule.WarningRule, a dict of its fields, True (the "
           "default rule) or None")


def default_rule() -> WarningRule:
    """The committed default rule (its fields at the top of the file or in ``[rule]``)."""
    if not DEFAULT_RULE.is_file():
        raise UserError(f"warning=True: no default rule is committed ({DEFAULT_RULE.name} is "
                        "missing); give a WarningRule or a dict of its fields")
    with open(DEFAULT_RULE, "rb") as f:
        d = tomllib.load(f)
    return WarningRule.from_mapping(d["rule"] if isinstance(d.get("rule"), dict) else d)


def rule_of(v: Any, name: str = "warning") -> WarningRule | None:
    """``warning=``'s value as a rule (None: off); a bad one is refused in one line."""
    from spikebench.api.checks import short

    if v is None or v is False:
        return None
    if v is True:
        return default_rule()
    if isinstance(v, WarningRule):
        return v
    if isinstance(v, Mapping):
        return WarningRule.from_mapping(v)  # its refusals name the field and the value
    raise UserError(f"{name}={short(v)}: must be {ALLOWED}")


class Watch:
    """A rule watching a run's rows: :meth:`observe` each row (host floats) in step order."""

    def __init__(self, rule: WarningRule):
        from spikebench.api.checks import ALIASES

        self.rule = rule
        key = ALIASES.get(rule.signal, rule.signal)
        self.reader = dataclasses.replace(rule, signal=key) if key != rule.signal else rule
        self.online = rule.online()
        self.count = 0
        self.steps: list[int] = []  # the first MAX_LISTED warnings' steps
        self.last: dict[str, Any] | None = None  # the newest: step, score, value

    def observe(self, row: dict[str, Any]) -> bool:
        """Feed the row's signal (if it has one) and mark the row; True if it warns."""
        v = self.reader.value(row)
        warned = False
        if v is not None:
            warned, score = self.online.update(v)
            row[M.WARNING_SCORE] = score
            if warned:
                self.count += 1
                if len(self.steps) < MAX_LISTED:
                    self.steps.append(int(row[M.STEP]))
                self.last = {"step": int(row[M.STEP]), "score": score, "value": v}
        row[M.WARNINGS] = self.count
        return warned

    def summary(self) -> dict[str, Any]:
        return {"rule": self.rule.to_mapping(), "n": self.count, "steps": list(self.steps)}

    def state_dict(self) -> dict[str, Any]:
        last = None if self.last is None else {k: enc_float(v) if isinstance(v, float) else v
                                               for k, v in self.last.items()}
        return {"online": self.online.state_dict(), "count": self.count,
                "steps": list(self.steps), "last": last}

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        self.online.load_state_dict(d["online"])
        self.count, self.steps = int(d["count"]), list(d["steps"])
        self.last = None if d["last"] is None else {k: dec_float(v) for k, v in d["last"].items()}

    def replay(self, rows: list[dict[str, Any]]) -> None:
        """Rebuild the state from rows already logged (a checkpoint saved without a rule):
        the rule is a function of the values it was fed, so this is the state it had."""
        for row in rows:
            self.observe(dict(row))
