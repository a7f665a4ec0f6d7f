"""A report reads the user's ``study.db`` and never writes it: not the schema Optuna would put
into an empty file, not a table it would recreate. Storages it cannot read whole are refused
in one line, their bytes unchanged."""

import hashlib
import shutil
import sqlite3

import pytest
from fixtures import make_study

from spikebench.cli import main


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    return make_study(tmp_path_factory.mktemp("readonly"), folder="ok", arms={"baseline": {}},
                      search=1, seeds=(0,))


def _refused(capsys, folder, out, needle):
    db = folder / "study.db"
    before = _sha(db)
    assert main(["report", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spikebench report: error: ") and err.count("\n") == 1
    assert str(db) in err and needle in err
    assert _sha(db) == before
    assert not out.exists()
    return err


def test_a_zero_byte_study_db_is_refused_and_stays_empty(tmp_path, capsys):
    (tmp_path / "zero").mkdir()
    (tmp_path / "zero" / "study.db").write_bytes(b"")
    _refused(capsys, tmp_path / "zero", tmp_path / "r", "none of Optuna's tables")
    assert (tmp_path / "zero" / "study.db").stat().st_size == 0


@pytest.mark.parametrize("table", ["trial_values", "version_info", "alembic_version"])
def test_a_storage_with_a_dropped_table_is_refused_not_repaired(healthy, tmp_path, capsys,
                                                                table):
    folder = tmp_path / "dropped"
    shutil.copytree(healthy, folder)
    con = sqlite3.connect(folder / "study.db")
    con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    _refused(capsys, folder, tmp_path / "r", f"no table {table}")
    con = sqlite3.connect(f"file:{folder / 'study.db'}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert table not in tables


def test_a_file_that_is_not_sqlite_is_refused_unchanged(tmp_path, capsys):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "study.db").write_bytes(b"not a database at all" * 100)
    _refused(capsys, tmp_path / "junk", tmp_path / "r", "cannot read the Optuna storage")


def test_a_healthy_storage_is_byte_for_byte_unchanged_by_a_report(healthy, tmp_path):
    db = healthy / "study.db"
    before, mtime = _sha(db), db.stat().st_mtime_ns
    assert main(["report", str(healthy), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "ok" / "report.md").is_file()
    assert _sha(db) == before and db.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in healthy.iterdir()) == ["study.db", "trials"]  # no journal


def test_the_hint_for_a_parent_folder_names_the_study_folders(healthy, tmp_path, capsys):
    parent = tmp_path / "results"
    shutil.copytree(healthy, parent / "base")
    (parent / "other").mkdir()
    assert main(["report", str(parent), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{parent}: no study.db" in err
    assert str(parent / "base") in err and "other" not in err
    assert "study.db," not in err and str(parent / "study.db") not in err


@pytest.mark.parametrize("sql,needle", [
    ("DELETE FROM version_info", "a report opens it read-only"),
    ("DELETE FROM alembic_version", "a report opens it read-only"),
    ("ALTER TABLE trial_values DROP COLUMN value_type", "no such column"),
])
def test_a_storage_optuna_would_write_to_is_refused_unchanged(healthy, tmp_path, capsys, sql,
                                                              needle):
    folder = tmp_path / "damaged"
    shutil.copytree(healthy, folder)
    con = sqlite3.connect(folder / "study.db")
    con.execute(sql)
    con.commit()
    con.close()
    _refused(capsys, folder, tmp_path / "r", needle)


def test_a_study_folder_named_with_uri_characters_is_read_in_place(healthy, tmp_path):
    # "?", "#" and "%" in a path would end or escape an SQLite URL: opened as a path, not a URL.
    odd = tmp_path / "a ?b#c%41" / "ok"
    shutil.copytree(healthy, odd)
    before = _sha(odd / "study.db")
    assert main(["report", str(odd), "--out", str(tmp_path / "r")]) == 0
    assert _sha(odd / "study.db") == before
    assert sorted(p.name for p in odd.parent.iterdir()) == ["ok"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a ?b#c%41", "r"]
