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
import itertools
import json
import math
import re
import shlex
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spikebench import config as cfgmod
from spikebench.errors import UserError

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
TRAINER_KEYS = ("command", "steps", "eval_every", "log", "env", "grace_s")
MACROS = ("params_file", "params_json", "run_dir", "seed", "trial_dir", "checkpoint_dir")
ARGS_MACRO = "{args}"  # a whole element: the parameters as --key=value flags
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
                raise _err(path, where + k, v, f"given twice (also as {_shown(out[k])}): "
                           "give each key once, as a table or as a quoted dotted key")
            out[k] = v
    return out


def resolve_config(base: dict[str, Any], *layers: dict[str, Any]) -> cfgmod.Config:
    """The config of a trial: the base, then each layer (arm, params) over it."""
    merged = dict(base)
    for layer in layers:
        merged.update(layer)
    return cfgmod.resolve_flat(merged)


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, float) and not math.isfinite(value) else (
        json.dumps(value, default=str, ensure_ascii=False))


def _err(path: str, key: str, value: Any, allowed: str) -> UserError:
    return UserError(f"{path}: {key} = {_shown(value)}: {allowed}")


def _one_value(path: str, where: str, key: str, value: Any) -> None:
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
        raise _err(path, where, value, f"{key} is a table of the config, not one value: "
                   f"name one of its keys ({', '.join(f'{key}.{f}' for f in fields)})")


def _get(table: dict, key: str, path: str, kind: type | tuple, default: Any, allowed: str):
    value = table.get(key, default)
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise _err(path, f"study.{key}", value, allowed)
    return value


def _parse_param(path: str, key: str, spec: Any, free: bool = False) -> Param:
    where = f"space.{json.dumps(key)}"
    if not isinstance(spec, dict):
        raise _err(path, where, spec, "must be a table {low, high[, log, off, int]} or {choices}")
    unknown = set(spec) - {"low", "high", "log", "off", "int", "choices"}
    if unknown:
        hint = ""
        if all(isinstance(v, dict) for v in spec.values()):
            inner = sorted(spec)[0]
            hint = (f"; a dotted key must be quoted: \"{key}.{inner}\" = {{...}}, not "
                    f"{key}.{inner} = {{...}}")
        raise _err(path, where, spec, f"unknown field {sorted(unknown)[0]!r} "
                   "(allowed: low, high, log, off, int, choices)" + hint)
    if key in SEEDED_KEYS:
        raise _err(path, where, spec, f"{key} is set by study.seeds for every trial; it cannot "
                   "be searched")
    if not free:
        _one_value(path, where, key, spec)
    for flag in ("log", "off", "int"):
        if flag in spec and not isinstance(spec[flag], bool):
            raise _err(path, f"{where}.{flag}", spec[flag], "must be true or false")
    if "choices" in spec:
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise _err(path, where + ".choices", choices, "must be a non-empty list")
        if not free and cfgmod.optional_key(cfgmod.Config, key):  # "off" is None
            choices = [None if cfgmod.off_value(c) else c for c in choices]
        # Optuna finds a choice by equality: a repeat (also 1 and 1.0, "off" and "none")
        # would be drawn twice as often, and report a value under the other's index.
        for i, c in enumerate(choices):
            if any(c == d for d in choices[:i]):
                raise _err(path, where + ".choices", spec["choices"],
                           f"must be distinct values ({_shown(spec['choices'][i])} repeats "
                           "an earlier choice)")
        return Param(key, choices=tuple(choices))
    low, high = spec.get("low"), spec.get("high")
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise _err(path, f"{where}.{name}", v, "must be a finite number")
    if low > high:
        raise _err(path, where, spec, "low must be <= high")
    if spec.get("int", False):
        for name, v in (("low", low), ("high", high)):
            if v != int(v):  # Optuna would draw from the truncated range without a word
                raise _err(path, f"{where}.{name}", v, "must be a whole number with int = true")
    log = spec.get("log", False)
    if log and low <= 0:
        raise _err(path, f"{where}.low", low, "must be > 0 on a log scale")
    return Param(key, float(low), float(high), bool(log), bool(spec.get("int", False)),
                 bool(spec.get("off", False)))


