"""Fuzzing what `train`, `bench` and their files must refuse before anything runs (issue 37):
huge numbers, deep nesting, damaged run folders for --resume, names too long for the file
system, shapes that cannot fit in memory, host names idna cannot encode, model classes that
cannot train, damaged baselines and suites, paths that are no regular file. Every generated
case must be exit 2 and one line naming the field, leave its inputs byte-identical and
write nothing (:func:`fuzzkit.refused` over a fresh sandbox per case); each is refused
before training, so a case takes a fraction of a second."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from fuzzkit import refused
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from spikebench.cli import main

CASES = settings(max_examples=25, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(CASES, max_examples=10)
QUICK = ["--set", "train.steps=2", "--set", "data.max_bytes=200000", "--set",
         "train.progress=false"]


def fresh(tmp_path: Path) -> Path:
    """A fresh sandbox per case: Hypothesis reuses ``tmp_path`` across its examples."""
    return Path(tempfile.mkdtemp(dir=tmp_path))


def sets(*pairs: str) -> list[str]:
    return [a for p in pairs for a in ("--set", p)]


# --- huge numbers ----------------------------------------------------------------------------
INT_KEYS = ["train.seed", "train.steps", "data.batch_size", "model.n_embd", "train.threads",
            "response.ring", "spikes.gap", "clean.unit_bytes"]
FLOAT_KEYS = ["optim.lr", "optim.clip", "precision.init_scale", "faults.at", "spikes.target_loss",
              "model.z_loss", "train.dist_timeout_s", "schedule.warmup_ratio"]


@CASES
@given(key=st.sampled_from(INT_KEYS + FLOAT_KEYS), digits=st.integers(4301, 8000),
       where=st.sampled_from(["--set", "toml", "list"]), dry=st.booleans())
def test_numbers_past_the_int_string_limit(tmp_path, capsys, key, digits, where, dry):
    sb = fresh(tmp_path)
    big = "9" * digits
    if where == "toml":
        table, name = key.split(".")
        (sb / "c.toml").write_text(f"[{table}]\n{name} = {big}\n")
        argv, expect = ["train", "c.toml"], "holds a number too long to read"
    else:
        argv = ["train", *sets(f"{key}={big if where == '--set' else f'[{big}]'}")]
        expect = f"a number of {digits} digits"
    refused([*argv, *(["--dry-run"] if dry else [])], sb, capsys, expect=expect)


@CASES
@given(key=st.sampled_from(FLOAT_KEYS), digits=st.integers(310, 4300), sign=st.sampled_from(["", "-"]))
def test_integers_too_large_for_a_float_setting(tmp_path, capsys, key, digits, sign):
    refused(["train", "--dry-run", *sets(f"{key}={sign}1{'0' * (digits - 1)}")], fresh(tmp_path),
            capsys, expect=f"{key} = {sign}1000000000000000000")


# --- nesting depth ---------------------------------------------------------------------------
@st.composite
def nested(draw, lo=33, hi=3000):
    """A TOML/JSON value nested ``lo``..``hi`` levels deep, arrays and tables mixed."""
    depth = draw(st.integers(lo, hi))
    kinds = draw(st.lists(st.booleans(), min_size=depth, max_size=depth))
    left = "".join("[" if k else '{"a": ' for k in kinds)
    right = "".join("]" if k else "}" for k in reversed(kinds))
    return left + "1" + right


def _toml(value: str) -> str:
    return value.replace('{"a": ', "{a = ")


@CASES
@given(value=nested(), where=st.sampled_from(["--set", "config", "preset", "sweep", "suite",
                                              "config.json", "baseline"]))
def test_deep_nesting_anywhere_is_refused_in_one_line(tmp_path, capsys, value, where):
    sb = fresh(tmp_path)
    expect = "nested"
    if where == "--set":
        argv = ["train", "--dry-run", *sets(f"optim.lr={_toml(value)}")]
    elif where in ("config", "preset"):
        (sb / "c.toml").write_text(f"[model]\nn_layer = {_toml(value)}\n")
        argv = (["train", "c.toml", "--dry-run"] if where == "config"
                else ["train", "--dry-run", *sets("model.preset=c.toml")])
    elif where in ("sweep", "suite"):
        (sb / "s.toml").write_text(f"[study]\ntarget_loss = 3.0\nnotes = {_toml(value)}\n")
        argv = (["sweep", "s.toml", "--dry-run", "--results", "r"] if where == "sweep"
                else ["bench", "--suite", "s.toml", "--results", "r"])
    elif where == "config.json":
        (sb / "config.json").write_text('{"optim": ' + value + "}")
        argv = ["train", "config.json", "--dry-run"]
    else:
        (sb / "suites").mkdir()
        (sb / "suites" / "tiny.toml").write_text(SUITE)
        (sb / "b.json").write_text('{"format": 1, "environment": ' + value + "}")
        argv = ["bench", "--suite", "suites/tiny.toml", "--baseline", "b.json"]
    refused(argv, sb, capsys, expect=expect)


# --- damaged run folders (--resume) ----------------------------------------------------------
TINY_RUN = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
            "data.batch_size=4", "data.max_bytes=200000", "train.eval_every=4",
            "train.eval_batches=1", "train.log_every=2", "train.threads=1",
            "train.progress=false", "train.checkpoint_every=2", "train.steps=4"]


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A checkpointed run with no summary, as a kill after its last checkpoint leaves it."""
    tmp = tmp_path_factory.mktemp("killed")
    assert main(["train", *sets(*TINY_RUN, f"run.out_dir={tmp}", "run.name=run")]) == 0
    (tmp / "run" / "summary.json").unlink()
    (tmp / "run" / "metrics.jsonl").rename(tmp / "run" / "metrics.jsonl.partial")
    return tmp / "run"


