"""Fuzzing a sweep file's ``[trainer]`` table and a command trial's parameters (issue 45,
"bad input 3"), beyond the hand-written cases of ``test_command_limits.py`` and
``test_refusals.py``. ``spikebench sweep FILE --dry-run`` either accepts a generated file
(exit 0) or refuses it (exit 2, one line naming the field at fault, no traceback); neither
writes a file, under ``--results`` or beside the sweep file. An accepted file's spec is
consistent: the ``[trainer]`` values have their documented types, and no parameter is the
seed, holds a NUL byte or lies outside what [config], [space] and the baseline declare."""

from __future__ import annotations

import json
import math
import os
import re
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
from fuzzkit import changed, deadline, refused, snapshot
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from spikebench.cli import main
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.trainer_table import MACROS, TRAINER_KEYS

CASES = settings(max_examples=70, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- a TOML writer for any generated value (tomllib reads; nothing here writes TOML) -----
def toml_str(s: str) -> str:
    """A basic string: printable ASCII as it is, everything else escaped (NUL included)."""
    return '"' + "".join(
        "\\" + c if c in '"\\' else c if " " <= c <= "~" else
        f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in s) + '"'


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else "inf" if v == math.inf else (
            "-inf" if v == -math.inf else repr(v))
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(map(toml_value, v)) + "]"
    return "{ " + ", ".join(f"{toml_str(k)} = {toml_value(x)}" for k, x in v.items()) + " }"


STUDY = '[study]\nname = "fz"\ntarget_loss = 3.0\n'
GOOD_TRAINER = {"command": ["python", "train.py", "{args}"], "steps": 10}


def sweep_text(trainer: Any, config: Any = None, space: Any = None,
               comparison: Any = None) -> str:
    """The file: ``[study]``, then each table given (a non-table value as a plain key)."""
    head, tables = "", [STUDY]
    for name, table in (("trainer", trainer), ("config", config), ("space", space),
                        ("comparison", comparison)):
        if table is None:
            continue
        if not isinstance(table, dict):  # before any [table] header: a top-level key
            head += f"{name} = {toml_value(table)}\n"
            continue
        tables.append(f"[{name}]\n" + "".join(f"{toml_str(k)} = {toml_value(v)}\n"
                                               for k, v in table.items()))
    return head + "".join(tables)


def dry_run(tmp_path: Path, capsys, text: str) -> tuple[int, str, str, Path]:
    """``spikebench sweep s.toml --dry-run --results R`` in a fresh sandbox (Hypothesis
    reuses tmp_path across cases): (code, stdout, stderr, the sweep file). Nothing may be
    written, by an accepted file or a refused one."""
    sandbox = Path(tempfile.mkdtemp(dir=tmp_path))
    (sandbox / "s.toml").write_text(text)
    before = snapshot(sandbox)
    capsys.readouterr()
    cwd = Path.cwd()
    os.chdir(sandbox)
    try:
        with deadline(20):
            code = main(["sweep", "s.toml", "--dry-run", "--results", "R"])
    finally:
        os.chdir(cwd)
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:  # one line, no raw line break of a key or value inside it
        assert err.count("\n") == 1 and err.startswith("spikebench sweep: error: "), err
        assert "\r" not in err and "\0" not in err, err
    else:
        assert err == "" and "\nplan: " in out, (out, err)
    moved = changed(before, snapshot(sandbox))
    assert not moved, f"{sorted(map(str, moved))[:5]} written by a dry run"
    event("accepted" if code == 0 else "refused")
    return code, out, err, sandbox / "s.toml"


# --- values of every kind -----------------------------------------------------------------
ODD_TEXT = st.sampled_from(["", ".", "..", "./", "../x", "x/../y", "/abs/x", "a\0b", "\0",
                            " ", "\n", "log.csv", "runs/", "a/b.csv", "nan", "inf", "-1",
                            "5", "1e3", "true", "{seed}", "é"]) | st.text(max_size=6)
BIG = st.sampled_from([2 ** 31, 2 ** 63 - 1, 2 ** 63, -(2 ** 63), 10 ** 30, -(10 ** 30)])
SCALAR = st.one_of(st.booleans(), st.integers(-5, 100), BIG,
                   st.floats(allow_nan=True, allow_infinity=True), ODD_TEXT)
KEY = st.sampled_from(["lr", "warmup", "seed", "Seed", "seed ", "lrr", "a.b", "", "a\0b",
                       "a\nb", "a\rb", "x=y", "-n", "é"]) | st.text(
    string.ascii_lowercase, min_size=1, max_size=3)
ANY = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3)
                   | st.dictionaries(KEY, inner, max_size=3), max_leaves=6)
