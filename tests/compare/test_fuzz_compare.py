"""Fuzzing ``spikebench compare``'s arguments and inputs: paths that overlap or repeat (also
through a link), outputs among, inside or around the inputs, foreign reports, bad names,
steps and columns, and logs it cannot read beside the good ones. Every case either
succeeds (exit 0, the report in OUT) or is refused in one line (exit 2); neither changes a
file under the inputs, writes outside OUT, or prints a traceback."""

from __future__ import annotations

import math
import os
import random
import uuid
from pathlib import Path

from fuzzkit import changed, deadline, snapshot
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from spikebench.cli import main

FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _runs(box: Path) -> None:
    for g in "ab":
        for k in range(2):
            rng = random.Random(k + 10 * (g == "b"))
            lines = ["step,loss"] + [f"{s},{2.5 + 3 * math.exp(-s / 15) + rng.gauss(0, .02):.4f}"
                                     for s in range(41)]
            (box / "runs" / g).mkdir(parents=True, exist_ok=True)
            (box / "runs" / g / f"r{k}.csv").write_text("\n".join(lines) + "\n")


JUNK = {  # logs beside the good ones, each skipped with a note or refused in one line
    "none": None,
    "semicolon": ("semi.csv", "step;loss\n1;2\n"),
    "no_loss": ("acc.csv", "step,acc\n1,0.5\n"),
    "endless": ("endless.csv", "step,loss\n" + "9" * 200_000 + "\n"),
    "open_quote": ("quote.csv", 'step,loss\n1,"2\n' + "3,4\n" * 40_000),
    "ragged": ("ragged.csv", "step,loss\n1,2,3\n"),
    "binary": ("bin.jsonl", "\0\1\2"),
}
SKIPPED = ["none", "semicolon", "no_loss"]  # the junk a comparison goes on past
PATHS = [["runs/a", "runs/b"], ["runs", "runs/a"], ["runs/a", "runs/a"], ["runs/a", "link"],
         ["runs/a/r0.csv", "runs/a"], ["runs/a", "missing"], ["runs/b", "runs/a/"],
         ["runs/a/r0.csv", "runs/b/r1.csv"], ["", "runs/a"]]
OUTS = ["o", "runs/b", "runs/b/deep", "runs", ".", "", "foreign", "afile", "afile/x",
        "outlink", "outlink/x"]  # outlink: a link to runs/b
EXTRA = st.lists(st.sampled_from([
    ["--name", "report.md"], ["--name", "../x"], ["--name", ""], ["--name", "ok"],
    ["--max-step", "0"], ["--max-step", "20"], ["--max-step", "999999"],
    ["--metric", "nope"], ["--step", "nope"], ["--grad-metric", "nope"],
    ["--target-loss", "3"], ["--baseline", "b"], ["--baseline", "zz"], ["--unpaired"],
    ["--group", "x=*r0*"], ["--by", "lr"], ["--gap", "0"],
]), max_size=1)


@FUZZ
# Found by this fuzz: an output inside the folder of an input file was written.
@example(["runs/a/r0.csv", "runs/b/r1.csv"], "runs/b/deep", "none", [])
@given(st.one_of(st.just(PATHS[0]), st.sampled_from(PATHS)),  # half of them good paths,
       st.one_of(st.just("o"), st.sampled_from(OUTS)),  # and a good output: some succeed
       st.one_of(st.sampled_from(SKIPPED), st.sampled_from(sorted(JUNK))), EXTRA)
def test_compare_succeeds_or_refuses_in_one_line_and_writes_only_its_output(
        tmp_path, capsys, paths, out, junk, extra):
    box = tmp_path / uuid.uuid4().hex
    box.mkdir()
    _runs(box)
    (box / "link").symlink_to(box / "runs" / "a")
    (box / "outlink").symlink_to(box / "runs" / "b")
    (box / "foreign").mkdir()
    (box / "foreign" / "report.md").write_text("someone's notes")
    (box / "afile").write_text("x")
    if JUNK[junk]:
        name, text = JUNK[junk]
        (box / "runs" / "a" / name).write_text(text)
    argv = ["compare", *paths, "--out", out, *[a for pair in extra for a in pair]]
    before = snapshot(box)
    cwd = Path.cwd()
    os.chdir(box)
    try:
        with deadline(120):
            code = main(argv)
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert code in (0, 2), (code, err)
    event(f"exit {code}")  # --hypothesis-show-statistics: how many cases got through
    if code == 2:  # one line; the notes on what was skipped come only with a comparison
        assert err.count("\n") == 1 and err.startswith("spikebench compare: error: "), err
    else:
        assert all(x.startswith("spikebench compare: note: ") for x in err.splitlines()), err
    target = (box / out).resolve()
    moved = changed(before, snapshot(box))
    inputs = box / "runs"  # every input is below it (the link too)
    assert not {p for p in moved if inputs in p.parents}, (argv, sorted(map(str, moved))[:5])
    assert not {p for p in moved if p.resolve() != target and target not in p.resolve().parents}, \
        (argv, sorted(map(str, moved))[:5])
    if code == 0:
        assert (target / "report.md").is_file(), argv
