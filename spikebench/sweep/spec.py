"""Sweep definitions (``sweeps/*.toml``): parsed, checked and planned before anything runs.

A sweep file has four tables, and a fifth for a trainer of the team's own::

    [study]       name, trials (search trials), seeds, objective, target_loss, spike_limit,
                  spike_metric, sampler, pruner, storage, heartbeat_s, heartbeat_grace_s,
                  storage_retry_s, artifacts
    [config]      the base train config of every trial (the same keys as a train config)
    [space]       "dotted.key" = {low, high, log, off} | {choices = [...]} | {low, high, int}
    [comparison]  baseline = {...}, recipe = {...} | false, grid = {"key" = [values]},
                  [comparison.arms] name = {...}
    [trainer]     command (argv list or string, with macros), steps, eval_every, log, env,
                  grace_s: each seed runs the command (:mod:`.command`); [config], [space]
                  and the arms then name the trainer's own parameters, free-form, typed by
                  the values given

Every problem raises :class:`~spikebench.config.UserError` naming the file, the key, the
value and what is allowed. Each trial's config is resolved here once, so a bad value in an
arm or at an end of the search space is refused before the first trial starts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spikebench import config as cfgmod
from spikebench.errors import UserError
from spikebench.sweep.spec_errors import err, shown
from spikebench.sweep.trainer_table import parse_trainer

OBJECTIVES = ("multi", "single")
SAMPLERS = ("tpe", "random", "nsga2")
PRUNERS = ("none", "spike_tolerant_hyperband", "patient_hyperband", "median")
SPIKE_METRICS = ("severity", "events")
CLIP_ON = "/on"
# Keys every trial sets from the study itself: searching them would be overwritten.
SEEDED_KEYS = ("train.seed",)  # suffix of the boolean parameter that switches an "off"-able float on
# The strategy-table article's combined recipe, run by every study that does not declare its
# own: warmup 2-3% (2.5%), clipping at 1.0, bf16, curriculum on (sequence-length warmup).
ARTICLE_RECIPE: dict[str, Any] = {
    "schedule.warmup_ratio": 0.025,
    "optim.clip": 1.0,
    "precision.mode": "bf16",
    "curriculum.kind": "seqlen",
}
# [trainer]: its keys, and the macros its command may use (each seed's values).

# [study] defaults for shared storages (heartbeats as Optuna's examples; a restart of the
# database server takes seconds, so a minute of retries outlasts it).
HEARTBEAT_S, HEARTBEAT_GRACE_S, STORAGE_RETRY_S = 30, 120, 60.0


@dataclass(frozen=True)
class Param:
    """One search-space dimension over a config key.

    ``choices`` makes it categorical; otherwise a float (or int) range, optionally log-scale.
    ``off`` adds the value None ("off", e.g. no clipping) through a boolean companion
    parameter ``<key>/on``, because Optuna cannot mix a category with a continuous range.
    """

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    off: bool = False
    choices: tuple | None = None

    def contains(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        if value is None:
            return self.off
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return self.low <= value <= self.high

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(json.dumps(c) for c in self.choices)
        text = f"{'int' if self.integer else 'float'} in [{self.low:g}, {self.high:g}]"
        text += " log-uniform" if self.log else ""
        return text + (' or "off"' if self.off else "")

    def fixed(self, value: Any) -> dict[str, Any]:
        """The Optuna parameters that pin this dimension to ``value`` (for enqueued trials)."""
        if self.off:
            return {self.key + CLIP_ON: False} if value is None else {
                self.key + CLIP_ON: True, self.key: value}
        return {self.key: value}


@dataclass
class SweepSpec:
    path: str
    name: str
    trials: int
    seeds: list[int]
    objective: Literal["multi", "single"]
    target_loss: float
    spike_limit: float
    spike_metric: str
    sampler: str
    pruner: str
    storage: str
    base: dict[str, Any]  # flat dotted overrides of the base config
    space: list[Param]
    arms: dict[str, dict[str, Any]]  # arm name -> flat overrides (baseline first, recipe last)
    steps: int = 0
    eval_every: int = 0
    notes: str = ""
    # True when the recipe arm is ARTICLE_RECIPE because the file declares none.
    default_recipe: bool = False
    # [comparison] grid: every arm was crossed with these values ({"optim.lr": [...]}); the
    # arms at the base config's values keep their plain names.
    grid: dict[str, list] = field(default_factory=dict)
    # The sampler's seed in the driver (workers on a shared study draw their own).
    sampler_seed: int = 0
    # [trainer]: the command each seed runs (empty: the built-in engine trains).
    trainer: dict[str, Any] = field(default_factory=dict)
    # Shared storages: how often a running trial beats, after how long without a beat it is
    # failed and retried elsewhere, and how long a storage call is retried while the database
    # is unreachable (:mod:`.resilience`). Stored with the study, so all workers agree.
    heartbeat_s: int = HEARTBEAT_S
    heartbeat_grace_s: int = HEARTBEAT_GRACE_S
    storage_retry_s: float = STORAGE_RETRY_S
    # An Optuna artifact store for each seed's full logs (a shared path or s3://bucket;
    # "": they stay on the worker). :mod:`spikebench.study.artifacts`.
    artifacts: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        # Drop unset fields only: `v not in (None, False)` would also drop a bound of 0.
        d["space"] = [{k: v for k, v in dataclasses.asdict(p).items()
                       if v is not None and v is not False} for p in self.space]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepSpec:
        """The spec a study stored (:meth:`to_dict`); raises TypeError for a field this
        version does not know. Older versions stored an empty ``extra`` and dropped a
        dimension's zero bounds; both still load."""
        d = {k: v for k, v in d.items() if k != "extra"}
        d["space"] = [Param(**{**p, "choices": tuple(p["choices"])}) if "choices" in p
                      else Param(**{"low": 0.0, "high": 0.0, **p}) for p in d["space"]]
        return cls(**d)


