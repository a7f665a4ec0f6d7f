"""``spikebench spikes`` on logs that are not what they claim: each is refused in one line that
names the file and the line or row, never a traceback and never a silently misread curve."""

import json

import pytest

from spikebench.cli import main
from spikebench.errors import UserError
from spikebench.runs.text import read_log


def _refused(tmp_path, name, content, *needles):
    p = tmp_path / name
    (p.write_bytes if isinstance(content, bytes) else p.write_text)(content)
    with pytest.raises(UserError) as e:
        read_log(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg
    for n in needles:
        assert n in msg
    return msg


GOOD = '{"step": 1, "loss": 2.0}\n'


@pytest.mark.parametrize("line,reason", [
    ("[" * 100_000, "nested too deeply"),
    ('{"step": 2, "loss": 1' + "0" * 5000 + "}", "an integer of 5001 digits"),
    ('{"step": 2, "loss": 1' + "0" * 400 + "}", "an integer of 401 digits"),
    ('{"step": ' + "9" * 4301 + ', "loss": 1.0}', "an integer of 4301 digits"),
])
def test_jsonl_lines_past_the_parsers_limits_name_the_line(tmp_path, line, reason):
    _refused(tmp_path, "m.jsonl", GOOD + line + "\n" + GOOD, "line 2: not valid JSON", reason)


def test_jsonl_bytes_that_are_not_utf8_name_their_line(tmp_path):
    _refused(tmp_path, "m.jsonl", GOOD.encode() * 2 + b'{"step": 3, "loss": "\xff"}\n',
             "line 3: not UTF-8")


@pytest.mark.parametrize("text,line", [
    ("step,loss\n1,2.0,5,6\n2\n3,1.0\n", "line 2: 4 fields, the header has 2"),
    ("step,loss\n1,2.0\n2\n3,1.0\n", "line 3: 1 field, the header has 2"),
    ("step,loss\n1,2.0\n\n3,1.0,\n", "line 4: 3 fields, the header has 2"),
])
def test_a_ragged_csv_is_refused_with_its_line(tmp_path, text, line):
    _refused(tmp_path, "r.csv", text, line)


def test_an_unterminated_quote_is_refused_not_read_to_the_end(tmp_path):
    _refused(tmp_path, "q.csv", 'step,loss\n1,"2\n2,3\n3,1\n', "line 4: cannot read")


def test_blank_lines_quotes_a_bom_and_repeated_names_still_read(tmp_path):
    p = tmp_path / "ok.csv"
    p.write_text('\ufeffstep,"loss",loss\n\n0,"5.0",1\n1,4.0,1\n', encoding="utf-8")
    log = read_log(p)
    assert log.frame["step"].tolist() == [0, 1] and log.frame["loss"].tolist() == [5.0, 4.0]
    assert read_log(p, metric="loss.1").frame["loss"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("step", [2**63, 2**63 + 1, 2**64, 2**53, -1, -(2**63)])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_steps_outside_0_to_2_53_are_refused_not_wrapped(tmp_path, step, fmt):
    rows = [(1, 2.0), (step, 1.0)]
    text = ("step,loss\n" + "".join(f"{s},{v}\n" for s, v in rows) if fmt == "csv" else
            "".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in rows))
    _refused(tmp_path, f"s.{fmt}", text, "column 'step', row 2", str(step), "out of range")


def test_the_largest_exact_step_is_kept_and_distinct_steps_stay_distinct(tmp_path):
    p = tmp_path / "big.csv"
    p.write_text(f"step,loss\n{2**53 - 2},1.0\n{2**53 - 1},2.0\n")
    assert read_log(p).frame["step"].tolist() == [2**53 - 2, 2**53 - 1]


@pytest.mark.parametrize("name,content", [
    ("deep.jsonl", "[" * 100_000 + "\n"),
    ("huge.jsonl", '{"step": 1, "loss": 1' + "0" * 5000 + "}\n"),
    ("ragged.csv", "step,loss\n1,2.0,5,6\n2\n3,1.0\n"),
    ("wrap.csv", f"step,loss\n1,1.0\n{2**63},2.0\n"),
])
def test_the_cli_prints_one_line_and_exits_2(tmp_path, capsys, name, content):
    p = tmp_path / name
    p.write_text(content)
    assert main(["spikes", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spikebench spikes: error: ") and err.count("\n") == 1
    assert str(p) in err
