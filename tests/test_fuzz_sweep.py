"""Fuzzing what `spikebench sweep` must refuse before it writes anything (issue 37): storages
that cannot outlive the process or do not parse, results folders that cannot hold trials,
lax sweep files, metrics endpoints that cannot listen. Every generated case must be exit 2
and one line, leave its inputs byte-identical and write nothing at all
(:func:`fuzzkit.refused` over a fresh sandbox per case)."""

from __future__ import annotations

import json
import socket
import string
import tempfile
from pathlib import Path

import pytest
from fuzzkit import refused
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TINY = """[study]
name = "fz"
target_loss = 3.3
trials = 0
{study}
[config]
model.n_layer = 1
model.n_embd = 32
model.n_head = 2
data.seq_len = 32
data.batch_size = 4
train.steps = 12
train.eval_every = 6
{config}
[space]
{space}
{comparison}
"""
SPACE = '"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }'
CASES = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
NAME = st.text(string.ascii_lowercase + string.digits + "_-", min_size=1, max_size=12)


def sweep_file(folder: Path, *, study="", config="", space=SPACE, comparison="") -> str:
    (folder / "s.toml").write_text(TINY.format(study=study, config=config, space=space,
                                               comparison=comparison))
    return "s.toml"


def refuse(tmp_path: Path, capsys, write, argv: list[str], expect: str) -> str:
    """A fresh sandbox (Hypothesis reuses tmp_path across cases), filled by ``write``."""
    sandbox = Path(tempfile.mkdtemp(dir=tmp_path))
    args = write(sandbox)
    return refused([*argv[:1], *args, *argv[1:]], sandbox, capsys, expect=expect)


# --- storages: in memory (every spelling), or not a URL at all -----------------------------
MEMORY = st.builds("{}:///{}".format, st.sampled_from(["sqlite", "sqlite+pysqlite"]),
                   st.sampled_from([":memory:", "", "file::memory:", "file::memory:?cache=shared",
                                    "file:db?mode=memory&uri=true"])) | st.just("sqlite://")
SECRET = st.text(string.ascii_letters + string.digits, min_size=8, max_size=16)
MALFORMED = st.one_of(
    st.text(string.ascii_letters + string.digits + "/._-", max_size=30).filter(bool),
    st.builds("{}://h/db".format, st.text(string.ascii_lowercase, min_size=3, max_size=10)
              .filter(lambda s: s not in ("sqlite", "mysql", "oracle", "mssql"))),
    st.builds("postgresql://u:{}@127.0.0.1:{}/db".format, SECRET,
              st.text(string.ascii_letters, min_size=1, max_size=6)))


@CASES
@given(url=st.one_of(MEMORY, MALFORMED), in_file=st.booleans(),
       dry=st.sampled_from([[], ["--dry-run"]]))
def test_a_bad_storage_is_refused_and_writes_nothing(tmp_path, capsys, url, in_file, dry):
    def write(folder):
        if in_file:  # study.storage in the sweep file, not --storage
            return [sweep_file(folder, study=f"storage = {json.dumps(url)}")]
        return [sweep_file(folder), f"--storage={url}"]  # "=": a URL may start with "-"

    line = refuse(tmp_path, capsys, write, ["sweep", "--jobs", "0", *dry],
                  expect="--storage ")
    assert ("in-memory database" in line) if url.startswith("sqlite") else (
        "not a storage URL" in line or "cannot open" in line), line
    if "@" in url:  # a password is never printed
        assert url.split(":")[2].split("@")[0] not in line


# --- results folders that cannot hold the trials ------------------------------------------
@CASES
@given(parts=st.lists(NAME, min_size=1, max_size=3), where=st.sampled_from(
    ["results", "under", "study", "trials"]), dry=st.sampled_from([[], ["--dry-run"]]))
def test_an_unusable_results_folder_is_refused_and_writes_nothing(tmp_path, capsys, parts,
                                                                   where, dry):
    results = "/".join(parts)
    culprit = {"results": results, "under": parts[0], "study": f"{results}/fz",
               "trials": f"{results}/fz/trials"}[where]

    def write(folder):
        (folder / culprit).parent.mkdir(parents=True, exist_ok=True)
        (folder / culprit).write_text("a file\n")
        return [sweep_file(folder), f"--results={results}" + "/deeper" * (where == "under")]

    refuse(tmp_path, capsys, write, ["sweep", "--jobs", "0", *dry],
           expect=f"{culprit!r} is a file, not a folder")