NUMBERISH = st.one_of(st.booleans(), st.integers(-3, 5000), BIG,
                      st.floats(allow_nan=True, allow_infinity=True),
                      st.sampled_from([0, 0.0, -0.0, 1e-300, 3599.999, 3600, 3600.0, -1,
                                       "nan", "inf", "-1", "5", ""]),
                      st.dictionaries(KEY, SCALAR, max_size=2), st.lists(SCALAR, max_size=2))
PIECES = st.sampled_from(
    ["python", "train.py", "{args}", "{seed}", "--x={seed}", "{unknown}", "{}", "{ seed }",
     "x{args}", "{args}{seed}", "{seed", "", " ", "a\0b", "'", '"', "$HOME", "a b",
     *("{" + m + "}" for m in MACROS)]) | st.text(max_size=5)
ENV_NAME = st.sampled_from(["A", "OMP_NUM_THREADS", "", "A=B", "a\0b", " ", "é"]) | st.text(
    max_size=4)
ENV_VALUE = st.one_of(ODD_TEXT, st.integers(-5, 5), BIG, st.floats(), st.booleans(),
                      st.lists(SCALAR, max_size=2), st.dictionaries(KEY, SCALAR, max_size=1))
KNOWN_PIECES = ["train.py", "{args}", "{seed}", "--x={seed}", "$HOME", "a b", "{ seed }",
                *("{" + m + "}" for m in MACROS)]
SAFE_LOG = r"[A-Za-z0-9_-]{1,8}(\.[a-z]{1,3})?(/[A-Za-z0-9_-]{1,8}){0,2}/?"
VALID = {  # what docs/trainer.md allows (verdict() says so too)
    "command": st.lists(st.sampled_from(KNOWN_PIECES), max_size=4).map(
        lambda rest: ["python", *rest]),
    "steps": st.integers(1, 10 ** 6) | st.sampled_from([2 ** 63 - 1, 10 ** 30]),
    "eval_every": st.integers(1, 10),
    "grace_s": st.integers(0, 3599) | st.floats(0, 3599.999),
    "timeout_s": st.integers(0, 10 ** 9) | st.floats(0, 1e300),
    "stall_s": st.integers(0, 10 ** 9) | st.floats(0, 1e300),
    "log": st.from_regex(SAFE_LOG, fullmatch=True),
    "env": st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,5}", fullmatch=True),
                           st.text(max_size=5).filter(lambda v: "\0" not in v)
                           | st.integers() | st.floats(), max_size=3),
}
FUZZ = {
    "command": st.one_of(st.lists(PIECES, max_size=5),
                         st.lists(PIECES, max_size=5).map(" ".join), ANY),
    "steps": NUMBERISH, "eval_every": NUMBERISH, "grace_s": NUMBERISH,
    "timeout_s": NUMBERISH, "stall_s": NUMBERISH,
    "log": ODD_TEXT | ANY,
    "env": st.dictionaries(ENV_NAME, ENV_VALUE, max_size=3) | ANY,
}
TYPOS = ["timeout", "stall", "cmd", "Steps", "grace", "eval", "logs", "environment", "",
         "a\nb"]


