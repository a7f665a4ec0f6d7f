import re

import pytest
from fixtures import ARMS, XSS_ARM, XSS_CHOICE, XSS_NAME, make_study, make_xss_study

from spikebench import report_cmd
from spikebench.report import build_report
from spikebench.report import html as htmlmod
from spikebench.report.data import load_study
from spikebench.report.markdown import md_escape, render_markdown
from spikebench.report.sections import report_info


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("md")
    main = make_study(root, folder="main", failed=1)
    nocomp = make_study(root, folder="nocomp", arms={}, search=3, seeds=(0, 1))
    xss = make_xss_study(root)
    # The no-comparison report goes through the command line, as a user would write it.
    assert report_cmd.main([str(nocomp), "--out", str(root / "reports")]) == 0
    return {"main": build_report(main, root / "out-main"),
            "nocomp": {"markdown": root / "reports" / "nocomp" / "report.md"},
            "xss": build_report(xss, root / "out-xss"), "root": root}


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
    assert [h.split(". ", 1)[0] for h in heads] == [f"## {i}" for i in range(1, 9)]
    assert md.startswith("# Spike report: main\n")
    for label in ("Device:", "Precision (emulated or real):", "torch:", "Git:",
                  "Corpus sha256:", "Search space", "Spike definition:"):
        assert label in md
    tables = _tables(md)
    first = tables[0]
    assert "Spike events / 1k steps" in first[0] and "Article: expected effect" in first[0]
    assert len(first) == 2 + len(ARMS)
    assert "+40% training success, -25% training time" in first[-1]
    claims = tables[1]
    assert len(claims) == 2 + 3 and "Verdict" in claims[0]
    assert all(re.search(r"supported|inconclusive", row) for row in claims[2:])
    assert "How verdicts are decided" in md
    # Every row of every table has as many cells as its header.
    for t in tables:
        assert len({_cells(line) for line in t}) == 1, t[0]
    trials = tables[-1]
    assert len(trials) == 2 + len(ARMS) + 2 + 1


def test_images_are_linked_and_written(built):
    md = _md(built, "main")
    for name in ("spike_counts", "curves", "pareto", "importance"):
        assert f"]({name}.png)" in md
        assert built["main"][name].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "lr" not in built["main"]
    assert "Learning-rate sensitivity\n\n**Not available:** the study did not sweep" in md


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


def test_html_is_self_contained_and_escaped(built):
    page = built["xss"]["html"].read_text()
    assert not re.search(r"(?:src|href)=[\"'](?!data:|#)", page)
    assert "http://" not in page and "https://" not in page
    assert page.count('src="data:image/png;base64,') == 4
    assert "<title>Spike report: &lt;script&gt;alert(1)&lt;/script&gt;</title>" in page
    assert XSS_NAME not in page and XSS_CHOICE not in page
    assert page.count("<script>") == 1  # the sorter, nothing else
    assert htmlmod.CSP in page and htmlmod._sha(htmlmod.SORT_JS) in htmlmod.CSP
    assert f"<script>{htmlmod.SORT_JS}</script>" in page
    assert f"<style>{htmlmod.CSS}</style>" in page
    assert '<table class="sortable">' in page


def test_render_is_deterministic(built):
    st = load_study(built["root"] / "main")
    assert render_markdown(report_info(st)) == render_markdown(report_info(st))


def test_cli_writes_reports_named_after_the_folder(built):
    out = built["root"] / "reports" / "nocomp"
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    assert (out / "pareto.png").is_file()
