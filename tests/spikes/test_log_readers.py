"""The fast readers (spikebench.runs.csv_fast for plain CSV, json's C scanner for JSONL) read
exactly what the careful cell-by-cell reader reads, and refuse exactly what it refuses (then
the careful reader words the error); and what is not a log file is refused before it is
opened or held in memory."""

import math
import os
import socket

import numpy as np
import pytest
from fuzzkit import deadline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spikebench.runs.text as logs
import spikebench.spikes.logs as spikes_logs
from spikebench.errors import UserError
from spikebench.runs.text import read_log
from spikebench.spikes.logs import MAX_LINE, json_lines

FAST = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def outcome(path):
    """What read_log makes of ``path``: the columns and the frame, or the error."""
    try:
        log = read_log(path)
    except UserError as e:
        return "error", str(e)
    return "ok", (log.step_column, log.loss_column, log.grad_column), log.frame


def careful(path):
    """read_log with the fast paths off."""
    saved = logs._read_plain_csv, logs._jsonl_objects
    logs._read_plain_csv = lambda *a: None
    logs._jsonl_objects = lambda *a: None
    try:
        return outcome(path)
    finally:
        logs._read_plain_csv, logs._jsonl_objects = saved


def assert_same(fast, slow):
    assert fast[0] == slow[0], (fast, slow)
    if fast[0] == "error":
        assert fast == slow
        return
    assert fast[1] == slow[1]
    a, b = fast[2], slow[2]
    assert list(a.columns) == list(b.columns) and list(a.dtypes) == list(b.dtypes)
    for c in a.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if x.dtype.kind == "f":  # equal, NaN where NaN, and the same sign of zero
            assert np.array_equal(x, y, equal_nan=True), c
            assert ((np.signbit(x) == np.signbit(y)) | np.isnan(x)).all(), c
        else:
            assert np.array_equal(x, y), c


# --------------------------------------------------------------------------------- CSV

# Cells both parsers read (pandas' C parser and float()), and cells that only float() reads
# or neither does: a file with one of those goes to the careful reader, or is refused.
GOOD = st.one_of(
    st.floats(allow_nan=False).map(repr), st.integers(-10**6, 10**6).map(str),
    st.floats(0, 1e6).map(lambda x: f"{x:.3e}"), st.floats(0, 10).map(lambda x: f"{x:.2f}"),
    st.sampled_from(["-0", "+1", "00012", ".5", "5.", "1E5", "1e-400", "1e400", "-1",
                     "9007199254740991", "9007199254740993", "nan", "NaN", "-nan", "+NAN",
                     "inf", "-Infinity", "INF", "+inf", "", "0"]))
ODD = st.sampled_from(["1_000", "１", "0x10", "1.5e", " 1.5", "1.5 ", "\t2", " ", " nan",
                       "nan(1)", "null", "NA", "abc", "True", "\"3\"", "'4'", "9" * 400,
                       "2**53", "\x0c1"])
HEADERS = ["step,loss,grad_norm", "step,loss,grad_norm", "step,loss",
           "Step,train/loss,optim/grad_norm,extra", '"step","loss","grad_norm"',
           "step,loss,loss", "step,loss,grad_norm,data/injected",
           "_step,run - train/loss,run - train/loss__MIN", "step,value", "x,y", "step"]


@st.composite
def csv_files(draw):
    header = draw(st.sampled_from(HEADERS))
    ncols = header.count(",") + 1
    odd = draw(st.sampled_from([0, 0, 20, 200]))  # 1 in `odd` cells is odd (0: none)

    def cell():
        return draw(ODD if odd and draw(st.integers(0, odd - 1)) == 0 else GOOD)

    rows = []
    for i in range(draw(st.integers(0, 12))):
        step = str(draw(st.sampled_from([i, i, 2 * i + 3, 12 - i, 5])))
        k = ncols if draw(st.integers(0, 30)) else draw(st.integers(0, ncols + 1))
        rows.append(",".join([step if draw(st.integers(0, 30)) else cell()]
                             + [cell() for _ in range(k - 1)]))
    if rows and draw(st.integers(0, 15)) == 0:
        rows.insert(draw(st.integers(0, len(rows))), draw(st.sampled_from(["", "  ", ","])))
    eol = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    text = eol.join([header, *rows]) + (eol if draw(st.booleans()) else "")
    bom = "\ufeff" if draw(st.integers(0, 5)) == 0 else ""
    return (bom + text).encode("utf-8")


@FAST
@given(csv_files())
def test_the_fast_csv_reader_reads_and_refuses_as_the_careful_one(tmp_path, data):
    p = tmp_path / "log.csv"
    p.write_bytes(data)
    assert_same(outcome(p), careful(p))


def test_a_plain_csv_takes_the_fast_path(tmp_path, monkeypatch):
    p = tmp_path / "log.csv"
    p.write_text("step,loss,grad_norm\r\n" + "".join(
        f"{i},{3 - i / 100},{'' if i % 3 else 'nan'}\r\n" for i in range(50)))
    monkeypatch.setattr(logs, "_read_csv", None)  # the careful reader is not used
    log = read_log(p)
    assert log.frame["grad_norm_missing"].sum() == 33 and log.frame["grad_norm"].isna().all()


