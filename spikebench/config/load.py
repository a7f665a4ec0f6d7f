"""Resolving a run's config: dataclass defaults < model preset < the file < ``--set``.

Presets are looked up in ``./models`` and then the repository's ``models/``; ``--set``
values parse as TOML literals. The result is checked (:meth:`Config.check`) before
anything runs.
"""

from __future__ import annotations

import datetime
import json
import os
import stat
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
    value = _parse_literal(key, raw.strip())
    check_depth(value, f"--set {key}")
    _no_dates(value, f"--set {key}")
    return key.split("."), value


# How deep a config, sweep file, suite, run's config.json or baseline may nest its tables and
# arrays: the deepest real one nests 5 levels; past this a file is refused before anything
# walks it (a recursive walk of a very deep one exceeds Python's recursion limit).
MAX_DEPTH = 32


def _parse_literal(key: str, raw: str) -> Any:
    """A ``--set`` value as a TOML literal, else the plain string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
    except RecursionError:
        raise UserError(f"--set {key}={raw[:40]}...: nested too deeply (at most "
                        f"{MAX_DEPTH} levels of arrays and tables)") from None
    except ValueError:  # an integer past Python's 4300-digit conversion limit
        digits = sum(c.isdigit() for c in raw)
        raise UserError(f"--set {key}={raw[:20]}...: a number of {digits} digits; every "
                        "setting takes a number of at most 4300 digits (most far fewer)"
                        ) from None


def depth(value: Any) -> int:
    """How many levels of tables and arrays ``value`` nests (0 for a plain value); walked
    without recursion, and stopping one level past :data:`MAX_DEPTH`."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def check_depth(value: Any, where: str) -> None:
    """Refuse a value nested deeper than :data:`MAX_DEPTH` levels, naming ``where``."""
    if depth(value) > MAX_DEPTH:
        raise UserError(f"{where}: nested more than {MAX_DEPTH} levels deep (tables and "
                        f"arrays); at most {MAX_DEPTH} are allowed")


def regular_file(path: Path, what: str) -> None:
    """Refuse a path that is missing, a folder, or not a regular file (a FIFO, a device, a
    socket: reading one could block or never end), without opening it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{what} {str(path)[:200]!r}: not found") from None
    except (OSError, ValueError) as e:  # a name too long, a NUL in the path, no permission
        why = getattr(e, "strerror", None) or str(e)
        raise UserError(f"{what} {str(path)[:200]!r}: cannot be read ({why})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{what} {str(path)[:200]!r}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                else "a character device" if stat.S_ISCHR(st.st_mode)
                else "a block device" if stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a plain file")
        raise UserError(f"{what} {str(path)[:200]!r}: is {kind}; must be a regular file")


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
        is_dir = p.is_dir()
    except (OSError, ValueError) as e:  # a name too long, a NUL in the path
        raise UserError(f"{what} file {str(p)[:200]!r}: cannot be read ({e})") from None
    if is_dir:
        raise UserError(f"{what} file {str(p)!r}: is a folder, not a TOML file")
    regular_file(p, f"{what} file")
    try:
        # utf-8-sig: a byte-order mark some editors write is not part of the TOML.
        data = tomllib.loads(p.read_bytes().decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{what} file {str(p)!r}: not valid TOML ({e})") from None
    except RecursionError:
        raise UserError(f"{what} file {str(p)!r}: nested more than {MAX_DEPTH} levels deep "
                        f"(tables and arrays); at most {MAX_DEPTH} are allowed") from None
    except OSError as e:  # a name too long, a NUL in the path
        raise UserError(f"{what} file {str(p)[:200]!r}: cannot be read ({e})") from None
    except ValueError as e:  # an integer past Python's 4300-digit conversion limit
        raise UserError(f"{what} file {str(p)!r}: holds a number too long to read ("
                        f"{str(e).split(':')[0]}); at most 4300 digits") from None
    check_depth(data, f"{what} file {str(p)!r}")
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
    regular_file(p, "config file")
    try:
        data = json.loads(p.read_bytes().decode("utf-8-sig"))
    except RecursionError:
        raise UserError(f"config file {str(p)!r}: nested more than {MAX_DEPTH} levels deep "
                        f"(objects and arrays); at most {MAX_DEPTH} are allowed") from None
    except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON
        raise UserError(f"config file {str(p)[:200]!r}: not a valid JSON config ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"config file {str(p)!r}: not a JSON object")
    check_depth(data, f"config file {str(p)!r}")
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
