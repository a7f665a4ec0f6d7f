"""Building the typed configs from plain dicts: coercion, ranges, one-line errors.

A key the schema does not have, a value of the wrong type, NaN or infinity, or a value
outside its range raises :class:`~spikebench.errors.UserError` naming the dotted key, the
value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal

from spikebench.errors import UserError

_OFF = ("off", "none", "null")


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        args = typing.get_args(tp)
        return repr(args[0]) if len(args) == 1 else "one of " + ", ".join(map(repr, args))
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        parts = [_describe(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (' or "off"' if type(None) in args else "")
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
        if len(inner) == 1:
            return _coerce(key, value, inner[0])
        for a in inner:  # several kinds (true, false or "auto"): the first that takes it
            try:
                return _coerce(key, value, a)
            except UserError:
                continue
        raise UserError(f"{key} = {value!r}: must be {_describe(tp)}")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise UserError(f"{key} = {value!r}: must be {_describe(tp)}")
        return value
    if isinstance(value, str) and "\x00" in value:
        raise UserError(f"{key} = {value!r}: must not contain a NUL character")
    ok = (
        (tp is bool and isinstance(value, bool))
        or (tp is int and isinstance(value, int) and not isinstance(value, bool))
        or (tp is float and isinstance(value, int | float) and not isinstance(value, bool))
        or (tp is str and isinstance(value, str))
    )
    if not ok:
        raise UserError(f"{key} = {value!r}: must be {_describe(tp)}")
    if tp is float:
        try:
            value = float(value)
        except OverflowError:  # an integer past the largest float
            raise UserError(f"{key} = {str(value)[:20]}... ({len(str(value))} digits): must "
                            "be a finite number (at most about 1.8e308)") from None
        if not math.isfinite(value):  # NaN slips past every range comparison
            raise UserError(f"{key} = {value!r}: must be a finite number")
    return value


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


def optional_key(cls: type, key: str) -> bool:
    """Whether dotted ``key`` of dataclass ``cls`` takes None ("off"), e.g. ``optim.clip``."""
    tp: Any = cls
    for part in key.split("."):
        if not dataclasses.is_dataclass(tp):
            return False
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return False
        tp = hints[part]
    return type(None) in typing.get_args(tp)


def value_at(cfg: Any, key: str) -> Any:
    """The value of dotted ``key`` in a built config (``optim.clip``); AttributeError names
    the first part it lacks."""
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def off_value(value: Any) -> bool:
    """"off", "none" or "null", as a config reads them for an optional key."""
    return value is None or (isinstance(value, str) and value.lower() in _OFF)

