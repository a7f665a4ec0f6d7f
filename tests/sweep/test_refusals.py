"""What `spikebench sweep` refuses before it writes anything (issue 37, items 2, 4, 5, 7, 8
and 9): storages that vanish at exit, unusable results folders, lax sweep files, a metrics
endpoint that cannot listen. Each is one line and exit 2, and leaves the sandbox as it was
(:func:`fuzzkit.refused`); a trial the driver cannot start is given back."""

from __future__ import annotations

import socket

import optuna
import pytest
from fuzzkit import refused
from optuna.trial import TrialState
from sweep_helpers import write_sweep

from spikebench.cli import main
from spikebench.sweep.storage import default_storage, mask_url
from spikebench.sweep.studies import count_done

SPACE = '"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }\n'
BASELINE = 'baseline = { "schedule.warmup_ratio" = 0.0 }\n'


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://", "sqlite:///",
                                 "sqlite+pysqlite:///:memory:",
                                 "sqlite:///file::memory:?cache=shared",
                                 "sqlite:///file:s?mode=memory&uri=true"])
@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_a_storage_that_vanishes_at_exit_is_refused(tmp_path, capsys, url, dry):
    sweep = write_sweep(tmp_path, trials=0)
    line = refused(["sweep", sweep.name, "--storage", url, "--jobs", "0", *dry], tmp_path,
                   capsys, expect="in-memory database")
    assert f"--storage {url}:" in line


@pytest.mark.parametrize("url, expect", [
    ("postgresql://bob@127.0.0.1:1/db", "postgresql://bob@127.0.0.1:1/db: cannot open"),
    ("postgresql://bob:s3cret@127.0.0.1:1/db", "postgresql://bob:***@127.0.0.1:1/db"),
    ("sqlite:///nowhere/study.db", "cannot open"),
    ("bogus", "not a storage URL"),
    ("nosuchdb://h/x", "not a storage URL")])
def test_a_refused_storage_leaves_no_study_folder(tmp_path, capsys, url, expect):
    # The study folder and its .lock used to be made before the storage was opened.
    sweep = write_sweep(tmp_path, trials=0)
    line = refused(["sweep", sweep.name, "--storage", url, "--jobs", "0"], tmp_path, capsys,
                   expect=expect)
    assert "s3cret" not in line and "postgresql:***" not in line


def test_a_study_of_another_definition_is_refused_before_any_file(tmp_path, capsys):
    db = tmp_path / "db"
    db.mkdir()
    url = f"sqlite:///{db / 'shared.db'}"
    first = write_sweep(tmp_path, trials=0, space=SPACE, comparison=BASELINE)
    assert main(["sweep", str(first), "--storage", url, "--jobs", "0",
                 "--results", str(tmp_path / "a")]) == 0
    other = write_sweep(tmp_path / "db", trials=0, steps=18, space=SPACE, comparison=BASELINE)
    capsys.readouterr()
    refused(["sweep", str(other), "--storage", url, "--jobs", "0", "--results",
             str(tmp_path / "b")], tmp_path, capsys, expect="different sweep definition")


@pytest.mark.parametrize("case", ["file", "under a file", "study folder", "trials folder"])
@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_an_unusable_results_folder_is_one_line(tmp_path, capsys, case, dry):
    sweep = write_sweep(tmp_path, trials=0)
    results, culprit = {"file": ("r", "r"), "under a file": ("r/x", "r"),
                        "study folder": ("r", "r/tiny"),
                        "trials folder": ("r", "r/tiny/trials")}[case]
    (tmp_path / culprit).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / culprit).write_text("")
    refused(["sweep", sweep.name, "--results", results, "--jobs", "0", *dry], tmp_path,
            capsys, expect=f"{culprit!r} is a file, not a folder")


def test_mask_url_keeps_a_url_without_password():
    assert mask_url("postgresql://bob@h:5432/x") == "postgresql://bob@h:5432/x"
    assert mask_url("postgresql://bob:p@ss@h/x") == "postgresql://bob:***@h/x"
    assert mask_url("postgresql://h/x?user=bob&password=pw") == \
        "postgresql://h/x?user=bob&password=***"


