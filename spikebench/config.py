"""Typed, nested run configuration: TOML files, model presets and dotted overrides.

Resolution order, later wins: dataclass defaults < model preset (``models/<name>.toml``) <
the config file < ``--set key=value`` overrides. Unknown keys, wrong types and out-of-range
values raise :class:`UserError` with one line naming the key, the value and what is allowed,
before anything runs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spikebench.errors import UserError

PACKAGE_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_ROOT.parent


def _rng(lo: float | None = None, hi: float | None = None, *, lo_open=False, hi_open=False):
    return {"range": (lo, hi, lo_open, hi_open)}


@dataclass
class ModelConfig:
    preset: str = "gpt-tiny"
    # `package.module:Class`; the class is built as Class(model_config) and its forward
    # takes (idx, targets) and returns (logits, loss).
    cls: str = "spikebench.model:GPT"
    n_layer: int = field(default=2, metadata=_rng(1))
    n_head: int = field(default=2, metadata=_rng(1))
    n_embd: int = field(default=64, metadata=_rng(1))
    block_size: int = field(default=128, metadata=_rng(2))
    vocab_size: int = field(default=256, metadata=_rng(2))
    dropout: float = field(default=0.0, metadata=_rng(0.0, 1.0, hi_open=True))
    bias: bool = False
    qk_norm: bool = False
    # Coefficient of the output log-partition penalty z_loss * mean(logsumexp(logits)**2).
    z_loss: float = field(default=0.0, metadata=_rng(0.0))
    init: Literal["normal", "depth_scaled"] = "normal"
    init_std: float = field(default=0.02, metadata=_rng(0.0, lo_open=True))

    def check(self) -> None:
        if self.n_embd % self.n_head:
            raise UserError(
                f"model.n_embd = {self.n_embd}: must be divisible by model.n_head = {self.n_head}"
            )


@dataclass
class DataConfig:
    # "stdlib" (the embedded corpus), a text/.jsonl file or folder, or a nanoGPT .bin memmap.
    corpus: str = "stdlib"
    text_field: str = "text"
    # Cap on the bytes read from a text corpus (the stdlib is ~30 MB; a few MB is plenty).
    max_bytes: int = field(default=4_000_000, metadata=_rng(1024))
    val_fraction: float = field(default=0.05, metadata=_rng(0.0, 0.5, lo_open=True))
    seq_len: int = field(default=128, metadata=_rng(2))
    batch_size: int = field(default=16, metadata=_rng(1))


@dataclass
class OptimConfig:
    lr: float = field(default=3e-3, metadata=_rng(0.0, lo_open=True))
    beta1: float = field(default=0.9, metadata=_rng(0.0, 1.0, hi_open=True))
    beta2: float = field(default=0.95, metadata=_rng(0.0, 1.0, hi_open=True))
    eps: float = field(default=1e-8, metadata=_rng(0.0, lo_open=True))
    weight_decay: float = field(default=0.1, metadata=_rng(0.0))
    wd_embeddings: bool = False
    wd_norms: bool = False
    # Global-norm clipping threshold; None ("off" in TOML / --set) disables it.
    clip: float | None = field(default=None, metadata=_rng(0.0, lo_open=True))
    grad_accum: int = field(default=1, metadata=_rng(1))


@dataclass
class ScheduleConfig:
    kind: Literal["cosine", "linear", "constant"] = "cosine"
    warmup_ratio: float = field(default=0.0, metadata=_rng(0.0, 1.0))
    min_lr_ratio: float = field(default=0.1, metadata=_rng(0.0, 1.0))


@dataclass
class PrecisionConfig:
    # fp16 uses dynamic loss scaling; fp16_noscale shows why that is needed.
    mode: Literal["fp32", "bf16", "fp16", "fp16_noscale"] = "fp32"
    # auto: real autocast on CUDA, emulated rounding on CPU (real half matmuls are many times
    # slower than fp32 on most CPUs; benchmarks/precision_speed.py measures it).
    impl: Literal["auto", "real", "emulated"] = "auto"
    init_scale: float = field(default=2.0**16, metadata=_rng(0.0, lo_open=True))
    # Emulated attention: "kernel" rounds the softmax probabilities as flash kernels do;
    # "io" rounds only its inputs and output (cheaper, and more precise than the real thing).
    emulated_attention: Literal["kernel", "io"] = "kernel"


@dataclass
class CurriculumConfig:
    # seqlen: sequence-length warmup (Li et al. 2022); easy_first: low-entropy windows first.
    kind: Literal["off", "seqlen", "easy_first", "both"] = "off"
    # Fraction of the steps over which the curriculum ramps to the full data.
    ratio: float = field(default=0.25, metadata=_rng(0.0, 1.0, lo_open=True))
    seqlen_start: int = field(default=16, metadata=_rng(2))
    # easy_first draws pool_factor x batch candidate windows and keeps the easiest.
    pool_factor: int = field(default=4, metadata=_rng(1))


@dataclass
class FaultConfig:
    # A burst of bad data in the batch stream ("stream") or planted in the corpus ("corpus").
    burst: Literal["none", "random_bytes", "repeat", "domain"] = "none"
    target: Literal["stream", "corpus"] = "stream"
    at: float = field(default=0.5, metadata=_rng(0.0, 1.0))
    length: int = field(default=20, metadata=_rng(1))
    rows: float = field(default=1.0, metadata=_rng(0.0, 1.0, lo_open=True))
    # corpus target: share of the training corpus replaced by contamination segments.
    corpus_share: float = field(default=0.02, metadata=_rng(0.0, 0.5, lo_open=True))
    segment_bytes: int = field(default=2048, metadata=_rng(16))
    # Text of the "domain" burst; empty: generated numeric tables.
    domain_corpus: str = ""
    # Multiply the LR by lr_shock_factor for lr_shock_steps steps from fraction lr_shock_at.
    lr_shock_at: float | None = field(default=None, metadata=_rng(0.0, 1.0))
    lr_shock_factor: float = field(default=10.0, metadata=_rng(0.0, lo_open=True))
    lr_shock_steps: int = field(default=10, metadata=_rng(1))


@dataclass
class TrainConfig:
    steps: int = field(default=300, metadata=_rng(1))
    # A budget in tokens instead of steps: steps = ceil(tokens / (batch_size * seq_len)),
    # worked out when the config is resolved (a seq-len curriculum then sees fewer tokens).
    tokens: int | None = field(default=None, metadata=_rng(1))
    seed: int = field(default=0, metadata=_rng(0))
    device: str = "auto"
    # torch intra-op threads; 0 leaves torch's default.
    threads: int = field(default=0, metadata=_rng(0))
    eval_every: int = field(default=50, metadata=_rng(1))
    eval_batches: int = field(default=4, metadata=_rng(1))
    # Metrics stay on the device and are read back once per log_every steps.
    log_every: int = field(default=10, metadata=_rng(1))
    # Instability precursors (attention logits, log Z, update/weight ratio) every N steps.
    probe_every: int = field(default=25, metadata=_rng(1))
    progress: bool = True


@dataclass
class SpikeConfig:
    # The rule the in-loop monitor and the scores use (see spikebench.spikes.rules.RULES).
    detector: Literal["default", "zscore", "olmo", "olmo_online", "loss_ratio", "persistent"] = (
        "default")
    # Flagged steps with at most `gap` unflagged log rows between them form one event.
    gap: int = field(default=5, metadata=_rng(0))
    # Validation loss for time-to-target (AlgoPerf: first evaluation at or below it); None: off.
    target_loss: float | None = field(default=None, metadata=_rng(0.0, lo_open=True))


@dataclass
class RunConfig:
    out_dir: str = "results/runs"
    name: str = ""


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    spikes: SpikeConfig = field(default_factory=SpikeConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def check(self) -> None:
        self.model.check()
        if self.data.seq_len > self.model.block_size:
            raise UserError(
                f"data.seq_len = {self.data.seq_len}: must be <= model.block_size = "
                f"{self.model.block_size} (the model's context)"
            )
        if self.curriculum.kind in ("seqlen", "both") and (
            self.curriculum.seqlen_start > self.data.seq_len
        ):
            raise UserError(
                f"curriculum.seqlen_start = {self.curriculum.seqlen_start}: must be <= "
                f"data.seq_len = {self.data.seq_len}"
            )
        if self.data.batch_size % self.optim.grad_accum:
            raise UserError(
                f"optim.grad_accum = {self.optim.grad_accum}: must divide data.batch_size = "
                f"{self.data.batch_size}"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)


# ----------------------------------------------------------------------------------------
# Building dataclasses from plain dicts, with one-line errors.

_OFF = ("off", "none", "null")


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        parts = [_describe(a) for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(parts) + ' or "off"'
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, str(tp)
    )


def _coerce(key: str, value: Any, tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if type(None) in args and (value is None or str(value).lower() in _OFF):
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(key, value, inner[0]) if len(inner) == 1 else value
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise UserError(f"{key} = {value!r}: must be {_describe(tp)}")
        return value
    ok = (
        (tp is bool and isinstance(value, bool))
        or (tp is int and isinstance(value, int) and not isinstance(value, bool))
        or (tp is float and isinstance(value, int | float) and not isinstance(value, bool))
        or (tp is str and isinstance(value, str))
    )
    if not ok:
        raise UserError(f"{key} = {value!r}: must be {_describe(tp)}")
    if tp is float and not math.isfinite(value):  # NaN slips past every range comparison
        raise UserError(f"{key} = {value!r}: must be a finite number")
    return float(value) if tp is float else value


def _check_range(key: str, value: Any, meta: dict, optional: bool = False) -> None:
    if value is None or "range" not in meta:
        return
    lo, hi, lo_open, hi_open = meta["range"]
    bad = (lo is not None and (value <= lo if lo_open else value < lo)) or (
        hi is not None and (value >= hi if hi_open else value > hi)
    )
    if bad:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf" if hi is None else f"{hi:g}"
        off = ' or "off"' if optional else ""
        raise UserError(f"{key} = {value!r}: must be in {left}{lo_s}, {hi_s}{right}{off}")


def build(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a nested dict, rejecting unknown keys and bad values."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not isinstance(data, dict):
        raise UserError(f"{prefix.rstrip('.') or 'config'} = {data!r}: must be a table")
    kwargs = {}
    for key, value in data.items():
        name = prefix + key
        if key not in fields:
            allowed = ", ".join(fields)
            raise UserError(f"unknown key {name!r} (allowed here: {allowed})")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = build(tp, value, name + ".")
        else:
            kwargs[key] = _coerce(name, value, tp)
            optional = type(None) in typing.get_args(tp)
            _check_range(name, kwargs[key], fields[key].metadata, optional)
    return cls(**kwargs)


def _merge(base: dict, update: dict) -> dict:
    out = dict(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``'optim.lr=3e-3'`` -> (['optim', 'lr'], 0.003). Values parse as TOML, else as strings."""
    if "=" not in text:
        raise UserError(f"--set {text!r}: must look like key=value, e.g. optim.lr=3e-3")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise UserError(f"--set {text!r}: the key must be dotted, e.g. optim.lr")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.split("."), value


