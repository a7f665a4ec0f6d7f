"""A sweep file's ``[comparison]`` table: the baseline, the recipe and the arms, each
resolved to a whole config and checked against the search space, the grid every arm is
crossed with, and the one step budget every trial must share.

:func:`~.spec.load_sweep` calls it once the base config and the space are known.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from spikebench import config as cfgmod
from spikebench.errors import UserError
from spikebench.sweep.spec import (
    ARTICLE_RECIPE,
    SEEDED_KEYS,
    Param,
    flatten,
    one_value,
    resolve_config,
    value_at,
)
from spikebench.sweep.spec_errors import err
from spikebench.sweep.trainer_table import check_arm_keys, check_parameter, key_name


def check_one_budget(path: str, base: dict[str, Any], space: list[Param],
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


def with_offs(values: dict[str, Any], space: list[Param]) -> dict[str, Any]:
    """"off" ("none", "null") for a key that takes None means None, as ``train`` reads it
    (e.g. no clipping); for any other key (curriculum.kind = "off") it stays a value, as
    it does for every key of a [trainer]'s (``space`` None)."""
    if space is None:
        return dict(values)
    return {k: None if cfgmod.optional_key(cfgmod.Config, k) and cfgmod.off_value(v) else v
            for k, v in values.items()}


def parse_comparison(path, table, base, base_cfg, space) -> dict[str, dict[str, Any]]:
    """Arms of the designed comparison, each a full assignment of the space's keys.

    Every study has at least two: the plain baseline and the combined recipe. The baseline
    fills every space key it does not name from the base config (no ``[comparison]`` table:
    the base config itself); every other arm is the baseline plus its own changes, so arms
    differ from the baseline only where they say. The recipe comes last; a file that
    declares none gets :data:`ARTICLE_RECIPE`, whose keys outside the search space are plain
    config overrides of that arm.
    """
    if not isinstance(table, dict) or set(table) - {"baseline", "recipe", "arms", "grid"}:
        raise err(path, "comparison", sorted(table) if isinstance(table, dict) else table,
                   "allowed keys: baseline, recipe, arms, grid")
    if not isinstance(table.get("baseline", {}), dict):
        raise err(path, "comparison.baseline", table["baseline"], "must be a table")
    if "recipe" in table and not isinstance(table["recipe"], dict) and table["recipe"] is not False:
        raise err(path, "comparison.recipe", table["recipe"],
                   "must be a table, or false for no recipe arm")
    free = base_cfg is None  # a [trainer]'s free-form parameters
    offs = None if free else space
    baseline = with_offs(flatten(table.get("baseline", {}), path=path,
                             where="comparison.baseline."), offs)
    if free:  # a trainer's parameters: what [config], [space] and the baseline declare
        for where, keys in (("config", base), ("space", {p.key: p.choices or p.describe() for p in space}),
                            ("comparison.baseline", baseline)):
            for key, value in keys.items():
                check_parameter(path, f"{where}.{key_name(key)}", key, value)
    declared = set(base) | {p.key for p in space} | set(baseline)
    for p in space:
        if free and p.key not in baseline and p.key not in base:
            raise err(path, f"comparison.baseline.{p.key}", None,
                       f"no value: set {json.dumps(p.key)} in [config] or in "
                       "[comparison] baseline (every arm starts from the baseline)")
        baseline.setdefault(p.key, value_at(base, base_cfg, p.key))
    arms_table = table.get("arms", {})
    if not isinstance(arms_table, dict):
        raise err(path, "comparison.arms", arms_table, "must be a table of arms")
    for reserved in ("baseline", "recipe"):
        if reserved in arms_table:
            raise err(path, f"comparison.arms.{reserved}", arms_table[reserved],
                       f"{reserved!r} is declared as [comparison] {reserved}, not as an arm")
    named = {"baseline": {}, **arms_table}
    if table.get("recipe") is not False and not (free and "recipe" not in table):
        named["recipe"] = table.get("recipe", ARTICLE_RECIPE)  # a trainer's only if declared
    arms: dict[str, dict[str, Any]] = {}
    for arm, changes in named.items():
        if "\0" in arm:  # a row of trials.csv and of the report, which a NUL byte breaks
            raise err(path, f"comparison.arms.{json.dumps(arm)}", changes,
                       "an arm's name may not hold a NUL byte")
        if not isinstance(changes, dict):
            raise err(path, f"comparison.arms.{json.dumps(arm)}", changes, "must be a table")
        where = "comparison." + ("baseline" if arm == "baseline" else
                                 "recipe" if arm == "recipe" else f"arms.{json.dumps(arm)}")
        own = with_offs(flatten(changes, path=path, where=where + "."), offs)
        if free and arm != "baseline":
            check_arm_keys(path, arm, where, own, declared)
        flat = {**baseline, **own}
        if arm == "recipe" and "recipe" not in table:
            where += " (the article's recipe, run when the file declares none)"
        try:
            if not free:
                resolve_config(base, flat)
        except UserError as e:
            raise UserError(f"{path}: {where}: {e}") from None
        for p in space:
            if not p.contains(flat[p.key]):
                raise err(path, f"{where}.{p.key}", flat[p.key],
                           f"outside the search space ({p.describe()})")
        arms[arm] = flat
    return arms



def parse_grid(path, table, base, base_cfg, space) -> dict[str, list]:
    """``[comparison] grid``: config keys and the values every arm is run at.

    The base config's value of each key must be among them: the arms there keep their plain
    names, and the strategy table compares arms at that point.
    """
    if not isinstance(table, dict):
        raise err(path, "comparison.grid", table, 'must be a table {"key" = [values]}')
    grid: dict[str, list] = {}
    dims = {p.key: p for p in space}
    free = base_cfg is None  # a [trainer]'s free-form parameters
    for key, values in flatten(table, path=path, where="comparison.grid.").items():
        where = f"comparison.grid.{json.dumps(key)}"
        if free:  # the grid's values reach the command as the arms' do
            check_parameter(path, where, key, values)
        else:
            one_value(path, where, key, values)
        if (not isinstance(values, list) or not values
                or len({json.dumps(v) for v in values}) != len(values)):
            raise err(path, where, values, "must be a non-empty list of distinct values")
        # "off" for a key that takes None is None, as everywhere else in a sweep file.
        values = [with_offs({key: v}, None if free else space)[key] for v in values]
        if key in SEEDED_KEYS:
            raise err(path, where, values, f"{key} is set by study.seeds for every trial")
        for v in values:
            try:
                if not free:
                    resolve_config(base, {key: v})
            except UserError as e:
                raise UserError(f"{path}: {where}: {e}") from None
            if key in dims and not dims[key].contains(v):
                raise err(path, where, v, f"outside the search space ({dims[key].describe()})")
        at = value_at(base, base_cfg, key)
        if at not in values:
            raise err(path, where, values, f"must include the base config's value {at!r} "
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