def number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def verdict(key: str, v: Any, table: dict[str, Any]) -> bool | None:
    """What docs/trainer.md says of one fuzzed field: valid, invalid, or None where the docs
    leave it open (a shell-split string, an odd but legal file name)."""
    if key in ("timeout_s", "stall_s"):  # seconds, 0 for no limit
        return number(v) and 0 <= v < math.inf
    if key == "grace_s":
        return number(v) and 0 <= v < 3600
    if key == "steps":
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1
    if key == "eval_every":
        steps = table.get("steps", 10)
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            return None
        return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= steps
    if key == "log":
        if not isinstance(v, str) or v in (".", "./", "..", "../x", "/abs/x", "a\0b", "\0"):
            return False
        return True if v == "" or re.fullmatch(SAFE_LOG, v) else None
    if key == "env":
        return isinstance(v, dict) and all(
            name and "=" not in name and "\0" not in name and (
                isinstance(x, str) and "\0" not in x or number(x)) for name, x in v.items())
    if isinstance(v, list):  # the command as an argument list
        if not v or not all(isinstance(c, str) for c in v) or any(
                "\0" in c or c in ("{unknown}", "{}", "x{args}", "{args}{seed}") for c in v):
            return False
        return True if v[0] == "python" and set(v[1:]) <= set(KNOWN_PIECES) else None
    return False if not isinstance(v, str) else None


@st.composite
def trainer_tables(draw) -> tuple[Any, list[str], bool | None]:
    """(the [trainer] table, the keys fuzzed, whether it must be accepted: None if open).
    One to three fields get any value; the others a good one, or none (their default)."""
    if draw(st.integers(0, 30)) == 30:
        return draw(SCALAR | st.lists(SCALAR, max_size=2)), ["trainer"], False
    fuzzed = draw(st.lists(st.sampled_from(TRAINER_KEYS), min_size=1, max_size=3,
                           unique=True))
    table: dict[str, Any] = {}
    for key in TRAINER_KEYS:
        if key in fuzzed:
            table[key] = draw(VALID[key] | FUZZ[key])
        elif key in GOOD_TRAINER or draw(st.booleans()):
            table[key] = GOOD_TRAINER.get(key, {"eval_every": 1, "log": "log.csv",
                                                "env": {"OMP_NUM_THREADS": "1"},
                                                "grace_s": 5, "timeout_s": 60,
                                                "stall_s": 0}.get(key))
    verdicts = [verdict(k, table[k], table) for k in fuzzed]
    if draw(st.integers(0, 14)) == 14:
        typo = draw(st.sampled_from(TYPOS))
        table[typo] = draw(SCALAR)
        fuzzed.append(typo)
        verdicts.append(False)
    ok = False if False in verdicts else True if all(verdicts) else None
    return table, fuzzed, ok


def check_trainer(t: dict[str, Any]) -> None:
    """An accepted [trainer], as the spec holds it: the documented types."""
    assert set(t) == set(TRAINER_KEYS), t
    assert isinstance(t["command"], list) and t["command"] and t["command"][0].strip()
    assert all(isinstance(c, str) and "\0" not in c for c in t["command"]), t
    assert type(t["steps"]) is int and t["steps"] >= 1
    assert type(t["eval_every"]) is int and 1 <= t["eval_every"] <= t["steps"]
    log = t["log"]
    assert isinstance(log, str) and "\0" not in log and not log.startswith("/")
    assert ".." not in log.split("/") and (log == "" or log.strip("./")), log
    assert all(isinstance(k, str) and isinstance(v, str) and k and "=" not in k
               and "\0" not in k + v for k, v in t["env"].items()), t["env"]
    assert type(t["grace_s"]) is float and 0 <= t["grace_s"] < 3600
    for key in ("timeout_s", "stall_s"):
        assert type(t[key]) is float and 0 <= t[key] < math.inf, t


