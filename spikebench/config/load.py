"""Resolving a run's config: dataclass defaults < model preset < the file < ``--set``.

Presets are looked up in ``./models`` and then the repository's ``models/``; ``--set``
values parse as TOML literals. The result is checked (:meth:`Config.check`) before
anything runs.
"""

from __future__ import annotations

import datetime
import json
import tomllib
from pathlib import Path
from typing import Any

from spikebench.config.build import build
from spikebench.config.schema import Config, ModelConfig
from spikebench.errors import UserError

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = PACKAGE_ROOT.parent


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
    _no_dates(value, f"--set {key}")
    return key.split("."), value


def _no_dates(value: Any, where: str) -> None:
    """TOML dates and times have no use in a config, and JSON (every file a run writes)
    has no type for them: refuse them where they are written."""
    if isinstance(value, datetime.date | datetime.time):
        raise UserError(f"{where} = {value}: a TOML date or time; no setting takes one "
                        "(quote it for a string)")
    if isinstance(value, dict):
        for k, v in value.items():
            _no_dates(v, f"{where}.{k}" if where else k)
    elif isinstance(value, list):
        for v in value:
            _no_dates(v, where)


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
    try:
        is_dir, is_file = p.is_dir(), p.is_file()
    except (OSError, ValueError) as e:  # a name too long, a NUL in the path
        raise UserError(f"{what} file {str(p)[:200]!r}: cannot be read ({e})") from None
    if is_dir:
        raise UserError(f"{what} file {str(p)!r}: is a folder, not a TOML file")
    if not is_file:
        raise UserError(f"{what} file {str(p)!r}: not found")
    try:
        # utf-8-sig: a byte-order mark some editors write is not part of the TOML.
        data = tomllib.loads(p.read_bytes().decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{what} file {str(p)!r}: not valid TOML ({e})") from None
    except (OSError, ValueError) as e:  # a name too long, a NUL in the path
        raise UserError(f"{what} file {str(p)[:200]!r}: cannot be read ({e})") from None
    try:
        _no_dates(data, "")
    except UserError as e:
        raise UserError(f"{what} file {str(p)!r}: {e}") from None
    return data


def preset_path(name: str) -> Path:
    """A preset is a path to a TOML file, or a name looked up in ./models then the repo's."""
    if name.endswith(".toml"):
        return Path(name)
    for root in (Path.cwd() / "models", REPO_ROOT / "models"):
        try:
            if (root / f"{name}.toml").is_file():
                return root / f"{name}.toml"
        except (OSError, ValueError):  # a name too long for the file system
            break
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
    # A budget on the command line replaces the file's; "off" for one budget is no budget.
    if isinstance(over.get("train"), dict) and isinstance(raw.get("train"), dict) and any(
            over["train"].get(k) not in (None, "off", "none", "null")
            for k in ("steps", "tokens") if k in over["train"]):
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
    if not isinstance(pdata.get("model", {}), dict):
        raise UserError(f"model preset {preset!r}: model = {pdata['model']!r}: must be a table")
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


def load_run_json(path: str | Path) -> dict[str, Any]:
    """A run's saved ``config.json`` as a config table, so any run can be replayed. Its
    ``train.steps`` was worked out from ``train.tokens`` when that is set: the tokens stay
    the budget."""
    p = Path(path)
    try:
        data = json.loads(p.read_bytes().decode("utf-8-sig"))
    except FileNotFoundError:
        raise UserError(f"config file {str(p)!r}: not found") from None
    except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON
        raise UserError(f"config file {str(p)[:200]!r}: not a valid JSON config ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"config file {str(p)!r}: not a JSON object")
    train = data.get("train")
    if isinstance(train, dict) and train.get("tokens") is not None:
        data["train"] = {k: v for k, v in train.items() if k != "steps"}
    return data


def load(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a TOML config file, or a run's ``config.json`` (or none: the defaults), with
    ``key=value`` overrides."""
    if not path:
        raw: dict[str, Any] = {}
    elif str(path).endswith(".json"):
        raw = load_run_json(path)
    else:
        raw = load_toml(path)
    return resolve(raw, overrides)


def from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a resolved config, e.g. from a run's config.json (no preset lookup)."""
    cfg = build(Config, data)
    cfg.check()
    return cfg