def flatten(table: dict[str, Any], prefix: str = "", *, path: str = "",
            where: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 1}, "train.steps": 5}`` -> ``{"optim.lr": 1, "train.steps": 5}``.

    A key given twice, in a table and dotted (``optim = {lr = 1}`` and ``"optim.lr" = 2``),
    is refused: TOML allows both, and one would be dropped without a word. ``path`` and
    ``where`` (the file, the table: ``config.``) name it in the message."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = prefix + key
        items = flatten(value, name + ".", path=path, where=where).items() if isinstance(
            value, dict) else [(name, value)]
        for k, v in items:
            if k in out:
                raise err(path, where + k, v, f"given twice (also as {shown(out[k])}): "
                           "give each key once, as a table or as a quoted dotted key")
            out[k] = v
    return out


def resolve_config(base: dict[str, Any], *layers: dict[str, Any]) -> cfgmod.Config:
    """The config of a trial: the base, then each layer (arm, params) over it."""
    merged = dict(base)
    for layer in layers:
        merged.update(layer)
    return cfgmod.resolve_flat(merged)


def one_value(path: str, where: str, key: str, value: Any) -> None:
    """A sweep searches or crosses single values: a key naming a table of the config
    (``optim``) is refused here, before its table reaches a message as an internal object."""
    node: Any = cfgmod.Config
    for part in key.split("."):
        hints = typing.get_type_hints(node) if dataclasses.is_dataclass(node) else {}
        if part not in hints:
            return  # not a config key at all: the config check names it
        node = hints[part]
    if dataclasses.is_dataclass(node):
        fields = [f.name for f in dataclasses.fields(node)]
        raise err(path, where, value, f"{key} is a table of the config, not one value: "
                   f"name one of its keys ({', '.join(f'{key}.{f}' for f in fields)})")


def _get(table: dict, key: str, path: str, kind: type | tuple, default: Any, allowed: str):
    value = table.get(key, default)
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise err(path, f"study.{key}", value, allowed)
    return value