@CASES
@given(case=trainer_tables())
@example(case=({**GOOD_TRAINER, "stall_s": -1}, ["stall_s"], False))
@example(case=({**GOOD_TRAINER, "timeout_s": True}, ["timeout_s"], False))
@example(case=({**GOOD_TRAINER, "env": {"A": "a\0b"}}, ["env"], False))
@example(case=({**GOOD_TRAINER, "a\nb": 1}, ["a\nb"], False))
def test_a_fuzzed_trainer_table_is_accepted_whole_or_refused_by_its_field(tmp_path, capsys,
                                                                          case):
    table, fuzzed, ok = case
    code, _, err, path = dry_run(tmp_path, capsys, sweep_text(table, {"lr": 0.1},
                                                              comparison={"recipe": False}))
    if code == 2:
        names = "|".join(re.escape(k if k == "trainer" else "trainer." + (
            k if k.isprintable() else json.dumps(k))) for k in fuzzed)
        assert re.search(rf"s\.toml: ({names})[ .=]", err), (fuzzed, err)
        assert ok is not True, f"refused a valid {table}: {err}"
        return
    assert ok is not False, f"accepted {table}"
    spec = load_sweep(path)
    check_trainer(spec.trainer)
    assert spec.steps == spec.trainer["steps"] and spec.eval_every == spec.trainer["eval_every"]


# --- the parameters: [config], [space], [comparison] beside a good [trainer] -------------
def parameters(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """A table's parameters as a trainer gets them: dotted names, leaf values."""
    if not isinstance(value, dict):
        return [(prefix[:-1], value)]
    return [kv for k, v in value.items() for kv in parameters(v, f"{prefix}{k}.")]


def nul(value: Any) -> bool:
    return "\0" in json.dumps(value, ensure_ascii=False)


GOOD_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,4}", fullmatch=True).filter(
    lambda k: k != "seed")
GOOD_SCALAR = st.one_of(st.booleans(), st.integers(-10 ** 6, 10 ** 6),
                        st.floats(-1e6, 1e6, allow_nan=False),
                        st.text(max_size=6).filter(lambda v: "\0" not in v))
GOOD_VALUE = GOOD_SCALAR | st.lists(GOOD_SCALAR, max_size=3)
BAD_NAME = KEY | st.sampled_from(["lrr", "seed", "seed", "baseline"])
ARM_NAME = st.sampled_from(["fast", "clip 1.0", "warm-up", "é"])
BAD_ARM = st.sampled_from(["", "a\nb", "a\0b", "baseline", "recipe"]) | KEY
BAD_SPACE = st.one_of(
    st.fixed_dictionaries({"low": NUMBERISH, "high": NUMBERISH}, optional={
        "log": st.booleans() | SCALAR, "int": st.booleans() | SCALAR, "off": st.booleans()}),
    st.fixed_dictionaries({"choices": st.lists(ANY, max_size=3) | SCALAR}), ANY)


def distinct(values: list) -> list:
    """Values no two of which are equal (1 == 1.0 == True) or print alike in JSON."""
    out: list = []
    for v in values:
        if not any(v == w or json.dumps(v) == json.dumps(w) for w in out):
            out.append(v)
    return out


class Faults:
    """Draws that are good, or now and then (one in ``odds``) any value; ``bad`` counts
    the latter, so that a file drawn with none must be accepted."""

    def __init__(self, draw, odds: int = 6):
        self.draw, self.odds, self.bad = draw, odds, 0

    def __call__(self, good: st.SearchStrategy, bad: st.SearchStrategy) -> Any:
        if self.draw(st.integers(0, self.odds - 1)) == self.odds - 1:
            self.bad += 1
            return self.draw(bad)
        return self.draw(good)