def _damage_meta(run: Path, how: str, at: float, junk: bytes) -> str:
    meta = run / "meta.json"
    data = meta.read_bytes()
    if how == "missing":
        meta.unlink()
        return "meta.json is missing"
    if how == "truncated":
        meta.write_bytes(data[:int(at * (len(data) - 1))])
        return "meta.json is damaged"
    if how == "invalid bytes":
        meta.write_bytes(data[:int(at * len(data))] + b"\xff" + junk)
        return "meta.json is damaged"
    if how == "not an object":
        meta.write_text(json.dumps([1, "x"] if at < 0.5 else "x"))
        return "meta.json holds a JSON"
    if how == "deep":
        meta.write_text("[" * 50 + "]" * 50 if at < 0.5 else "[" * 100_000)
        return "meta.json "
    if how == "config truncated":
        cfg = run / "config.json"
        cfg.write_bytes(cfg.read_bytes()[:int(at * 100)])
        return "not a valid JSON config"
    (run / "summary.json").write_bytes(junk)
    return "the run already finished"


@CASES
@given(how=st.sampled_from(["missing", "truncated", "invalid bytes", "not an object", "deep",
                            "config truncated", "finished"]),
       at=st.floats(0, 0.99), junk=st.binary(max_size=20))
def test_a_run_folder_that_cannot_be_resumed(tmp_path, capsys, killed, how, at, junk):
    sb = fresh(tmp_path)
    shutil.copytree(killed, sb / "run")
    expect = _damage_meta(sb / "run", how, at, junk)
    refused(["train", "--resume", "run"], sb, capsys, expect=expect)


# --- names too long for the file system ------------------------------------------------------
@CASES
@given(digits=st.integers(224, 600), dry=st.booleans())
def test_a_seed_that_makes_the_automatic_run_name_too_long(tmp_path, capsys, digits, dry):
    sb = fresh(tmp_path)
    refused(["train", *QUICK, *sets(f"train.seed={'3' * digits}", "run.out_dir=out"),
             *(["--dry-run"] if dry else [])], sb, capsys, expect="the automatic run name")


