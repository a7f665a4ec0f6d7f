"""Lower the LR on an early warning: act before a spike rather than after it.

The response to a warning (:mod:`spikebench.precursors.rule`, a run's ``warning=``): for
the ``steps`` steps after a warning, scale the LR by ``factor``; a warning inside that
stretch extends it. In your own loop:

.. code-block:: python

    lower = LowerLR(factor=0.5, steps=50)
    run = spikebench.init(warning=rule)
    sb = SpikebenchLoop(run, on_warning=lambda w: lower.warn(w["step"]))
    for step in range(1, steps + 1):
        for g in opt.param_groups:
            g["lr"] = schedule(step) * lower.factor(step)
        ...

The warning comes at a read-back (every ``sync_every`` logged steps), so the LR drops at
most that many steps after the warning's step. The built-in loop does the same with
``[warning] response = "lower_lr"``. Host arithmetic only: no device work, no sync.
"""

from __future__ import annotations

from typing import Any


class LowerLR:
    """``LowerLR(factor=0.5, steps=50)``: :meth:`warn` at a warning's step, :meth:`factor`
    for the LR's scale at a step (``factor`` until ``steps`` steps after the last warning,
    else 1)."""

    def __init__(self, factor: float = 0.5, steps: int = 50):
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not (
                0 < factor < 1):
            raise ValueError(f"LowerLR: factor = {factor!r}; a number in (0, 1)")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"LowerLR: steps = {steps!r}; an integer >= 1")
        self.scale, self.steps = float(factor), steps
        self.until = 0  # the last step at the lowered LR
        self.warnings = 0  # warnings acted on
        self.lowered: list[list[int]] = []  # [first, last] step of each stretch

    def warn(self, step: int) -> None:
        """A warning at ``step``: the LR is lowered from the next step for ``steps`` steps."""
        self.warnings += 1
        first, last = step + 1, step + self.steps
        if self.lowered and first <= self.lowered[-1][1] + 1:
            self.lowered[-1][1] = last  # extends the stretch it falls in
        else:
            self.lowered.append([first, last])
        self.until = last

    def factor(self, step: int) -> float:
        """The LR's scale at ``step``."""
        return self.scale if self.lowered and self.lowered[-1][0] <= step <= self.until \
            else 1.0

    def summary(self) -> dict[str, Any]:
        """``lowered``: [first, last] step of each stretch as the warnings set it (a loop
        that hears a warning at a later read-back lowers the LR from there)."""
        return {"kind": "lower_lr", "factor": self.scale, "steps": self.steps,
                "warnings": self.warnings, "lowered": [list(x) for x in self.lowered]}

    def state_dict(self) -> dict[str, Any]:
        return {"until": self.until, "warnings": self.warnings,
                "lowered": [list(x) for x in self.lowered]}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.until, self.warnings = int(d["until"]), int(d["warnings"])
        self.lowered = [[int(a), int(b)] for a, b in d["lowered"]]