TWICE = '{ schedule = { warmup_ratio = 0.0 }, "schedule.warmup_ratio" = 0.05 }'
LAX = [  # (a line for [config], [space], [comparison], what the one line must hold)
    ("", '"optim.lr" = { choices = [0.001, 0.002, 0.001] }\n', "",
     'space."optim.lr".choices = [0.001, 0.002, 0.001]: must be distinct values'),
    ("", '"optim.clip" = { choices = ["off", 1.0, "none"] }\n', "",
     '"none" repeats an earlier choice'),
    ("", '"model.n_layer" = { low = 1, high = 2.5, int = true }\n', "",
     'space."model.n_layer".high = 2.5: must be a whole number with int = true'),
    # The tiny sweep's [config] has optim.lr = 1e-2, a table optim in TOML's eyes.
    ('"optim.lr" = 2e-3\n', SPACE, "", "config.optim.lr = 0.01: given twice (also as 0.002)"),
    ("", SPACE, f"baseline = {TWICE}\n",
     "comparison.baseline.schedule.warmup_ratio = 0.05: given twice (also as 0.0)"),
    ("", SPACE, f"[comparison.arms]\nw = {TWICE}\n",
     'comparison.arms."w".schedule.warmup_ratio = 0.05: given twice'),
    ("", '"optim" = { choices = [{ lr = 1e-3 }, { lr = 1e-2 }] }\n', "",
     'space."optim" = {"choices": [{"lr": 0.001}, {"lr": 0.01}]}: optim is a table of the '
     "config, not one value: name one of its keys (optim.lr, "),
    ("", SPACE, 'grid = { "optim" = [{ lr = 1e-2 }] }\n',
     'comparison.grid."optim" = [{"lr": 0.01}]: optim is a table of the config'),
]


@pytest.mark.parametrize("config, space, comparison, expect", LAX)
def test_a_lax_sweep_file_is_refused_naming_key_and_value(tmp_path, capsys, config, space,
                                                          comparison, expect):
    sweep = write_sweep(tmp_path, trials=0, space=space, comparison=comparison)
    sweep.write_text(sweep.read_text().replace("[config]\n", "[config]\n" + config))
    for run in (["--dry-run"], ["--jobs", "0"]):
        line = refused(["sweep", sweep.name, *run], tmp_path, capsys, expect=expect)
        assert "Config(" not in line  # no internal dataclass in a message


@pytest.mark.parametrize("cmd", [["train", "--dry-run"], ["sweep", "s.toml", "--dry-run"]])
def test_dry_run_refuses_a_busy_metrics_port_and_a_bad_host(tmp_path, capsys, cmd):
    write_sweep(tmp_path, name="s", trials=0)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        refused([*cmd, "--metrics-port", port], tmp_path, capsys,
                expect=f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}")
    # idna's UnicodeError (a label over 63 characters), and an empty label.
    for host in ["a" * 64 + ".example", "bad..host"]:
        refused([*cmd, "--metrics-port", "0", "--metrics-host", host], tmp_path, capsys,
                expect=f"--metrics-host {host!r}: not a host name or address")


def test_a_trial_the_driver_cannot_start_is_given_back(tmp_path, capsys):
    # Its folder is a file: the trial fails through no fault of its own. It is given back
    # (not counted), the sweep stops with one line, and the same command, once the folder
    # is mended, runs the whole plan.
    sweep = write_sweep(tmp_path, trials=0, space=SPACE, comparison=BASELINE)
    trials = tmp_path / "r" / "tiny" / "trials"
    trials.mkdir(parents=True)
    (trials / "00000").write_text("")
    argv = ["sweep", str(sweep), "--results", str(tmp_path / "r"), "--jobs", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "given back" in err[-1] and "trial #0" in err[-1], err
    study = optuna.load_study(study_name="tiny",
                              storage=default_storage(tmp_path / "r" / "tiny"))
    assert study.trials[0].state == TrialState.FAIL and study.trials[0].user_attrs["given_back"]
    assert count_done(study) == 0
    (trials / "00000").unlink()
    assert main(argv) == 0
    study = optuna.load_study(study_name="tiny",
                              storage=default_storage(tmp_path / "r" / "tiny"))
    assert count_done(study) == 2
    assert sorted(t.user_attrs["arm"] for t in study.trials
                  if t.state == TrialState.COMPLETE) == ["baseline", "recipe"]
