"""spikebench: measure and tame loss spikes in language-model pretraining."""

from spikebench.config import Config, ConfigError, load

__all__ = ["Config", "ConfigError", "load"]
__version__ = "0.1.0"
