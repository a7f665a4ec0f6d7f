import re

from fixtures import ARMS, XSS_ARM, XSS_CHOICE

from spikebench.report.data import load_study
from spikebench.report.markdown import md_escape, render_markdown
from spikebench.report.sections import report_info


def _md(built, name):
    return built[name]["markdown"].read_text()


def test_md_escape():
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert md_escape("`code` *em* [link](u) back\\slash") == (
        "\\`code\\` \\*em\\* \\[link\\](u) back\\\\slash")
    assert md_escape("two\nlines\r") == "two lines"
    assert md_escape("two\nlines", cell=True) == "two<br>lines"


def _tables(md: str) -> list[list[str]]:
    """Consecutive runs of table lines."""
    out, cur = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def _cells(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_structure_and_first_table_is_the_strategy_table(built):
    md = _md(built, "main")
    heads = [line for line in md.splitlines() if line.startswith("## ")]
    assert [h.split(". ", 1)[0] for h in heads] == [f"## {i}" for i in range(1, 14)]
    assert md.startswith("# Spike report: main\n")
    # It opens with the summary: a sentence per claim, then the forest plot and curves; the
    # setup (environment, search space, definitions) comes last, after every result.
    assert heads[0].startswith("## 1. Summary") and heads[-1].startswith("## 13. Setup")
    summary = md.split(heads[0])[1].split(heads[1])[0]
    assert summary.count("\n- ") == 3 and "![" in summary
    assert "- +40% training success (success rate" in summary and ": inconclusive." in summary
    assert md.index("Corpus sha256:") > md.index(heads[-2])
    for label in ("Device:", "Precision (emulated or real):", "torch:", "Git:",
                  "Corpus sha256:", "Search space", "Spike definition:"):
        assert label in md
    tables = _tables(md)
    first = tables[0]  # the compact strategy table, then its detail
    assert "Spikes / 1k steps" in first[0] and "Article: expected effect" in first[0]
    assert len(first) == 2 + len(ARMS)
    assert "+40% training success, -25% training time" in first[-1]
    assert ": inconclusive" in first[-1]  # the recipe's row carries the claims' verdicts
    detail = tables[1]
    assert "Spike events / 1k steps" in detail[0] and len(detail) == len(first)
    claims = tables[2]
    assert len(claims) == 2 + 3 and "Verdict" in claims[0]
    # 3 matched seeds: no exact paired test can reach p < 0.05, so every verdict is open.
    verdicts = [re.split(r"(?<!\\)\|", row)[8].strip().split("<br>")[0] for row in claims[2:]]
    # Wall time is not judged: the fixture's recipe runs emulated bf16.
    assert verdicts == ["inconclusive", "inconclusive", "not judged"]
    assert "How verdicts are decided" in md
    # Every row of every table has as many cells as its header.
    for t in tables:
        assert len({_cells(line) for line in t}) == 1, t[0]
    trials = tables[-1]
    assert len(trials) == 2 + len(ARMS) + 2 + 1


def test_no_designed_comparison_is_stated_not_guessed(built):
    md = _md(built, "nocomp")
    one = md.split("## 1.")[1].split("## 2.")[0]
    assert "**Not available:** this study has no designed comparison" in one
    assert "|" not in one  # no table of guessed effects
    assert not _tables(md)[0][0].count("Spike events / 1k")


def test_user_strings_are_escaped_in_markdown(built):
    md = _md(built, "xss")
    assert "<script" not in md and "<img" not in md and "</td>" not in md
    assert md.startswith("# Spike report: &lt;script&gt;alert(1)&lt;/script&gt;\n")
    assert md_escape(XSS_ARM) in md and md_escape(XSS_CHOICE) in md
    for t in _tables(md):
        assert len({_cells(line) for line in t}) == 1


def test_render_is_deterministic(built):
    st = load_study(built["root"] / "main")
    assert render_markdown(report_info(st)) == render_markdown(report_info(st))