def _parse_param(path: str, key: str, spec: Any, free: bool = False) -> Param:
    where = f"space.{json.dumps(key)}"
    if not isinstance(spec, dict):
        raise err(path, where, spec, "must be a table {low, high[, log, off, int]} or {choices}")
    unknown = set(spec) - {"low", "high", "log", "off", "int", "choices"}
    if unknown:
        hint = ""
        if all(isinstance(v, dict) for v in spec.values()):
            inner = sorted(spec)[0]
            dotted = json.dumps(f"{key}.{inner}", ensure_ascii=False)  # one line, always
            hint = (f"; a dotted key must be quoted: {dotted} = {{...}}, not "
                    f"{dotted[1:-1]} = {{...}}")
        raise err(path, where, spec, f"unknown field {sorted(unknown)[0]!r} "
                   "(allowed: low, high, log, off, int, choices)" + hint)
    if key in SEEDED_KEYS:
        raise err(path, where, spec, f"{key} is set by study.seeds for every trial; it cannot "
                   "be searched")
    if not free:
        one_value(path, where, key, spec)
    for flag in ("log", "off", "int"):
        if flag in spec and not isinstance(spec[flag], bool):
            raise err(path, f"{where}.{flag}", spec[flag], "must be true or false")
    if "choices" in spec:
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise err(path, where + ".choices", choices, "must be a non-empty list")
        if not free and cfgmod.optional_key(cfgmod.Config, key):  # "off" is None
            choices = [None if cfgmod.off_value(c) else c for c in choices]
        # Optuna finds a choice by equality: a repeat (also 1 and 1.0, "off" and "none")
        # would be drawn twice as often, and report a value under the other's index.
        for i, c in enumerate(choices):
            if any(c == d for d in choices[:i]):
                raise err(path, where + ".choices", spec["choices"],
                           f"must be distinct values ({shown(spec['choices'][i])} repeats "
                           "an earlier choice)")
        return Param(key, choices=tuple(choices))
    low, high = spec.get("low"), spec.get("high")
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise err(path, f"{where}.{name}", v, "must be a finite number")
    if low > high:
        raise err(path, where, spec, "low must be <= high")
    if spec.get("int", False):
        for name, v in (("low", low), ("high", high)):
            if v != int(v):  # Optuna would draw from the truncated range without a word
                raise err(path, f"{where}.{name}", v, "must be a whole number with int = true")
    log = spec.get("log", False)
    if log and low <= 0:
        raise err(path, f"{where}.low", low, "must be > 0 on a log scale")
    return Param(key, float(low), float(high), bool(log), bool(spec.get("int", False)),
                 bool(spec.get("off", False)))