@CASES
@given(n=st.integers(256, 1000), where=st.sampled_from(["config", "out_dir", "bench results"]))
def test_a_path_part_longer_than_255_bytes(tmp_path, capsys, n, where):
    sb = fresh(tmp_path)
    if where == "config":
        argv, expect = ["train", "x" * n + ".toml", "--dry-run"], "cannot be read"
    elif where == "out_dir":
        argv, expect = ["train", "--dry-run", *sets(f"run.out_dir={'o' * n}")], "run.out_dir"
    else:
        (sb / "suites").mkdir()
        (sb / "suites" / "tiny.toml").write_text(SUITE)
        argv = ["bench", "--suite", "suites/tiny.toml", "--update-baseline",
                "--results", "r" * n]
        expect = f"is {n} bytes; at most 255"
    refused(argv, sb, capsys, expect=expect)


# --- shapes that cannot fit ------------------------------------------------------------------
@CASES
@given(key=st.sampled_from(["data.batch_size", "model.n_embd", "train.eval_batches",
                            "model.n_layer", "model.vocab_size", "model.block_size"]),
       power=st.integers(13, 40), dry=st.booleans())
def test_sizes_that_cannot_fit_in_memory(tmp_path, capsys, key, power, dry):
    value = 10**power
    line = refused(["train", *QUICK, *sets(f"{key}={value}", "run.out_dir=out"),
                    *(["--dry-run"] if dry else [])], fresh(tmp_path), capsys,
                   expect="the run needs at least")
    assert f"{key} = " in line and ("this machine has" in line or "has" in line)


# --- host names idna cannot encode -----------------------------------------------------------
LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)


@st.composite
def bad_hosts(draw):
    labels = draw(st.lists(LABEL, min_size=1, max_size=4))
    i = draw(st.integers(0, len(labels) - 1))
    if draw(st.booleans()):
        labels[i] = "a" * draw(st.integers(64, 300))  # a label over 63 characters
    else:
        labels.insert(i + 1 if i < len(labels) - 1 else i, "")  # an empty label inside
        assume(any(lab == "" for lab in labels[:-1]) and labels[0] != "")
    return ".".join(labels)


@FEW
@given(host=bad_hosts())
def test_train_refuses_a_metrics_host_idna_cannot_encode(tmp_path, capsys, host):
    refused(["train", *QUICK, *sets("run.out_dir=out"), "--metrics-port", "0",
             f"--metrics-host={host}"], fresh(tmp_path), capsys,
            expect=f"--metrics-host {host[:100]!r}: not a host name or address")


# --- model classes that cannot train ---------------------------------------------------------
MODULE_BODIES = {
    "syntax": ("def broken(:\n", "cannot import (SyntaxError"),
    "raises": ("raise {exc}('at import')\n", "cannot import ("),
    "exits": ("import sys\nsys.exit({code!r})\n", "called sys.exit("),
    "no forward": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, c):\n"
                   "        super().__init__()\n        self.w = nn.Linear(2, 2)\n",
                   "has no forward method"),
    "returns": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, c):\n"
                "        super().__init__()\n        self.e = nn.Embedding(c.vocab_size, 4)\n"
                "    def forward(self, idx, targets=None):\n        x = self.e(idx)\n"
                "        return {ret}\n", "forward(idx, targets) returned"),
}


@CASES
@given(kind=st.sampled_from(sorted(MODULE_BODIES)),
       exc=st.sampled_from(["RuntimeError", "ValueError", "KeyError", "OSError", "TypeError"]),
       code=st.one_of(st.integers(-5, 300), st.text(max_size=10), st.none()),
       ret=st.sampled_from(["x", "(x,)", "(x, x.mean(), x)", "[x]", "None", "(x, 3.0)",
                            "(x, x.mean(-1))", "(x, x.mean().detach())", "(x, 'loss')"]),
       dry=st.booleans())