# ------------------------------------------------------------------------------- JSONL

NUMBER = st.one_of(st.floats().map(repr).map(lambda t: t.replace("inf", "Infinity")),
                   st.integers(-10**20, 10**20).map(str),
                   st.sampled_from(["NaN", "-Infinity", "1e400", "-0", "-0.0", "1E-5"]))
OTHER = st.sampled_from(["null", "true", '"1.5"', '"nan"', '""', '" "', "[1]", "{}",
                         "1" + "0" * 400, '"x"'])


@st.composite
def jsonl_files(draw):
    odd = draw(st.sampled_from([0, 0, 10, 100]))
    lines = []
    for i in range(draw(st.integers(0, 10))):
        if odd and draw(st.integers(0, 2 * odd)) == 0:
            lines.append(draw(st.sampled_from(["", "  ", "[1, 2]", "3", "{", '{"a": 1} x',
                                               '{"step": 1}{"step": 2}', "\ufeff{}"])))
            continue
        keys = draw(st.lists(st.sampled_from(["train/loss", "grad_norm", "optim/grad_norm",
                                              "data/injected", "val/loss"]), unique=True))
        if draw(st.integers(0, 6)):
            keys = ["step", "loss", *keys]

        def value(k, i=i):
            if k == "step" and draw(st.integers(0, 10)):
                return str(draw(st.sampled_from([i, i, 7])))
            return draw(OTHER if odd and draw(st.integers(0, odd)) == 0 else NUMBER)

        lines.append(" {" + ", ".join(f'"{k}": {value(k)}' for k in keys) + "} ")
    eol = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return (eol.join(lines) + eol).encode("utf-8")


@FAST
@given(jsonl_files(), st.sampled_from([1, 30, logs.JSONL_PIECE]))
def test_the_fast_jsonl_reader_reads_and_refuses_as_the_careful_one(tmp_path, data, piece):
    p = tmp_path / "metrics.jsonl"
    p.write_bytes(data)
    saved, logs.JSONL_PIECE = logs.JSONL_PIECE, piece  # parsed in pieces of about `piece`
    try:
        fast = outcome(p)
    finally:
        logs.JSONL_PIECE = saved
    assert_same(fast, careful(p))


# ------------------------------------------------------------- not a log file at all




def refused(path, *needles):
    with deadline(), pytest.raises(UserError) as e:
        read_log(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    for n in needles:
        assert n in msg, msg
    return msg


def test_a_fifo_with_no_writer_is_refused_not_waited_on(tmp_path):
    p = tmp_path / "log.csv"
    os.mkfifo(p)
    refused(p, "is a FIFO")


def test_a_device_is_refused():
    refused("/dev/zero", "is a device")
    refused("/dev/null", "is a device")


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.jsonl"
    if len(os.fsencode(path)) > 100:
        pytest.skip("socket path too long here")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        refused(path, "is a socket")


def test_a_name_too_long_is_refused(tmp_path):
    refused(tmp_path / ("x" * 300 + ".csv"), "too long")


@pytest.mark.parametrize("name", ["log.csv", "log.jsonl", "log.txt"])
def test_an_endless_line_is_refused_with_its_number(tmp_path, name):
    p = tmp_path / name
    head = "step,loss\n" if name.endswith(".csv") else '{"step": 1, "loss": 2.0}\n'
    p.write_text(head + "1" * (MAX_LINE + 10) + "\n" + head)
    refused(p, "line 2: longer than")


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("name", ["log.csv", "log.jsonl"])
def test_the_cap_is_on_characters_without_the_newline(tmp_path, monkeypatch, fast, name):
    monkeypatch.setattr(logs, "MAX_LINE", 40)
    monkeypatch.setattr(spikes_logs, "MAX_LINE", 40)  # json_lines' cap
    if not fast:
        monkeypatch.setattr(logs, "_read_plain_csv", lambda *a: None)
        monkeypatch.setattr(logs, "_jsonl_objects", lambda *a: None)
    p = tmp_path / name
    row = (("1,2." + "0" * 36) if name.endswith(".csv") else
           '{"step": 1, "loss": 2.' + "0" * 17 + "}")
    head = "step,loss\n" if name.endswith(".csv") else ""
    assert len(row) == 40
    p.write_text(head + row + "\r\n")
    assert read_log(p).frame["loss"].tolist() == [2.0]
    p.write_text(head + row + "0\n")
    refused(p, f"line {1 + bool(head)}: longer than 40 characters")


def test_json_lines_skips_a_long_line_and_reads_on(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"a": 1}\n' + "x" * (2 * MAX_LINE + 5) + '\n{"a": 2}\n')
    got = list(json_lines(p))
    assert [i for i, _, _ in got] == [1, 2, 3] and isinstance(got[1][1], ValueError)
    assert got[1][2] and got[2][1] == {"a": 2} and math.isclose(got[0][1]["a"], 1)
    p.write_text('{"a": 1}\n' + "x" * (MAX_LINE + 5))  # unfinished: a partial last line
    assert list(json_lines(p))[1][2] is False
