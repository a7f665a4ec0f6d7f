"""spikebench: measure and tame loss spikes in language-model pretraining.

The run API for a team's own training loop: ``spikebench.init``, ``Run``, ``Decision``,
``TrialPruned`` (:mod:`spikebench.api`), imported on first use so the CLI stays light.
"""

from typing import Any

from spikebench.config import Config, load
from spikebench.errors import UserError

__all__ = ["Config", "Decision", "Run", "TrialPruned", "UserError", "init", "load"]
__version__ = "0.1.0"
_API = ("Decision", "Run", "TrialPruned", "init")


def __getattr__(name: str) -> Any:
    if name in _API:
        import spikebench.api as api

        return getattr(api, name)
    raise AttributeError(f"module 'spikebench' has no attribute {name!r}")
