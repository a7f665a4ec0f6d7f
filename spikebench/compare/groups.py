"""Which runs form which group, which group is the baseline, and how each group is paired
with it.

Groups are named by a glob over the runs' names and paths (``--group NAME=GLOB``), by the
value of one hyperparameter read from each run's own metadata (``--by PARAM``), or, given
neither, one group per path read. A group is paired with the baseline seed by seed only
where every run of both has a known seed, distinct within its group, and both groups ran
the same seeds; otherwise the two are compared as independent samples, and each run's seed
label (``seed-<n>`` in the study) is only its number in the group.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.runs.model import RunLog

LISTED = 5  # names a message lists before "and N more"


def listed(names: list[str], limit: int = LISTED) -> str:
    """``a, b, c and 4 more``."""
    head = ", ".join(names[:limit])
    return head + (f" and {len(names) - limit} more" if len(names) > limit else "")


@dataclass
class Groups:
    """Runs by group name, in the order the groups were given (for ``--by``: by value)."""

    runs: dict[str, list[RunLog]]
    kind: str  # "glob", "param" or "path"
    rules: dict[str, str] = field(default_factory=dict)  # group -> its glob or value
    by: str | None = None
    ungrouped: list[str] = field(default_factory=list)  # runs no group took


def _candidates(run: RunLog) -> list[str]:
    """What a glob is matched against: the run's name and its path, as given and absolute."""
    out = [run.name, str(run.path), Path(run.path).as_posix()]
    try:
        out.append(Path(run.path).resolve().as_posix())
    except (OSError, RuntimeError):
        pass
    return out


def _matches(run: RunLog, pattern: str) -> bool:
    """A glob over the run's name or path; a plain folder name also takes the runs below it."""
    pattern = pattern.rstrip("/") or pattern
    for text in _candidates(run):
        if fnmatchcase(text, pattern) or text.startswith(pattern + "/"):
            return True
    resolved = Path(pattern).expanduser()
    if resolved.exists():
        try:
            run_path = Path(run.path).resolve()
            return run_path == resolved.resolve() or resolved.resolve() in run_path.parents
        except (OSError, RuntimeError):
            return False
    return False


def parse_group(text: str) -> tuple[str, str]:
    """``NAME=GLOB`` -> (name, glob); one line naming the problem otherwise."""
    name, sep, pattern = text.partition("=")
    if not sep or not name.strip() or not pattern.strip():
        raise UserError(f"--group {text!r}: give NAME=GLOB, e.g. --group clip='runs/clip-*'")
    return name.strip(), pattern.strip()


def by_globs(runs: list[RunLog], groups: list[tuple[str, str]]) -> Groups:
    """One group per ``(name, glob)``: each run in the group whose glob it matches. A run two
    globs match, a group no run matches, a name given twice: one line each."""
    names = [n for n, _ in groups]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"--group {twice[0]!r} is given twice: give each group once")
    out: dict[str, list[RunLog]] = {n: [] for n in names}
    owner: dict[str, str] = {}
    for run in runs:
        hits = [n for n, g in groups if _matches(run, g)]
        if len(hits) > 1:
            raise UserError(f"run {run.name} matches more than one group ({', '.join(hits)}): "
                            "make the globs exclusive")
        if hits:
            out[hits[0]].append(run)
            owner[run.name] = hits[0]
    empty = [n for n in names if not out[n]]
    if empty:
        n, g = empty[0], dict(groups)[empty[0]]
        raise UserError(f"--group {n}={g}: matches no run (the runs read: "
                        f"{listed([r.name for r in runs])}); globs match a run's name or path")
    return Groups(out, "glob", dict(groups),
                  ungrouped=[r.name for r in runs if r.name not in owner])