@st.composite
def parameter_tables(draw) -> tuple[dict, dict, dict, bool]:
    """([config], [space], [comparison], whether it must be accepted): a valid file (a
    space around the declared values, arms and a grid within it) with a fault now and then:
    the seed, a typo (``lrr``), empty and unprintable names, NUL bytes, values of every
    type, a part that is no table, a grid without the base value."""
    pick = Faults(draw)
    config = {pick(GOOD_NAME, BAD_NAME): pick(GOOD_VALUE, ANY)
              for _ in range(draw(st.integers(1, 4)))}
    declared = dict(parameters(config))
    names = sorted(declared) or ["lr"]
    space: dict[str, Any] = {}
    inside: dict[str, st.SearchStrategy] = {}  # a spaced parameter's valid values
    for key in draw(st.lists(st.sampled_from(names), max_size=2, unique=True)):
        value = declared.get(key, 0.5)
        if number(value) and abs(value) < 1e12 and draw(st.booleans()):
            d = draw(st.floats(0, 10))
            spec = {"low": value - d, "high": value + d}
            inside[key] = st.floats(value - d, value + d)
        else:
            choices = distinct([value, *draw(st.lists(GOOD_VALUE, max_size=2))])
            spec, inside[key] = {"choices": choices}, st.sampled_from(choices)
        space[key] = pick(st.just(spec), BAD_SPACE)
    if draw(st.integers(0, 9)) == 9:  # a dimension no [config] or baseline value sets
        pick.bad += 1
        space[draw(BAD_NAME)] = draw(BAD_SPACE | st.just({"low": 0, "high": 1}))

    def changes(exclude: set[str] = frozenset()) -> dict[str, Any]:
        out = {}
        for _ in range(draw(st.integers(0, 2))):
            key = pick(st.sampled_from(names), BAD_NAME)
            if key in exclude:
                continue
            out[key] = pick(inside.get(key, GOOD_VALUE), ANY)
        return out

    comparison: dict[str, Any] = {"recipe": False}
    grid_keys = [k for k in names if k in declared and k not in space]
    grid_key = draw(st.sampled_from(grid_keys)) if grid_keys and draw(st.booleans()) else None
    if draw(st.booleans()):
        comparison["baseline"] = changes({grid_key})
    if draw(st.booleans()):
        comparison["recipe"] = changes({grid_key})
    if draw(st.booleans()):
        comparison["arms"] = {pick(ARM_NAME, BAD_ARM): changes({grid_key})
                              for _ in range(draw(st.integers(1, 3)))}
    if grid_key is not None:  # the base value among distinct others, in any order
        values = distinct([declared[grid_key], *draw(st.lists(GOOD_VALUE, max_size=2))])
        values.insert(draw(st.integers(0, len(values) - 1)), values.pop(0))
        comparison["grid"] = {grid_key: pick(st.just(values), st.lists(ANY, max_size=3)
                                             | SCALAR)}
    if draw(st.integers(0, 12)) == 12:  # a part that is no table, or a key beside them
        pick.bad += 1
        comparison[draw(st.sampled_from(["baseline", "recipe", "arms", "grid", "arm"]))] = \
            draw(SCALAR)
    return config, space, comparison, pick.bad == 0


@CASES
@given(case=parameter_tables())
@example(case=({"seed": 5}, {}, {}, False))
@example(case=({"lr": 0.1}, {}, {"arms": {"fast": {"lrr": 0.2}}}, False))
@example(case=({"name": "a"}, {}, {"grid": {"name": ["a", "b\0"]}}, False))
@example(case=({"lr": 0.1, "a\nb": "x\0"}, {}, {}, False))
@example(case=({"lr": 0.1}, {}, {"arms": {"x": {"l\nr": 1}}}, False))
@example(case=({"lr": 0.1}, {}, {"arms": {"a\0b": {}}}, False))
def test_fuzzed_parameters_are_accepted_consistently_or_refused_by_their_field(
        tmp_path, capsys, case):
    config, space, comparison, good = case
    code, out, err, path = dry_run(tmp_path, capsys, sweep_text(
        GOOD_TRAINER, config, space, {"recipe": False, **comparison}))
    if code == 2:
        assert re.search(r"s\.toml: (config\.|space\.|comparison[. =])", err), err
        assert not good, f"refused a file drawn without a fault: {err}"
        return
    spec = load_sweep(path)
    declared = set(spec.base) | {p.key for p in spec.space} | set(spec.arms["baseline"])
    assert dict(parameters(config)).keys() == spec.base.keys()
    for arm, values in spec.arms.items():
        assert "\0" not in arm and not nul(values), (arm, values)
        assert set(values) <= declared | set(spec.grid), (arm, values, declared)
        for p in spec.space:
            assert p.contains(values[p.key]), (arm, p, values)
        json.dumps(values)  # what the params file and {args} are made of
    for key in declared | set(spec.grid):
        assert key != "seed", key  # each seed reaches the command as {seed}
        assert "\0" not in key, key
    assert not nul(spec.base) and not any(nul(p.choices) for p in spec.space)
    for key, values in spec.grid.items():
        assert values and not nul(values) and spec.base[key] in values
    crossed = math.prod(len(v) for v in spec.grid.values())
    assert len(spec.arms) == crossed * (1 + len(comparison.get("arms", {})) + (
        isinstance(comparison.get("recipe"), dict)))
    assert f"{len(spec.arms)} comparison arms" in out


