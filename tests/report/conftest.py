"""Shared fixture studies and reports for the report tests, built once per session.

pytest puts this folder on ``sys.path`` for it (prepend import mode, no ``__init__.py``), so
test files here and in ``sections/`` import the study builder as ``from fixtures import``.
A study is built once and shared, because Optuna writes each trial's attributes one row at
a time.
"""

import pytest
from fixtures import LR, SPACE, make_lr_study, make_study, make_xss_study

from spikebench.cli import main
from spikebench.report import build_report
from spikebench.report.data import load_study


@pytest.fixture(scope="session")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("sections")


@pytest.fixture(scope="session")
def study(root):
    return load_study(make_study(root, folder="main", failed=1))


@pytest.fixture(scope="session")
def nocomp(root):
    # No designed comparison, an LR dimension, no trial folders (a study copied bare).
    return load_study(make_study(root, folder="nocomp", arms={}, search=6,
                                 space=SPACE + [LR], folders=False))


@pytest.fixture(scope="session")
def lr_arms(root):
    # The LR-stability shape: comparison arms crossed with an LR grid, 6 seeds.
    return load_study(make_lr_study(root, "lr-arms", via="arms", folders=True))


@pytest.fixture(scope="session")
def lr_search(root):
    # The same grid and outcomes from search trials over categorical dimensions.
    return load_study(make_lr_study(root, "lr-search", via="search"))


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("md")
    main_dir = make_study(root, folder="main", failed=1)
    nocomp_dir = make_study(root, folder="nocomp", arms={}, search=3, seeds=(0, 1))
    xss = make_xss_study(root)
    # The no-comparison report goes through the command line, as a user would write it.
    assert main(["report", str(nocomp_dir), "--out", str(root / "reports")]) == 0
    return {"main": build_report(main_dir, root / "out-main"),
            "nocomp": {"markdown": root / "reports" / "nocomp" / "report.md"},
            "xss": build_report(xss, root / "out-xss"), "root": root}
