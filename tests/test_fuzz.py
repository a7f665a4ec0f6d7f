"""Fuzzing the command line the way a new user's typos and damaged files would: generated
``--set`` values, sweep files and training logs. Every case must end in exit code 0 or 2,
and a refusal is one line on stderr: never a traceback."""

import dataclasses
import math
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spikebench.cli import main
from spikebench.config import Config


def _keys(cls, prefix=""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


KEYS = sorted(_keys(Config))
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
# TOML literals a user might type, and things that are not TOML at all.
VALUES = st.one_of(
    st.integers(-10**25, 10**25).map(str), st.floats(allow_nan=True).map(repr),
    st.sampled_from(["true", "false", "off", "nan", "inf", "-inf", "1979-05-27", "[1, 2]",
                     "{a = 1}", '""', '"stdlib"', "cuda:7", "meta", "..", "a/b", "'x'",
                     '"' + "a" * 300 + '"', '"a\\u0000b"', '"torch.nn:Linear"',
                     '"os:getcwd"', '"spikebench.model:GPT"']),
    TEXT.map(lambda t: f'"{t}"' if '"' not in t and "\\" not in t else "x"), TEXT)
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _one_line_or_ok(code, capsys):
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("spikebench "), err


@FAST
@given(st.lists(st.tuples(st.sampled_from(KEYS), VALUES), min_size=1, max_size=3))
def test_train_dry_run_never_tracebacks(capsys, tmp_path, sets):
    argv = ["train", "--dry-run", "--set", f"run.out_dir={tmp_path}/out"]
    for key, value in sets:
        argv += ["--set", f"{key}={value}"]
    _one_line_or_ok(main(argv), capsys)


TOML_VALUE = st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(
    ["0.0", "1e-3", "nan", "inf", "true", '"off"', '"fp16"', "[0, 1]", "[[0]]", "[]",
     '["fp32", "bf16"]', "1979-05-27", '"x"', "{ low = 0.0, high = 0.1 }",
     '{ low = 1e-4, high = 1e-1, log = "false" }', "{ choices = [] }",
     "{ low = 0.1, high = 10.0, log = true, off = true }", '{ "optim.clip" = 1.0 }']))
STUDY_KEYS = ["name", "trials", "seeds", "objective", "target_loss", "spike_limit",
              "spike_metric", "sampler", "pruner", "notes", "bogus"]


@st.composite
def sweep_files(draw):
    lines = ["[study]"]
    if draw(st.booleans()):
        lines.append("target_loss = 3.0")
    for k in draw(st.lists(st.sampled_from(STUDY_KEYS), max_size=3, unique=True)):
        lines.append(f"{k} = {draw(TOML_VALUE)}")
    lines.append("[config]")
    for k in draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True)):
        lines.append(f"{k} = {draw(TOML_VALUE)}")
    lines.append("[space]")
    for k in draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True)):
        lines.append(f'"{k}" = {draw(TOML_VALUE)}')
    if draw(st.booleans()):
        lines += ["[comparison]", f'baseline = {draw(TOML_VALUE)}']
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(TEXT))  # a stray line
    return "\n".join(lines) + "\n"


@FAST
@given(sweep_files())
def test_sweep_dry_run_never_tracebacks(capsys, tmp_path, text):
    f = tmp_path / "s.toml"
    f.write_text(text)
    _one_line_or_ok(main(["sweep", str(f), "--dry-run", "--results", str(tmp_path / "r")]),
                    capsys)


CELL = st.one_of(st.integers(-3, 10**20).map(str), st.floats().map(repr),
                 st.sampled_from(["", "nan", "inf", "abc", "1e400", "null", "[", "9" * 5000]))


@st.composite
def logs(draw):
    if draw(st.booleans()):  # CSV, maybe ragged
        header = draw(st.sampled_from(["step,loss", "step,loss,grad_norm", "Step,train/loss",
                                       "x,y", ""]))
        rows = [",".join(draw(st.lists(CELL, min_size=0, max_size=4)))
                for _ in range(draw(st.integers(0, 6)))]
        return ".csv", ("\n".join([header, *rows]) + "\n").encode()
    if draw(st.booleans()):  # JSONL
        rows = [draw(st.sampled_from(['{"step": 1, "loss": 2.0}', '{"step": null}', "[1]",
                                      '{"step": 1e30, "loss": 1}', "{", "[" * 2000,
                                      '{"step": 1, "loss": ' + "9" * 5000 + "}",
                                      '{"step": 2, "loss": NaN}']))
                for _ in range(draw(st.integers(0, 5)))]
        return ".jsonl", ("\n".join(rows) + "\n").encode()
    return draw(st.sampled_from([".csv", ".jsonl", ".txt"])), draw(st.binary(max_size=200))


@FAST
@given(logs(), st.sampled_from([[], ["--json"], ["--detector", "zscore"], ["--gap", "0"]]))
def test_spikes_never_tracebacks(capsys, tmp_path, log, extra):
    suffix, data = log
    f = tmp_path / f"log{suffix}"
    f.write_bytes(data)
    _one_line_or_ok(main(["spikes", str(f), *extra]), capsys)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_numbers_in_a_config_file(tmp_path, capsys, value):
    f = tmp_path / "c.toml"
    f.write_text(f"[optim]\nlr = {value!r}\n".replace("inf", "inf"))
    _one_line_or_ok(main(["train", str(f), "--dry-run"]), capsys)
