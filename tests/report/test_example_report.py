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

