"""One module owns a study's layout: the names of its files appear nowhere else in the
package, and the layout's helpers name the folders the driver and workers make."""

from __future__ import annotations

import re
from pathlib import Path

from spikebench.study import layout as L

PACKAGE = Path(__file__).resolve().parents[2] / "spikebench"
NAMES = (L.STUDY_DB, L.TRIAL_JSON, L.RESULT_JSON, L.META_JSON, L.METRICS, L.SUMMARY_JSON,
         L.CONFIG_JSON)
# A quoted file name of the layout, or a seed/trial folder spelt out (f"seed-{...}", :05d).
LITERAL = re.compile(r"""["'](?:""" + "|".join(map(re.escape, NAMES))
                     + r""")["']|f["']seed-\{|:05d\}""")


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """Lines of code, not of docstrings or comments (a docstring may name a file)."""
    out, in_doc = [], False
    for i, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        quotes = text.count('"""') + text.count("'''")
        if in_doc or text.startswith(('"""', "'''")):
            if quotes % 2 == 1:
                in_doc = not in_doc
            continue
        if "another tool's file" not in line:  # e.g. a Hugging Face checkpoint's config.json
            out.append((i, line.split("#", 1)[0]))
    return out


def test_no_module_but_the_layout_spells_a_study_file_name():
    found = [f"{p.relative_to(PACKAGE.parent)}:{i}: {line.strip()}"
             for p in sorted(PACKAGE.rglob("*.py")) if p.name != "layout.py"
             for i, line in _code_lines(p) if LITERAL.search(line)]
    assert not found, "\n".join(found)


def test_the_layout_names_its_folders(tmp_path):
    lay = L.StudyLayout.of(tmp_path, "default")
    assert lay.db == tmp_path / "default" / "study.db"
    assert lay.seed(12, 3) == tmp_path / "default" / "trials" / "00012" / "seed-3"
    for name in ("seed-10", "seed-9", "seed-2", "seed-x", "seed-1.claim"):
        (lay.trial(1) / name).mkdir(parents=True)
    assert [L.seed_number(d) for d in L.seed_dirs(lay.trial(1))] == [2, 9, 10]
    assert L.seed_number("seed-") is None and L.seed_number("seed-٣") is None