def test_a_model_class_that_cannot_train(tmp_path, capsys, kind, exc, code, ret, dry):
    sb = fresh(tmp_path)
    mods = Path(tempfile.mkdtemp(dir=tmp_path))  # outside the sandbox: imports write nothing
    body, expect = MODULE_BODIES[kind]
    name = f"m_{uuid.uuid4().hex}"
    (mods / f"{name}.py").write_text(body.format(exc=exc, code=code, ret=ret))
    import sys

    sys.path.insert(0, str(mods))
    dont = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        refused(["train", *QUICK, *sets(f"model.cls={name}:M", "run.out_dir=out"),
                 *(["--dry-run"] if dry else [])], sb, capsys, expect=expect)
    finally:
        sys.path.remove(str(mods))
        sys.dont_write_bytecode = dont


@CASES
@given(cls=st.one_of(
    st.builds("{}x:Y".format, st.text(".", min_size=1, max_size=4)),
    st.builds("{}:{}".format, st.sampled_from(["a b", "1x", "x-y", "x.", ".x", "x..y", ""]),
              st.sampled_from(["M", "", "1M", "M N"])),
    st.sampled_from(["os", "os:", ":GPT", "spikebench.model", "spikebench.model:GPT:X"])))
def test_a_model_class_name_that_is_no_import_path(tmp_path, capsys, cls):
    refused(["train", "--dry-run", *sets(f"model.cls={json.dumps(cls)}")], fresh(tmp_path),
            capsys, expect="model.cls = ")


# --- damaged baselines and suites ------------------------------------------------------------
SUITE = """[study]
name = "tiny"
target_loss = 4.5
seeds = [0, 1, 2, 3]
trials = 0
[config]
model.n_layer = 1
model.n_embd = 32
model.n_head = 2
data.seq_len = 32
data.batch_size = 4
train.steps = 6
[comparison]
recipe = false
[bench]
level = 0.2
[bench.perf]
overhead_steps = 0
sweep_trials = 0
report_trials = 0
"""
GOOD = {"format": 1, "suite": "tiny", "seconds": 3.0,
        "environment": {"device": "cpu", "torch_threads": 2, "git": None},
        "scenarios": {"baseline": {"config": {}, "seeds": {
            "0": {"n_events": 0, "severity": 0.0, "steps_to_target": 4,
                  "final_val_loss": 2.5, "losses": [3.0, 2.9]}}}},
        "perf": {"overhead_ratio": 1.05, "device": "cpu"}}
NOT_A_NUMBER = st.one_of(st.text(max_size=8), st.booleans(), st.lists(st.integers(), max_size=2),
                         st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                         st.sampled_from([float("nan"), float("inf"), float("-inf")]))
BAD_METRIC = st.one_of(NOT_A_NUMBER, st.floats(max_value=-1e-9, allow_nan=False,
                                               allow_infinity=False))
SEED = ("scenarios", "baseline", "seeds", "0")


@st.composite
def damaged_baselines(draw):
    b = json.loads(json.dumps(GOOD))
    where = draw(st.sampled_from(["metric", "loss", "perf", "environment", "format", "shape"]))
    if where == "metric":
        metric = draw(st.sampled_from(["n_events", "severity", "steps_to_target",
                                       "final_val_loss"]))
        b["scenarios"]["baseline"]["seeds"]["0"][metric] = value = draw(BAD_METRIC)
        expect = f"scenarios.baseline.seeds.0.{metric} = "
    elif where == "loss":
        value = draw(NOT_A_NUMBER)
        b["scenarios"]["baseline"]["seeds"]["0"]["losses"][1] = value
        expect = "scenarios.baseline.seeds.0.losses[1] = "
    elif where == "perf":
        value = draw(st.one_of(NOT_A_NUMBER, st.floats(max_value=0, allow_nan=False)))
        b["perf"]["overhead_ratio"] = value
        expect = "perf.overhead_ratio = "
    elif where == "environment":
        value = draw(st.one_of(st.lists(st.text(max_size=3), max_size=2),
                               st.dictionaries(st.text(max_size=3), st.text(max_size=3)),
                               st.sampled_from([float("nan"), float("inf"), True])))
        b["environment"]["device"] = value
        expect = "environment.device = "
    elif where == "format":
        b["format"] = draw(st.one_of(st.integers().filter(lambda x: x != 1), st.text(max_size=4),
                                     st.none()))
        expect = "format = "
    else:
        key = draw(st.sampled_from(["environment", "scenarios", "perf"]))
        b[key] = draw(st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=4),
                                st.integers()))
        expect = f"{key} = "
    return json.dumps(b), expect


