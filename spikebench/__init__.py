"""spikebench: measure and tame loss spikes in language-model pretraining."""

from spikebench.config import Config, load
from spikebench.errors import UserError

__all__ = ["Config", "UserError", "load"]
__version__ = "0.1.0"
