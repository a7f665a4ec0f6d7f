"""The committed example report is the one the current code writes from the committed study.

``make example-report`` regenerates both; this fails when a change to the report's code
would change the example's sections, headings, summary sentences or the strategy and claims
tables (verdicts, marks and intervals) without the example being written again.
"""

import re
import shutil
from pathlib import Path

import pytest

from spikebench.report import build_report

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "example-default"


def _parts(md: str) -> dict[str, list[str]]:
    lines = md.splitlines()
    headings = [x for x in lines if x.startswith("#")]
    sections = re.split(r"^## ", md, flags=re.M)
    by_title = {s.split("\n", 1)[0]: s for s in sections[1:]}

    def table_rows(title_start: str) -> list[str]:
        body = next(v for k, v in by_title.items() if k.split(". ", 1)[-1].startswith(
            title_start))
        return [x for x in body.splitlines() if x.startswith("|")]

    return {
        "headings": headings,
        "summary": [x for x in lines if x.startswith("- ") and ": " in x][:3],
        "strategy": table_rows("The strategy table"),
        "claims": table_rows("The article's headline claims"),
    }


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("example")
    shutil.copytree(EXAMPLE / "study", tmp / "study")  # the report must not touch the repo
    return build_report(tmp / "study", tmp / "out")["markdown"].read_text()


def test_the_example_is_what_the_current_code_writes(rewritten):
    committed = (EXAMPLE / "report.md").read_text()
    old, new = _parts(committed), _parts(rewritten)
    for part in ("headings", "summary", "strategy", "claims"):
        assert new[part] == old[part], f"{part} differs: run `make example-report`"
    assert len(new["headings"]) >= 14 and len(new["claims"]) == 2 + 3



def _readme_example() -> tuple[list[str], str]:
    """The README's table of the example (its cells after the arm's name) and the
    paragraph after it, minus signs as the report prints them."""
    readme = (EXAMPLE.parents[1] / "README.md").read_text().replace("−", "-")
    start = readme.index("| arm | steps to 2.75")
    table, _, rest = readme[start:].partition("\n\n")
    cells = [c for row in table.splitlines()[2:] for c in row.split("|")[2:]]
    return cells, rest[:rest.index("[Reading a report]")]


def _scenarios_example() -> str:
    """docs/scenarios.md's bullets on the example report, after its tables."""
    doc = (EXAMPLE.parents[1] / "docs" / "scenarios.md").read_text().replace("−", "-")
    start = doc.index("- Every run's burst is one event")
    return doc[start:doc.index("## The LR-stability scenario")]


@pytest.mark.parametrize("where", ["README.md", "docs/scenarios.md"])
def test_the_sentences_about_the_example_match_its_report(where):
    cells, text = _readme_example() if where == "README.md" else ([], _scenarios_example())
    report = (EXAMPLE / "report.md").read_text().replace("\\", "")
    # Every figure quoted (a table cell, a percentage, an interval's end) is one the
    # committed report prints, at most rounded to fewer decimals.
    number = r"[-+]?\d+(?:\.\d+)?(?:e-?\d+)?%?"
    printed = {(x.endswith("%"), float(x.rstrip("%"))) for x in re.findall(number, report)}
    for figure in re.findall(number, " ".join(cells) + text):
        places = len(figure.rstrip("%").partition(".")[2])
        value = float(figure.rstrip("%"))
        assert any(p == figure.endswith("%") and round(x, places) == value
                   for p, x in printed), figure
    # The verdicts named are those of the judged claims in the report's claims table.
    rows = _parts((EXAMPLE / "report.md").read_text())["claims"][2:]
    shown = [re.split(r"(?<!\\)\|", row)[8].strip().split("<br>")[0] for row in rows]
    said = re.findall(r"\*([a-z ,]+)\*", text)
    assert len(said) == 1 and shown == [said[0], said[0], "not judged"]
    assert "Wall time is shown but not judged" in " ".join(text.split())
