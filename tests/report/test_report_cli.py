import optuna
from fixtures import storage_url

from spikebench.cli import main
from spikebench.report import report_dir


def _cli(argv):
    return main(["report", *argv])


def test_cli_errors_exit_2_with_one_line(tmp_path, capsys):
    assert _cli([str(tmp_path / "missing"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spikebench report: error: ") and "no such folder" in err
    assert err.count("\n") == 1
    (tmp_path / "x").mkdir()
    assert _cli([str(tmp_path / "x")]) == 2
    assert "no study.db" in capsys.readouterr().err
    url = storage_url(tmp_path / "fresh")
    optuna.create_study(storage=url, study_name="fresh")
    assert main(["report", str(tmp_path / "fresh")]) == 2
    assert "no trials yet" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_out_dir_is_named_after_the_results_folder(tmp_path):
    assert report_dir(tmp_path / "default" / "", "reports").parts[-2:] == (
        "reports", "default")


def test_cli_writes_reports_named_after_the_folder(built):
    out = built["root"] / "reports" / "nocomp"
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    assert (out / "pareto.png").is_file()


def test_an_out_that_cannot_be_written_is_named_in_one_line(built, capsys):
    blocker = built["root"] / "a-file"
    blocker.write_text("not a folder")
    assert _cli([str(built["root"] / "nocomp"), "--out", str(blocker / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"--out {blocker / 'r'}: cannot write the report (" in err
    assert blocker.read_text() == "not a folder"