def load_sweep(path: str | Path, overrides: list[str] | None = None, *,
               extra_tables: tuple[str, ...] = ()) -> SweepSpec:
    """Parse and check a sweep file; ``overrides`` are ``--set`` strings for ``[config]``;
    ``extra_tables`` are tables a caller reads itself (a bench suite's ``[bench]``)."""
    # Imported here: the comparison table reads this module's Param and config helpers.
    from spikebench.sweep.comparison_table import (
        check_one_budget,
        cross,
        parse_comparison,
        parse_grid,
    )

    path = str(path)
    raw = cfgmod.load_toml(path, "sweep")
    tables = ("study", "config", "space", "comparison", "trainer", *extra_tables)
    unknown = set(raw) - set(tables)
    if unknown:
        raise UserError(f"{path}: unknown table {sorted(unknown)[0]!r} "
                          f"(allowed: {', '.join(tables)})")
    for table in ("study", "config", "space", "comparison", "trainer"):
        if table in raw and not isinstance(raw[table], dict):
            raise err(path, table, raw[table], "must be a table")
    st = raw.get("study", {})
    allowed_study = {"name", "trials", "seeds", "objective", "target_loss", "spike_limit",
                     "spike_metric", "sampler", "sampler_seed", "pruner", "storage", "notes",
                     "heartbeat_s", "heartbeat_grace_s", "storage_retry_s", "artifacts"}
    if set(st) - allowed_study:
        bad = sorted(set(st) - allowed_study)[0]
        raise UserError(f"{path}: unknown key 'study.{bad}' (allowed: "
                          + ", ".join(sorted(allowed_study)) + ")")
    name = _get(st, "name", path, str, Path(path).stem, "must be a string")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", name):
        # The name becomes a folder: keep it to one safe path component.
        raise err(path, "study.name", name, "must be letters, digits, '.', '_' or '-' "
                   "(a folder name)")
    trials = _get(st, "trials", path, int, 0, "must be an integer >= 0")
    if trials < 0:
        raise err(path, "study.trials", trials, "must be an integer >= 0")
    seeds = st.get("seeds", [0])
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
            or len(set(seeds)) != len(seeds)):
        raise err(path, "study.seeds", seeds, "must be a list of distinct integers >= 0")
    objective = _get(st, "objective", path, str, "multi",
                     f"must be one of {', '.join(OBJECTIVES)}")
    if objective not in OBJECTIVES:
        raise err(path, "study.objective", objective, f"must be one of {', '.join(OBJECTIVES)}")
    target = st.get("target_loss")
    if (isinstance(target, bool) or not isinstance(target, int | float)
            or not 0 < target < math.inf):
        raise err(path, "study.target_loss", target, "must be a validation loss > 0")
    spike_limit = _get(st, "spike_limit", path, (int, float), 2, "must be a number >= 0")
    if not 0 <= spike_limit < math.inf:
        raise err(path, "study.spike_limit", spike_limit, "must be a number >= 0")
    spike_metric = _get(st, "spike_metric", path, str, "severity",
                        f"must be one of {', '.join(SPIKE_METRICS)}")
    if spike_metric not in SPIKE_METRICS:
        raise err(path, "study.spike_metric", spike_metric,
                   f"must be one of {', '.join(SPIKE_METRICS)}")
    sampler = _get(st, "sampler", path, str, "tpe", f"must be one of {', '.join(SAMPLERS)}")
    if sampler not in SAMPLERS:
        raise err(path, "study.sampler", sampler, f"must be one of {', '.join(SAMPLERS)}")
    sampler_seed = _get(st, "sampler_seed", path, int, 0, "must be an integer >= 0")
    if sampler_seed < 0:
        raise err(path, "study.sampler_seed", sampler_seed, "must be an integer >= 0")
    pruner = _get(st, "pruner", path, str, "none" if objective == "multi" else
                  "spike_tolerant_hyperband", f"must be one of {', '.join(PRUNERS)}")
    if pruner not in PRUNERS:
        raise err(path, "study.pruner", pruner, f"must be one of {', '.join(PRUNERS)}")
    if objective == "multi" and pruner != "none":
        raise err(path, "study.pruner", pruner,
                   'must be "none" with objective = "multi" (Optuna cannot prune '
                   "multi-objective studies)")
    storage = _get(st, "storage", path, str, "", "must be an Optuna storage URL")
    timing = _parse_timing(path, st)

    base = flatten(raw.get("config", {}), path=path, where="config.")
    for text in overrides or []:
        keys, value = cfgmod.parse_override(text)
        key = ".".join(keys)
        if key in cfgmod.BUDGET_KEYS:  # a budget on the command line replaces the file's
            for other in cfgmod.BUDGET_KEYS:
                base.pop(other, None)
        base[key] = value
    # With a [trainer], the parameters are the trainer's own: free-form, typed by the values
    # given, never resolved into spikebench's config.
    trainer = parse_trainer(path, raw["trainer"]) if "trainer" in raw else {}
    free = bool(trainer)
    base_cfg = None
    if not free:
        try:
            base_cfg = resolve_config(base)
        except UserError as e:
            raise UserError(f"{path}: config: {e}") from None

    space_raw = raw.get("space", {})
    if not isinstance(space_raw, dict):
        raise err(path, "space", space_raw, "must be a table")
    # Space keys are quoted dotted names ("optim.clip"), one dimension each.
    space = [_parse_param(path, k, v, free) for k, v in space_raw.items()]
    # Both ends of every range (and every choice) must make a valid config.
    for p in space if not free else []:
        probes = list(p.choices) if p.choices is not None else [
            int(p.low) if p.integer else p.low, int(p.high) if p.integer else p.high] + (
            [None] if p.off else [])
        for value in probes:
            try:
                resolve_config(base, {p.key: value})
            except UserError as e:
                if value is None:
                    raise err(path, f"space.{json.dumps(p.key)}.off", True,
                               f"{p.key} has no \"off\" (it must be set): drop off") from None
                raise UserError(f"{path}: space.{json.dumps(p.key)}: {e}") from None

    if not free:
        check_one_budget(path, base, space, {})  # the space first: it shapes the arms
    comparison = raw.get("comparison", {})
    arms = parse_comparison(path, comparison, base, base_cfg, space)
    grid = parse_grid(path, comparison.get("grid", {}), base, base_cfg, space)
    at = {k: value_at(base, base_cfg, k) for k in grid}
    for arm, values in arms.items():
        for k in grid:
            if k in values and values[k] != at[k]:
                raise err(path, f"comparison arm {json.dumps(arm)}: {k}", values[k],
                           f"{k} is on the comparison grid, which runs every arm at each of "
                           "its values: drop it from the arm")
    arms = cross(arms, grid, at)
    for arm, values in arms.items() if not free else ():  # a crossed arm must make a valid config too
        try:
            resolve_config(base, values)
        except UserError as e:
            raise UserError(f"{path}: comparison arm {json.dumps(arm)}: {e}") from None
    if not free:
        check_one_budget(path, base, space, arms)
    return SweepSpec(
        path=path, name=name, trials=trials, seeds=list(seeds), objective=objective,
        target_loss=float(target), spike_limit=float(spike_limit), spike_metric=spike_metric,
        sampler=sampler, sampler_seed=sampler_seed, pruner=pruner, storage=storage, base=base,
        space=space, arms=arms,
        steps=trainer["steps"] if free else base_cfg.train.steps,
        eval_every=trainer["eval_every"] if free else base_cfg.train.eval_every,
        notes=str(st.get("notes", "")),
        default_recipe=not free and isinstance(comparison, dict) and "recipe" not in comparison,
        grid=grid, trainer=trainer, **timing,
        artifacts=_get(st, "artifacts", path, str, "", "must be a folder path every worker "
                       "sees, or s3://<bucket>"),
    )