def load_sweep(path: str | Path, overrides: list[str] | None = None, *,
               extra_tables: tuple[str, ...] = ()) -> SweepSpec:
    """Parse and check a sweep file; ``overrides`` are ``--set`` strings for ``[config]``;
    ``extra_tables`` are tables a caller reads itself (a bench suite's ``[bench]``)."""
    path = str(path)
    raw = cfgmod.load_toml(path, "sweep")
    tables = ("study", "config", "space", "comparison", "trainer", *extra_tables)
    unknown = set(raw) - set(tables)
    if unknown:
        raise UserError(f"{path}: unknown table {sorted(unknown)[0]!r} "
                          f"(allowed: {', '.join(tables)})")
    for table in ("study", "config", "space", "comparison", "trainer"):
        if table in raw and not isinstance(raw[table], dict):
            raise _err(path, table, raw[table], "must be a table")
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
        raise _err(path, "study.name", name, "must be letters, digits, '.', '_' or '-' "
                   "(a folder name)")
    trials = _get(st, "trials", path, int, 0, "must be an integer >= 0")
    if trials < 0:
        raise _err(path, "study.trials", trials, "must be an integer >= 0")
    seeds = st.get("seeds", [0])
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
            or len(set(seeds)) != len(seeds)):
        raise _err(path, "study.seeds", seeds, "must be a list of distinct integers >= 0")
    objective = _get(st, "objective", path, str, "multi",
                     f"must be one of {', '.join(OBJECTIVES)}")
    if objective not in OBJECTIVES:
        raise _err(path, "study.objective", objective, f"must be one of {', '.join(OBJECTIVES)}")
    target = st.get("target_loss")
    if (isinstance(target, bool) or not isinstance(target, int | float)
            or not 0 < target < math.inf):
        raise _err(path, "study.target_loss", target, "must be a validation loss > 0")
    spike_limit = _get(st, "spike_limit", path, (int, float), 2, "must be a number >= 0")
    if not 0 <= spike_limit < math.inf:
        raise _err(path, "study.spike_limit", spike_limit, "must be a number >= 0")
    spike_metric = _get(st, "spike_metric", path, str, "severity",
                        f"must be one of {', '.join(SPIKE_METRICS)}")
    if spike_metric not in SPIKE_METRICS:
        raise _err(path, "study.spike_metric", spike_metric,
                   f"must be one of {', '.join(SPIKE_METRICS)}")
    sampler = _get(st, "sampler", path, str, "tpe", f"must be one of {', '.join(SAMPLERS)}")
    if sampler not in SAMPLERS:
        raise _err(path, "study.sampler", sampler, f"must be one of {', '.join(SAMPLERS)}")
    sampler_seed = _get(st, "sampler_seed", path, int, 0, "must be an integer >= 0")
    if sampler_seed < 0:
        raise _err(path, "study.sampler_seed", sampler_seed, "must be an integer >= 0")
    pruner = _get(st, "pruner", path, str, "none" if objective == "multi" else
                  "spike_tolerant_hyperband", f"must be one of {', '.join(PRUNERS)}")
    if pruner not in PRUNERS:
        raise _err(path, "study.pruner", pruner, f"must be one of {', '.join(PRUNERS)}")
    if objective == "multi" and pruner != "none":
        raise _err(path, "study.pruner", pruner,
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
    trainer = _parse_trainer(path, raw["trainer"]) if "trainer" in raw else {}
    free = bool(trainer)
    base_cfg = None
    if not free:
        try:
            base_cfg = resolve_config(base)
        except UserError as e:
            raise UserError(f"{path}: config: {e}") from None

    space_raw = raw.get("space", {})
    if not isinstance(space_raw, dict):
        raise _err(path, "space", space_raw, "must be a table")
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
                    raise _err(path, f"space.{json.dumps(p.key)}.off", True,
                               f"{p.key} has no \"off\" (it must be set): drop off") from None
                raise UserError(f"{path}: space.{json.dumps(p.key)}: {e}") from None

    if not free:
        _check_one_budget(path, base, space, {})  # the space first: it shapes the arms
    comparison = raw.get("comparison", {})
    arms = _parse_comparison(path, comparison, base, base_cfg, space)
    grid = _parse_grid(path, comparison.get("grid", {}), base, base_cfg, space)
    at = {k: _value_at(base, base_cfg, k) for k in grid}
    for arm, values in arms.items():
        for k in grid:
            if k in values and values[k] != at[k]:
                raise _err(path, f"comparison arm {json.dumps(arm)}: {k}", values[k],
                           f"{k} is on the comparison grid, which runs every arm at each of "
                           "its values: drop it from the arm")
    arms = cross(arms, grid, at)
    for arm, values in arms.items() if not free else ():  # a crossed arm must make a valid config too
        try:
            resolve_config(base, values)
        except UserError as e:
            raise UserError(f"{path}: comparison arm {json.dumps(arm)}: {e}") from None
    if not free:
        _check_one_budget(path, base, space, arms)
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
        raise _err(path, "study.heartbeat_s", beat, "must be a whole number of seconds >= 1")
    grace = _get(st, "heartbeat_grace_s", path, int, HEARTBEAT_GRACE_S,
                 f"must be a whole number of seconds >= 2 x heartbeat_s ({2 * beat})")
    if grace < 2 * beat:
        raise _err(path, "study.heartbeat_grace_s", grace,
                   f"must be a whole number of seconds >= 2 x heartbeat_s ({2 * beat})")
    retry = _get(st, "storage_retry_s", path, (int, float), STORAGE_RETRY_S,
                 "must be a number of seconds in [0, 3600]")
    if not 0 <= retry <= 3600:
        raise _err(path, "study.storage_retry_s", retry, "must be a number of seconds in "
                   "[0, 3600]")
    return {"heartbeat_s": beat, "heartbeat_grace_s": grace, "storage_retry_s": float(retry)}


def _value_at(base: dict[str, Any], base_cfg: cfgmod.Config | None, key: str) -> Any:
    """The base's value of ``key``: the resolved config's, or a free-form trainer's."""
    return base.get(key) if base_cfg is None else cfgmod.value_at(base_cfg, key)


def _parse_trainer(path: str, table: dict[str, Any]) -> dict[str, Any]:
    """``[trainer]``, checked: ``command`` (argv list, or a string split as a shell would),
    ``steps`` (the budget, required), ``eval_every``, ``log``, ``env``, ``grace_s``."""
    unknown = sorted(set(table) - set(TRAINER_KEYS))
    if unknown:
        raise _err(path, f"trainer.{unknown[0]}", table[unknown[0]],
                   f"unknown key (allowed: {', '.join(TRAINER_KEYS)})")
    command = table.get("command")
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as e:
            raise _err(path, "trainer.command", table["command"], f"cannot split ({e})") from None
    if command is None:
        raise UserError(f"{path}: trainer.command: missing: give the command each seed runs, "
                        'e.g. command = ["python", "train.py", "--params", "{params_file}"]')
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
        raise _err(path, "trainer.command", command, "must be a list of strings or a string")
    if not command or not command[0].strip():
        raise _err(path, "trainer.command", table["command"],
                   "is empty: give the program to run and its arguments")
    for element in command:
        if element == ARGS_MACRO:
            continue
        for name in re.findall(r"\{([^{}\s]*)\}", element):
            if name == "args":
                raise _err(path, "trainer.command", element,
                           '"{args}" must be an element of its own (it expands to one '
                           "--key=value flag per parameter)")
            if name not in MACROS:
                raise _err(path, "trainer.command", element, f"unknown macro {{{name}}} "
                           f"(allowed: {', '.join('{' + m + '}' for m in (*MACROS, 'args'))})")
    steps = table.get("steps")
    if steps is None:
        raise UserError(f"{path}: trainer.steps: missing: give the step budget every trial "
                        "runs (steps to target and the scores count against it)")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise _err(path, "trainer.steps", steps, "must be an integer >= 1")
    eval_every = table.get("eval_every", max(1, steps // 10))
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or not (
            1 <= eval_every <= steps):
        raise _err(path, "trainer.eval_every", eval_every,
                   f"must be an integer in [1, {steps}] (how often the trainer validates)")
    log = table.get("log", "")
    if not isinstance(log, str) or (log and (log.startswith("/") or ".." in log.split("/")
                                              or "\0" in log or not log.strip("./"))):
        raise _err(path, "trainer.log", log, "must be the name of a file or folder inside the "
                   "run folder (relative to it, not the run folder itself)")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in env.values()):
        raise _err(path, "trainer.env", env, "must be a table of names to strings or numbers")
    grace = table.get("grace_s", 10)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace < 3600:
        raise _err(path, "trainer.grace_s", grace, "must be a number of seconds in [0, 3600)")
    return {"command": command, "steps": steps, "eval_every": eval_every, "log": log,
            "env": {str(k): str(v) for k, v in env.items()}, "grace_s": float(grace)}


def _check_one_budget(path: str, base: dict[str, Any], space: list[Param],
                      arms: dict[str, dict[str, Any]]) -> None:
    """Every trial must run the same number of steps: scores (steps to target, a miss's
    budget, events per 1,000 steps) and the pruner count steps against ``spec.steps``."""
    where = {p.key: f"space.{json.dumps(p.key)}" for p in space}
    for arm, values in arms.items():
        for key in values:
            if key not in where and values[key] != base.get(key):
                where[key] = f"comparison arm {json.dumps(arm)}: {key}"
    for key in cfgmod.BUDGET_KEYS:
        if key in where:
            raise UserError(f"{path}: {where[key]}: varies {key} across trials; every trial "
                              "must have the same budget (set it in [config])")
    if "train.nproc" in where:
        raise UserError(f"{path}: {where['train.nproc']}: varies train.nproc across trials; "
                        "the sweep sizes its worker slots by it (set it in [config])")
    if base.get("train.tokens") is not None:
        for key in ("data.batch_size", "data.seq_len"):
            if key in where:
                raise UserError(
                    f"{path}: {where[key]}: varies {key} with train.tokens = "
                    f"{base['train.tokens']}, so trials would get different step budgets; "
                    "set train.steps instead")


def _offs(values: dict[str, Any], space: list[Param]) -> dict[str, Any]:
    """"off" ("none", "null") for a key that takes None means None, as ``train`` reads it
    (e.g. no clipping); for any other key (curriculum.kind = "off") it stays a value, as
    it does for every key of a [trainer]'s (``space`` None)."""
    if space is None:
        return dict(values)
    return {k: None if cfgmod.optional_key(cfgmod.Config, k) and cfgmod.off_value(v) else v
            for k, v in values.items()}


def _parse_comparison(path, table, base, base_cfg, space) -> dict[str, dict[str, Any]]:
    """Arms of the designed comparison, each a full assignment of the space's keys.

    Every study has at least two: the plain baseline and the combined recipe. The baseline
    fills every space key it does not name from the base config (no ``[comparison]`` table:
    the base config itself); every other arm is the baseline plus its own changes, so arms
    differ from the baseline only where they say. The recipe comes last; a file that
    declares none gets :data:`ARTICLE_RECIPE`, whose keys outside the search space are plain
    config overrides of that arm.
    """
    if not isinstance(table, dict) or set(table) - {"baseline", "recipe", "arms", "grid"}:
        raise _err(path, "comparison", sorted(table) if isinstance(table, dict) else table,
                   "allowed keys: baseline, recipe, arms, grid")
    if not isinstance(table.get("baseline", {}), dict):
        raise _err(path, "comparison.baseline", table["baseline"], "must be a table")
    if "recipe" in table and not isinstance(table["recipe"], dict) and table["recipe"] is not False:
        raise _err(path, "comparison.recipe", table["recipe"],
                   "must be a table, or false for no recipe arm")
    free = base_cfg is None  # a [trainer]'s free-form parameters
    offs = None if free else space
    baseline = _offs(flatten(table.get("baseline", {}), path=path,
                             where="comparison.baseline."), offs)
    for p in space:
        if free and p.key not in baseline and p.key not in base:
            raise _err(path, f"comparison.baseline.{p.key}", None,
                       f"no value: set {json.dumps(p.key)} in [config] or in "
                       "[comparison] baseline (every arm starts from the baseline)")
        baseline.setdefault(p.key, _value_at(base, base_cfg, p.key))
    arms_table = table.get("arms", {})
    if not isinstance(arms_table, dict):
        raise _err(path, "comparison.arms", arms_table, "must be a table of arms")
    for reserved in ("baseline", "recipe"):
        if reserved in arms_table:
            raise _err(path, f"comparison.arms.{reserved}", arms_table[reserved],
                       f"{reserved!r} is declared as [comparison] {reserved}, not as an arm")
    named = {"baseline": {}, **arms_table}
    if table.get("recipe") is not False and not (free and "recipe" not in table):
        named["recipe"] = table.get("recipe", ARTICLE_RECIPE)  # a trainer's only if declared
    arms: dict[str, dict[str, Any]] = {}
    for arm, changes in named.items():
        if not isinstance(changes, dict):
            raise _err(path, f"comparison.arms.{json.dumps(arm)}", changes, "must be a table")
        where = "comparison." + ("baseline" if arm == "baseline" else
                                 "recipe" if arm == "recipe" else f"arms.{json.dumps(arm)}")
        flat = {**baseline, **_offs(flatten(changes, path=path, where=where + "."), offs)}
        if arm == "recipe" and "recipe" not in table:
            where += " (the article's recipe, run when the file declares none)"
        try:
            if not free:
                resolve_config(base, flat)
        except UserError as e:
            raise UserError(f"{path}: {where}: {e}") from None
        for p in space:
            if not p.contains(flat[p.key]):
                raise _err(path, f"{where}.{p.key}", flat[p.key],
                           f"outside the search space ({p.describe()})")
        arms[arm] = flat
    return arms



def _parse_grid(path, table, base, base_cfg, space) -> dict[str, list]:
    """``[comparison] grid``: config keys and the values every arm is run at.

    The base config's value of each key must be among them: the arms there keep their plain
    names, and the strategy table compares arms at that point.
    """
    if not isinstance(table, dict):
        raise _err(path, "comparison.grid", table, 'must be a table {"key" = [values]}')
    grid: dict[str, list] = {}
    dims = {p.key: p for p in space}
    free = base_cfg is None  # a [trainer]'s free-form parameters
    for key, values in flatten(table, path=path, where="comparison.grid.").items():
        where = f"comparison.grid.{json.dumps(key)}"
        if not free:
            _one_value(path, where, key, values)
        if (not isinstance(values, list) or not values
                or len({json.dumps(v) for v in values}) != len(values)):
            raise _err(path, where, values, "must be a non-empty list of distinct values")
        # "off" for a key that takes None is None, as everywhere else in a sweep file.
        values = [_offs({key: v}, None if free else space)[key] for v in values]
        if key in SEEDED_KEYS:
            raise _err(path, where, values, f"{key} is set by study.seeds for every trial")
        for v in values:
            try:
                if not free:
                    resolve_config(base, {key: v})
            except UserError as e:
                raise UserError(f"{path}: {where}: {e}") from None
            if key in dims and not dims[key].contains(v):
                raise _err(path, where, v, f"outside the search space ({dims[key].describe()})")
        at = _value_at(base, base_cfg, key)
        if at not in values:
            raise _err(path, where, values, f"must include the base config's value {at!r} "
                       "(where the strategy table compares the arms); set it in [config]")
        grid[key] = values
    return grid


def grid_name(arm: str, point: dict[str, Any]) -> str:
    """``clip 1.0 @ optim.lr=0.1``: an arm crossed with one grid point."""
    shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in point.items())
    return f"{arm} @ {shown}"


def cross(arms: dict[str, dict[str, Any]], grid: dict[str, list],
          at: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every arm at every grid point, arm by arm; the point ``at`` keeps the plain name."""
    if not grid:
        return arms
    points = [dict(zip(grid, combo, strict=True)) for combo in itertools.product(*grid.values())]
    out: dict[str, dict[str, Any]] = {}
    for arm, values in arms.items():
        for point in points:
            out[arm if point == at else grid_name(arm, point)] = {**values, **point}
    return out
