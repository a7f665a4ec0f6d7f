"""Typed, nested run configuration: TOML files, model presets and dotted overrides.

Resolution order, later wins: dataclass defaults < model preset (``models/<name>.toml``) <
the config file < ``--set key=value`` overrides. Unknown keys, wrong types and out-of-range
values raise :class:`~spikebench.errors.UserError` with one line naming the key, the value
and what is allowed, before anything runs.
"""

from spikebench.config.build import build, off_value, optional_key, value_at
from spikebench.config.load import (
    BUDGET_KEYS,
    MAX_DEPTH,
    PACKAGE_ROOT,
    REPO_ROOT,
    check_depth,
    from_dict,
    load,
    load_toml,
    parse_override,
    regular_file,
    resolve,
    resolve_flat,
)
from spikebench.config.schema import (
    CleanConfig,
    Config,
    CurriculumConfig,
    DataConfig,
    FaultConfig,
    ModelConfig,
    OptimConfig,
    PrecisionConfig,
    ResponseConfig,
    RunConfig,
    ScheduleConfig,
    SpikeConfig,
    TrainConfig,
    WarningConfig,
)

__all__ = [
    "BUDGET_KEYS", "MAX_DEPTH", "PACKAGE_ROOT", "REPO_ROOT", "CleanConfig", "Config", "CurriculumConfig",
    "DataConfig",
    "FaultConfig", "ModelConfig", "OptimConfig", "PrecisionConfig", "ResponseConfig",
    "RunConfig",
    "ScheduleConfig", "SpikeConfig", "TrainConfig", "WarningConfig", "build", "check_depth", "off_value", "optional_key", "from_dict", "load", "load_toml",
    "parse_override", "regular_file", "resolve", "resolve_flat", "value_at",
]
