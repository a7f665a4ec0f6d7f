import optuna
from fixtures import storage_url

from spikebench.report.blocks import Heading, Para
from spikebench.report.data import load_study
from spikebench.report.sections import SECTIONS, Info, document, headings, report_info


def test_report_info_has_every_section(study):
    info = report_info(study)
    assert list(info) == ["header", "summary", "strategy", "claims", "spike_counts", "cleaning", "curves",
                          "pareto", "importance", "lr_curves", "lr_sensitivity", "lr",
                          "precursors", "across_sizes", "trials", "setup"]


def test_one_list_names_every_section_and_numbers_the_titled_ones():
    assert [s.key for s in SECTIONS][0] == "header" and SECTIONS[0].title == ""
    assert headings() == [(s.key, f"{i}. {s.title}") for i, s in enumerate(SECTIONS[1:], 1)]
    assert {s.key for s in SECTIONS if s.plot} == {"summary", "spike_counts", "curves",
                                                   "pareto", "importance", "lr", "lr_curves"}


def _plain(root, name, spec=None):
    url = storage_url(root / name)
    s = optuna.create_study(storage=url, study_name=name)
    if spec is not None:
        s.set_user_attr("spec", spec)
    s.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    return load_study(root / name)


def _text(blocks) -> str:
    out = []
    for b in blocks:
        if isinstance(b, Para):
            out.append("".join(s.text for s in b.spans))
        elif isinstance(b, Heading):
            out.append(b.text)
    return "\n".join(out)


def test_a_study_without_a_spec_says_which_sections_are_empty(root):
    report = report_info(_plain(root, "plain"))
    text = _text(document(report))
    assert "has no spikebench sweep definition in its user attributes" in text
    assert "Not available: this study has no designed comparison" in text
    assert "Not available: the study did not vary the learning rate" in text
    assert all(isinstance(info, Info) for info in report.values())


def test_a_spec_that_cannot_be_read_is_named_not_guessed_from(root):
    st = _plain(root, "future", spec={"name": "future", "from_the_future": 1, "space": []})
    text = _text(document(report_info(st)))
    assert "sweep definition cannot be read (TypeError: " in text and "from_the_future" in text
    assert "sections that need it are empty" in text