@CASES
@given(case=damaged_baselines())
def test_bench_refuses_a_damaged_baseline_before_running(tmp_path, capsys, case):
    text, expect = case
    sb = fresh(tmp_path)
    (sb / "suites").mkdir()
    (sb / "suites" / "tiny.toml").write_text(SUITE)
    (sb / "baselines").mkdir()
    (sb / "baselines" / "tiny.json").write_text(text)
    line = refused(["bench", "--suite", "suites/tiny.toml", "--results", "r"], sb, capsys,
                   expect=expect)
    assert "not a bench baseline of format 1" in line


SUITE_VALUES = st.one_of(
    st.sampled_from(["inf", "-inf", "nan", "true", '"high"', "[1]", "{ a = 1 }", "-1",
                     "1e300", "9" * 40]),
    st.floats(allow_nan=False, allow_infinity=False, max_value=-1e-6).map(repr))


@CASES
@example(key="perf.tolerance", value="{ a = 1 }")  # found by this fuzz: named without its value
@given(key=st.sampled_from(["level", "min_effect.n_events", "min_effect.severity",
                            "min_effect.steps_to_target", "min_effect.final_val_loss",
                            "perf.tolerance.mfu", "perf.tolerance.overhead_ratio",
                            "perf.tolerance", "perf.sweep_steps", "perf.overhead_repeats"]),
       value=SUITE_VALUES)
def test_bench_refuses_a_suite_number_that_is_not_finite_or_out_of_range(tmp_path, capsys,
                                                                         key, value):
    sb = fresh(tmp_path)
    table, _, name = key.rpartition(".")
    if key == "level":
        text = SUITE.replace("level = 0.2", f"level = {value}")
    elif table == "perf":
        text = SUITE.replace("report_trials = 0", f"report_trials = 0\n{name} = {value}")
    elif table == "perf.tolerance":
        text = SUITE.replace("report_trials = 0", f"report_trials = 0\ntolerance = "
                                                  f"{{ {name} = {value} }}")
    else:
        text = SUITE.replace("level = 0.2", f"level = 0.2\nmin_effect = {{ {name} = {value} }}")
    (sb / "s.toml").write_text(text)
    refused(["bench", "--suite", "s.toml", "--update-baseline", "--results", "r"], sb, capsys,
            expect=f"bench.{key} = ")


# --- paths that are no regular file ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/null"])
@pytest.mark.parametrize("command", ["train", "train-json", "sweep", "bench", "baseline"])
def test_a_path_that_is_no_regular_file_is_named_and_never_opened(tmp_path, capsys, kind,
                                                                  command):
    sb = fresh(tmp_path)
    name = {"train-json": "c.json", "baseline": "b.json"}.get(command, "c.toml")
    if kind == "fifo":
        os.mkfifo(sb / name)  # no writer: opening it would block for ever
        expect = "is a FIFO (named pipe); must be a regular file"
    else:
        (sb / name).symlink_to(kind)  # an endless (or empty) device under a config's name
        expect = "is a character device; must be a regular file"
    if command == "baseline":
        (sb / "suites").mkdir()
        (sb / "suites" / "tiny.toml").write_text(SUITE)
    argv = {"train": ["train", name, "--dry-run"], "train-json": ["train", name, "--dry-run"],
            "sweep": ["sweep", name, "--dry-run", "--results", "r"],
            "bench": ["bench", "--suite", name, "--results", "r"],
            "baseline": ["bench", "--suite", "suites/tiny.toml", "--baseline", name]}[command]
    refused(argv, sb, capsys, expect=expect)