# --- the known bad inputs, as a user would type them --------------------------------------
BAD = [  # ([trainer] lines, [config] lines, [comparison] lines, what the one line holds)
    ("", "seed = 5", "", "config.seed = 5: the seed is not a parameter"),
    ("", "", '[comparison.arms]\nfast = { lrr = 0.2 }',
     'comparison.arms."fast".lrr = 0.2: unknown parameter in arm "fast" (allowed: lr:'),
    ("stall_s = -1", "", "", "trainer.stall_s = -1: must be a number of seconds > 0"),
    ("timeout_s = true", "", "", "trainer.timeout_s = true: must be a number of seconds"),
    ('env = { A = "a\\u0000b" }', "", "",
     'trainer.env."A" = "a\\u0000b": an environment variable needs a name'),
    # What this fuzz found: accepted, or refused in two lines, before the fixes with it.
    ("", 'name = "a"', 'grid = { name = ["a", "b\\u0000"] }',
     'comparison.grid."name" = ["a", "b\\u0000"]: holds a NUL byte'),
    ("", "", '[comparison.arms]\n"a\\u0000b" = { lr = 0.2 }',
     'comparison.arms."a\\u0000b" = {"lr": 0.2}: an arm\'s name may not hold a NUL byte'),
    ("", '"a\\nb" = 1', "", 'config."a\\nb" = 1: a parameter needs a name of printable '
     "characters without '=' ({args} passes it as --name=value)"),
    ("", '"" = 1', "", "config. = 1: a parameter needs a name"),
    ("", '"x=y" = 1', "", "config.x=y = 1: a parameter needs a name"),
    ("", "", '[comparison.arms]\nx = { "l\\rr" = 1 }', 'comparison.arms."x"."l\\rr" = 1: a '
     "parameter needs a name"),
    ('"a\\nb" = 1', "", "", 'trainer."a\\nb" = 1: unknown key (allowed: command, steps,'),
]


def bad_file(folder: Path, trainer: str = "", config: str = "", comparison: str = "",
             space: str = "") -> None:
    (folder / "s.toml").write_text(
        f'{STUDY}[trainer]\ncommand = ["python", "train.py", "{{args}}"]\nsteps = 10\n'
        f"{trainer}\n[config]\nlr = 0.1\n{config}\n[space]\n{space}\n[comparison]\n"
        f"recipe = false\n{comparison}\n")


@pytest.mark.parametrize("trainer, config, comparison, expect", BAD)
def test_known_bad_inputs_are_refused_in_one_line(tmp_path, capsys, trainer, config,
                                                  comparison, expect):
    bad_file(tmp_path, trainer, config, comparison)
    refused(["sweep", "s.toml", "--dry-run", "--results", "R"], tmp_path, capsys,
            expect=expect)


def test_a_space_key_with_a_line_break_is_refused_in_one_line(tmp_path, capsys):
    bad_file(tmp_path, space='"a\\nb" = { lr = { low = 0, high = 1 } }')
    refused(["sweep", "s.toml", "--dry-run", "--results", "R"], tmp_path, capsys,
            expect='space."a\\nb" = ')