def _nest(items: list[tuple[list[str], Any, str]]) -> dict[str, Any]:
    """Nested tables from (dotted path, value, label for errors) items."""
    out: dict[str, Any] = {}
    for path, value, label in items:
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserError(f"{label}: {part} is not a table")
        node[path[-1]] = value
    return out


def overrides_to_dict(overrides: list[str]) -> dict[str, Any]:
    return _nest([(*parse_override(text), f"--set {text!r}") for text in overrides])


def load_toml(path: str | Path, what: str = "config") -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{what} file {str(p)!r}: not found")
    try:
        return tomllib.loads(p.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{what} file {str(p)!r}: not valid TOML ({e})") from None


def preset_path(name: str) -> Path:
    """A preset is a path to a TOML file, or a name looked up in ./models then the repo's."""
    if name.endswith(".toml"):
        return Path(name)
    for root in (Path.cwd() / "models", REPO_ROOT / "models"):
        if (root / f"{name}.toml").is_file():
            return root / f"{name}.toml"
    known = sorted(p.stem for p in (REPO_ROOT / "models").glob("*.toml"))
    raise UserError(f"model.preset = {name!r}: no such preset (known: {', '.join(known)})")


# The two ways to give a run's length; an override of either replaces the file's budget.
BUDGET_KEYS = ("train.steps", "train.tokens")


def unflatten(values: dict[str, Any]) -> dict[str, Any]:
    """``{"optim.lr": 1e-3}`` -> ``{"optim": {"lr": 1e-3}}``."""
    return _nest([(key.split("."), value, f"{key} = {value!r}") for key, value in values.items()])


def resolve(raw: dict[str, Any] | None = None, overrides: list[str] | None = None) -> Config:
    """Resolve a config dict (from a file) and ``--set`` strings into a checked :class:`Config`."""
    raw = dict(raw or {})
    over = overrides_to_dict(overrides or [])
    if isinstance(over.get("train"), dict) and isinstance(raw.get("train"), dict) and (
            {"steps", "tokens"} & set(over["train"])):
        raw["train"] = {k: v for k, v in raw["train"].items() if k not in ("steps", "tokens")}
    merged = _merge(raw, over)
    if not isinstance(merged.get("model", {}), dict):
        raise UserError(f"model = {merged['model']!r}: must be a table")
    preset = merged.get("model", {}).get("preset", ModelConfig.preset)
    if not isinstance(preset, str):
        raise UserError(f"model.preset = {preset!r}: must be a string")
    pdata = load_toml(preset_path(preset), "model preset")
    unknown = set(pdata) - {"model"}
    if unknown:
        raise UserError(f"model preset {preset!r}: only a [model] table allowed, got {unknown}")
    merged = _merge({"model": pdata.get("model", {})}, merged)
    merged.setdefault("model", {})["preset"] = preset
    cfg = build(Config, merged)
    if cfg.train.tokens is not None:
        if "steps" in merged.get("train", {}):
            raise UserError(f"train.tokens = {cfg.train.tokens}: set one budget, train.steps "
                            f"= {cfg.train.steps} or train.tokens, not both")
        per_step = cfg.data.batch_size * cfg.data.seq_len
        cfg.train.steps = -(-cfg.train.tokens // per_step)
    cfg.check()
    return cfg


def resolve_flat(values: dict[str, Any]) -> Config:
    """A checked :class:`Config` from flat dotted values (a sweep's base, arm and params);
    None is "off" for an optional key."""
    return resolve(unflatten(values))


def load(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a TOML config file (or none: the defaults) with ``key=value`` overrides."""
    raw = load_toml(path) if path else {}
    return resolve(raw, overrides)


def from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a resolved config, e.g. from a run's config.json (no preset lookup)."""
    cfg = build(Config, data)
    cfg.check()
    return cfg