def _parse_timing(path: str, st: dict[str, Any]) -> dict[str, Any]:
    """``heartbeat_s``, ``heartbeat_grace_s`` (whole seconds: Optuna's heartbeat takes
    integers) and ``storage_retry_s``; the grace must outlast two beats, or a live trial
    whose beat is a little late would be failed as its worker's death."""
    beat = _get(st, "heartbeat_s", path, int, HEARTBEAT_S, "must be a whole number of "
                "seconds >= 1")
    if beat < 1:
        raise err(path, "study.heartbeat_s", beat, "must be a whole number of seconds >= 1")
    grace = _get(st, "heartbeat_grace_s", path, int, HEARTBEAT_GRACE_S,
                 f"must be a whole number of seconds >= 2 x heartbeat_s ({2 * beat})")
    if grace < 2 * beat:
        raise err(path, "study.heartbeat_grace_s", grace,
                   f"must be a whole number of seconds >= 2 x heartbeat_s ({2 * beat})")
    retry = _get(st, "storage_retry_s", path, (int, float), STORAGE_RETRY_S,
                 "must be a number of seconds in [0, 3600]")
    if not 0 <= retry <= 3600:
        raise err(path, "study.storage_retry_s", retry, "must be a number of seconds in "
                   "[0, 3600]")
    return {"heartbeat_s": beat, "heartbeat_grace_s": grace, "storage_retry_s": float(retry)}


def value_at(base: dict[str, Any], base_cfg: cfgmod.Config | None, key: str) -> Any:
    """The base's value of ``key``: the resolved config's, or a free-form trainer's."""
    return base.get(key) if base_cfg is None else cfgmod.value_at(base_cfg, key)
