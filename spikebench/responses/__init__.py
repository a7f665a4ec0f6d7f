"""Spike responses for a team's own training loop (or the Hugging Face Trainer).

- :class:`SkipStepOptimizer`: wraps any ``torch.optim.Optimizer``; an outlier step's update
  is skipped on the device (OLMo-core's skip-step, the built-in loop's detector).
- :class:`ZClipper`: ZClip adaptive gradient clipping, the built-in loop's code.
- :class:`LowerLR`: lowers the LR for a while after an early warning (a run's ``warning=``).
- :class:`Rollback`: decides when to go back to which kept state (PaLM's rollback, the
  built-in loop's trigger); the loop's own ``save``/``load`` keep and restore it.

See docs/responses.md, "In your own loop".
"""

from spikebench.responses.lower_lr import LowerLR
from spikebench.responses.rollback import Rollback, RolledBack
from spikebench.responses.skip_step import SkipStepOptimizer
from spikebench.responses.zclip import ZClipper

__all__ = ["LowerLR", "RolledBack", "Rollback", "SkipStepOptimizer", "ZClipper"]