def _value_name(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    return json.dumps(value, sort_keys=True, default=str)


def _order(value: Any) -> tuple:
    """None ("off", unset) first, then numbers ascending, then the rest by name."""
    if value is None:
        return (0, 0.0, "")
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return (1, float(value), "")
    return (2, 0.0, _value_name(value))


def by_param(runs: list[RunLog], param: str) -> Groups:
    """One group per value of ``param`` in the runs' own metadata, ordered by value (None,
    an unset value, first: the natural baseline). A run without it is refused, naming which
    (and the parameters the runs do have)."""
    missing = [r.name for r in runs if param not in r.params]
    if missing:
        near = sorted({k for r in runs for k in r.params if param.split(".")[-1] in k})
        known = near or sorted({k for r in runs for k in r.params})
        hint = (f"; parameters they have: {listed(known, 8)}" if known
                else "; the runs carry no parameters")
        raise UserError(f"--by {param}: {len(missing)} of {len(runs)} runs do not say "
                        f"{param} ({listed(missing)}){hint}")
    values: dict[str, Any] = {}
    out: dict[str, list[RunLog]] = {}
    for run in runs:
        value = run.params[param]
        key = json.dumps(value, sort_keys=True, default=str)
        values.setdefault(key, value)
        out.setdefault(key, []).append(run)
    keys = sorted(out, key=lambda k: _order(values[k]))
    named = {_value_name(values[k]): out[k] for k in keys}
    if len(named) != len(keys):  # two values printed alike (1 and "1")
        named = {k: out[k] for k in keys}
    return Groups(named, "param", {n: f"{param} = {n}" for n in named}, by=param)


def by_source(sources: dict[str, list[RunLog]]) -> Groups:
    """One group per path read, named by the path's last part (the whole path if two end
    alike)."""
    names = {p: Path(p).name or p for p in sources}
    if len(set(names.values())) < len(names):
        names = {p: p for p in sources}
    empty = [p for p, runs in sources.items() if not runs]
    if empty:
        raise UserError(f"{empty[0]}: no run found there")
    return Groups({names[p]: list(runs) for p, runs in sources.items()}, "path",
                  {names[p]: p for p in sources})


def pick(groups: Groups, name: str | None, option: str) -> str | None:
    """The group ``--baseline``/``--recipe`` names: by name, or for ``--by`` by value (so
    ``1e-3`` finds the group 0.001); one line listing the groups if none is."""
    if name is None:
        return None
    if name in groups.runs:
        return name
    try:
        wanted = float(name)
    except ValueError:
        wanted = None
    if wanted is not None and groups.kind == "param":
        for g, runs in groups.runs.items():
            v = runs[0].params.get(groups.by or "")
            if isinstance(v, int | float) and not isinstance(v, bool) and float(v) == wanted:
                return g
    raise UserError(f"{option} {name}: not a group (the groups: {listed(list(groups.runs), 12)})")


@dataclass(frozen=True)
class Pairing:
    paired: bool
    why: str = ""  # why not, for an unpaired group


def seeds_known(runs: list[RunLog]) -> bool:
    """Every run says its seed and no two say the same."""
    seeds = [r.seed for r in runs]
    return all(isinstance(s, int) for s in seeds) and len(set(seeds)) == len(seeds)


def _why_unknown(name: str, runs: list[RunLog]) -> str:
    unknown = [r.name for r in runs if not isinstance(r.seed, int)]
    if unknown:
        return f"{len(unknown)} run(s) of {name} say no seed: {listed(unknown, 3)}"
    seen: dict[int, list[str]] = {}
    for r in runs:
        seen.setdefault(int(r.seed), []).append(r.name)
    seed, names = next((s, n) for s, n in seen.items() if len(n) > 1)
    return f"seed {seed} appears twice in {name} ({listed(names, 3)})"


def pair(groups: dict[str, list[RunLog]], baseline: str, *, unpaired: bool = False
         ) -> dict[str, Pairing]:
    """How each group but the baseline is compared with it: paired where every run of both
    has a known seed, distinct within its group, and the two groups ran the same seeds."""
    base = groups[baseline]
    out = {}
    for name, runs in groups.items():
        if name == baseline:
            continue
        if unpaired:
            out[name] = Pairing(False, "--unpaired")
        elif not seeds_known(runs):
            out[name] = Pairing(False, _why_unknown(name, runs))
        elif not seeds_known(base):
            out[name] = Pairing(False, _why_unknown(baseline, base))
        elif {r.seed for r in runs} != {r.seed for r in base}:
            mine = ", ".join(map(str, sorted(r.seed for r in runs)))
            theirs = ", ".join(map(str, sorted(r.seed for r in base)))
            out[name] = Pairing(False, f"the seeds differ: {name} ran {mine}, "
                                f"{baseline} ran {theirs}")
        else:
            out[name] = Pairing(True)
    return out


def labels(runs: list[RunLog]) -> dict[str, int]:
    """Each run's seed label: its seed where the group's seeds are known and distinct,
    else its number in the group (by name), a label only."""
    if seeds_known(runs):
        return {r.name: int(r.seed) for r in runs}
    return {r.name: i for i, r in enumerate(sorted(runs, key=lambda r: r.name))}