# --- lax sweep files ----------------------------------------------------------------------
NUMBER = st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-1000, 1000)
CHOICES = st.lists(st.one_of(NUMBER, st.sampled_from(["fp32", "bf16", "off", "none"])),
                   min_size=1, max_size=4)
# Keys the tiny sweep's [config] does not set (a table there would clash in TOML itself).
TABLE_KEYS = ["schedule.warmup_ratio", "schedule.kind", "precision.mode", "curriculum.kind"]


@st.composite
def lax(draw) -> tuple[dict, str]:
    """(sweep-file parts, what the one line must say): a repeated choice, an int range
    with a fractional bound, or one key given as a table and dotted."""
    kind = draw(st.sampled_from(["choices", "int", "twice"]))
    if kind == "choices":
        choices = draw(CHOICES)
        dup = draw(st.sampled_from(choices))
        dup = float(dup) if isinstance(dup, int) and draw(st.booleans()) else dup  # 1 == 1.0
        choices.insert(draw(st.integers(0, len(choices))), dup)
        return {"space": f'"optim.lr" = {{ choices = {json.dumps(choices)} }}'}, \
            "must be distinct values"
    if kind == "int":
        low = draw(st.floats(-1e6, 1e6, allow_nan=False))
        high = low + draw(st.floats(0, 1e6))
        if low == int(low) and high == int(high):
            high += 0.5
        return {"space": f'"model.n_layer" = {{ low = {low!r}, high = {high!r}, int = true }}'}, \
            "must be a whole number with int = true"
    key = draw(st.sampled_from(TABLE_KEYS))
    table, leaf = key.split(".")
    a, b = draw(NUMBER), draw(NUMBER)
    lines = [f"{table} = {{ {leaf} = {a!r} }}", f'"{key}" = {b!r}']
    if draw(st.booleans()):
        lines.reverse()
    section = draw(st.sampled_from(["config", "baseline", "arm"]))
    if section == "config":
        return {"config": "\n".join(lines)}, f"config.{key} = "
    inline = "{ " + ", ".join(lines) + " }"
    if section == "baseline":
        return {"comparison": f"[comparison]\nbaseline = {inline}"}, \
            f"comparison.baseline.{key} = "
    return {"comparison": f"[comparison.arms]\nx = {inline}"}, f'comparison.arms."x".{key} = '


@CASES
@given(case=lax(), dry=st.sampled_from([[], ["--dry-run"]]))
def test_a_lax_sweep_file_is_refused_and_writes_nothing(tmp_path, capsys, case, dry):
    parts, expect = case
    line = refuse(tmp_path, capsys, lambda folder: [sweep_file(folder, **parts)],
                  ["sweep", "--jobs", "0", *dry], expect=expect)
    assert "given twice" in line or "distinct" in line or "whole number" in line


# --- metrics endpoints that cannot listen -------------------------------------------------
@pytest.fixture(scope="module")
def busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


LABEL = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=10)
# Names idna refuses before any lookup: a label over 63 characters, or an empty one.
BAD_HOST = st.one_of(
    st.builds("{}.{}".format, st.text(string.ascii_lowercase, min_size=64, max_size=80), LABEL),
    st.builds("{}..{}".format, LABEL, LABEL), st.builds(".{}".format, LABEL))


@CASES
@given(host=st.none() | BAD_HOST, cmd=st.sampled_from(
    [["sweep", "--dry-run"], ["sweep", "--jobs", "0"], ["train", "--dry-run"]]))
def test_a_metrics_endpoint_that_cannot_listen_is_refused(tmp_path, capsys, busy_port, host,
                                                          cmd):
    def write(folder):
        sweep = [sweep_file(folder)] if cmd[0] == "sweep" else []
        if host is None:  # the port is taken
            return [*sweep, "--metrics-port", str(busy_port)]
        return [*sweep, "--metrics-port", "0", "--metrics-host", host]

    refuse(tmp_path, capsys, write, cmd, expect="--metrics-port" if host is None else
           f"--metrics-host {host!r}: not a host name or address")
