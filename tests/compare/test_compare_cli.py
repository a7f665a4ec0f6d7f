"""``spikebench compare`` end to end: runs written as Lightning's CSVLogger leaves them (the
docs' example), read by :func:`spikebench.runs.read_runs`, compared into a report."""

from __future__ import annotations

import hashlib

import pytest

from spikebench.cli import main
from spikebench.compare.example import write_runs


def _tree(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    write_runs(root)
    return root


def test_compare_writes_the_report_and_the_study(runs, tmp_path, capsys):
    before = _tree(runs)
    out = tmp_path / "reports"
    argv = ["compare", str(runs), "--by", "gradient_clip_val", "--recipe", "1.0",
            "--target-loss", "2.6", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "12 runs in 2 groups, baseline null" in printed
    assert f"report: {out / 'report.md'} and {out / 'report.html'}" in printed
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert (out / "compare" / "study.db").is_file() and (out / "curves.png").is_file()
    # The header says what was compared and what was cut; the clipped runs ran 1,200 steps.
    assert "grouped by the parameter gradient_clip_val" in md
    assert "1.0: paired by seed with null" in md
    assert "every step after 1000 of 6 run(s)" in md
    # Three planted spikes per unclipped run, one per clipped run, over 1,000 steps.
    assert "| null    | null (baseline) | 3, 3, 3, 3, 3, 3" in md
    assert "| 1.0     | 1.0 (recipe)    | 1, 1, 1, 1, 1, 1" in md
    # The clipped runs descend faster: 400 -> 300 steps to the target, -25%, on 6 seeds.
    assert "Baseline → recipe: 400 → 300 (-25.0%) over 6 matched seeds" in md
    assert "lightning_logs/version_0" in md and "lightning-csv" in md
    assert "null (baseline)" in html and "<img" in html
    assert _tree(runs) == before  # the runs are read, never written

    # Again, unpaired, into the same folder: the comparison is replaced whole.
    assert main([*argv, "--unpaired"]) == 0
    md = (out / "report.md").read_text()
    assert "1.0: unpaired (--unpaired): the exact two-sample permutation test" in md
    assert "over 6 and 6 runs, unpaired" in md and "Fisher" in md
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["compare"]


@pytest.mark.parametrize("extra,message", [
    (["--baseline", "0.5"], "--baseline 0.5: not a group (the groups: null, 1.0)"),
    (["--group", "a=*/version_1", "--group", "b=nothing*"], "--group b=nothing*: matches no "
                                                            "run"),
    (["--by", "max_steps"], "--by max_steps: 12 of 12 runs do not say max_steps"),
])
def test_bad_input_is_one_line_and_writes_nothing(runs, tmp_path, capsys, extra, message):
    if extra[0] == "--group":
        argv = ["compare", str(runs), *extra, "--out", str(tmp_path / "out")]
    else:
        argv = ["compare", str(runs), *(extra if extra[0] == "--by" else
                                        ["--by", "gradient_clip_val", *extra]),
                "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("spikebench compare: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_folder_it_did_not_write_is_not_replaced(runs, tmp_path, capsys):
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "mine.txt").write_text("keep")
    argv = ["compare", str(runs), "--by", "gradient_clip_val", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "is not a comparison spikebench compare wrote" in capsys.readouterr().err
    assert (tmp_path / "compare" / "mine.txt").read_text() == "keep"
