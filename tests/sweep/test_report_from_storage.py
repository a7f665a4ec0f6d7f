"""A study is its storage: the report made from the storage URL alone, with no trial folder
in sight, has the same tables as the report made from the results folder."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import optuna
import pytest
from sweep_helpers import write_sweep

from spikebench.errors import UserError
from spikebench.report import build_report
from spikebench.report.data import load_study_from_storage
from spikebench.study import records
from spikebench.study.layout import seed_dirs, seed_number

COMPARISON = ('baseline = { "optim.clip" = "off" }\n'
              '[comparison.arms]\n"clip 1.0" = { "optim.clip" = 1.0 }\n')


def spikebench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "spikebench", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def tables(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """A tiny finished sweep (two arms and one search trial, two seeds), SQLite."""
    tmp = tmp_path_factory.mktemp("swept")
    sweep = write_sweep(tmp, name="tiny", trials=1, seeds="[0, 1]", objective="single",
                        comparison=COMPARISON)
    done = spikebench("sweep", str(sweep), "--results", str(tmp / "results"), "--jobs", "1",
                      cwd=tmp)
    assert done.returncode == 0, done.stderr
    return tmp / "results" / "tiny"


def test_the_storage_alone_gives_the_same_tables(swept, tmp_path):
    from_folder = build_report(swept, tmp_path / "folder")["markdown"].read_text()
    # Another machine: only the storage, no trial folder anywhere it could look.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copyfile(swept / "study.db", elsewhere / "copy.db")
    url = f"sqlite:///{elsewhere / 'copy.db'}"
    done = spikebench("report", "--storage", url, "--study", "tiny", "--out",
                      str(tmp_path / "out"), cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    from_storage = (tmp_path / "out" / "tiny" / "report.md").read_text()
    assert tables(from_storage) == tables(from_folder)
    assert len(tables(from_folder)) > 20
    # It says where it was read from and where each trial's full logs stayed.
    assert f"Storage {url}, study tiny" in from_storage
    assert "Full logs: on " in from_storage and str(swept / "trials") in from_storage
    assert "Results folder" in from_folder and "Full logs" not in from_folder
    # The loss curves came from the storage too.
    assert (tmp_path / "out" / "tiny" / "curves.png").is_file()


def test_each_trial_left_its_records(swept):
    study = load_study_from_storage(f"sqlite:///{swept / 'study.db'}", "tiny")
    assert study.folder is None
    for t in study.trials:
        assert t.folder is None and t.stored is not None
        folder = swept / "trials" / f"{t.number:05d}"
        assert sorted(t.stored.seeds) == [seed_number(d) for d in seed_dirs(folder)]
        assert t.state != "COMPLETE" or sorted(t.stored.seeds) == [0, 1]
        for seed, rec in t.stored.seeds.items():
            if t.state == "COMPLETE":
                assert rec["summary"]["status"] in ("completed", "diverged")
            assert all("step" in r for r in rec["rows"])
            # The stored curve is the folder's, step for step (short runs are not thinned).
            log = folder / f"seed-{seed}" / "metrics.jsonl"
            log = log if log.is_file() else log.with_name("metrics.jsonl.partial")
            assert [r["step"] for r in rec["rows"] if "train/loss" in r] == [
                r["step"] for r in map(json.loads, log.read_text().splitlines())
                if "train/loss" in r]


def test_curves_are_thinned_to_a_bound_keeping_the_spike():
    points = [(s, 3.0 - s * 1e-4) for s in range(100_000)]
    points[61_234] = (61_234, 9.5)  # a one-step spike
    thinned = records.thin(points)
    assert len(thinned) <= 2 * records.BUCKETS
    assert [61_234, 9.5] in thinned
    assert thinned[0][0] == 0 and thinned == sorted(thinned)


def test_a_long_record_is_split_and_joined():
    big = {"summary": {"spikes": {"events": [{"onset": i} for i in range(20_000)]}}}
    parts = records.chunked({records.SEED_KEY + "0": big, records.TRIAL_KEY: {
        "job": None, "where": {}, "seeds": [0]}})
    assert parts[records.SEED_KEY + "0"]["chunks"] > 1
    assert all(len(v) <= records.CHUNK for k, v in parts.items() if k.count(":") == 3)
    back = records.load(parts)
    assert back.seeds[0]["summary"] == big["summary"]


@pytest.mark.parametrize(("url", "study", "says"), [
    ("sqlite:///{tmp}/none.db", "tiny", "no such file"),
    ("sqlite:///{empty}", "tiny", "not an Optuna storage (an empty database)"),
    ("sqlite:///{db}", "nope", "--study 'nope': no such study in sqlite:///"),
    ("postgresql://u:secret@127.0.0.1:1/db", "tiny", "--storage postgresql://u:***@127.0.0.1:1/db: cannot connect"),
    ("sqlite://", "tiny", "an in-memory database"),
])
def test_bad_storage_input_is_one_line_and_writes_nothing(swept, tmp_path, url, study, says):
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    url = url.format(tmp=tmp_path, db=swept / "study.db", empty=empty)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(UserError) as e:
        load_study_from_storage(url, study)
    assert says in str(e.value) and "\n" not in str(e.value) and "secret" not in str(e.value)
    assert sorted(tmp_path.iterdir()) == before  # no empty database left behind


def test_report_flags_are_checked(swept, tmp_path):
    for args, says in [((str(swept), "--storage", "sqlite:///x.db", "--study", "tiny"),
                        "not both"), (("--storage", "sqlite:///x.db"), "--study NAME is missing"),
                       ((), "give a results folder")]:
        done = spikebench("report", *args, "--out", str(tmp_path / "o"), cwd=tmp_path)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


def test_reading_the_storage_changes_nothing(swept):
    before = (swept / "study.db").read_bytes()
    load_study_from_storage(f"sqlite:///{swept / 'study.db'}", "tiny")
    assert (swept / "study.db").read_bytes() == before
    assert optuna.get_all_study_names(f"sqlite:///{swept / 'study.db'}") == ["tiny"]


def test_full_logs_go_to_the_artifact_store(tmp_path):
    store = tmp_path / "shared-artifacts"
    store.mkdir()
    sweep = write_sweep(tmp_path, name="art", trials=0, seeds="[0]", objective="single",
                        extra_study=f'artifacts = "{store}"\npruner = "none"',
                        comparison=COMPARISON)
    done = spikebench("sweep", str(sweep), "--results", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    url = f"sqlite:///{tmp_path / 'r' / 'art' / 'study.db'}"
    study = optuna.load_study(study_name="art", storage=url)
    for t in study.get_trials():
        [meta] = optuna.artifacts.get_all_artifact_meta(t, storage=study._storage)
        full = records.load(t.system_attrs).where["full_logs"]
        assert full == {"0": f"{store}/{meta.artifact_id}"}
        got = tmp_path / f"got-{t.number}.tar.gz"
        optuna.artifacts.download_artifact(
            artifact_store=optuna.artifacts.FileSystemArtifactStore(str(store)),
            artifact_id=meta.artifact_id, file_path=str(got))
        with tarfile.open(got) as tar:
            names = tar.getnames()
        assert {"seed-0/metrics.jsonl", "seed-0/summary.json", "seed-0/meta.json"} <= set(names)
        assert not any("checkpoint" in n for n in names)
    out = tmp_path / "rep"
    build_report(None, out, storage=url, study="art")
    n = len(study.get_trials())
    assert f"{n} trials in the artifact store {store}" in (out / "report.md").read_text()


@pytest.mark.parametrize(("where", "says"), [
    ("{tmp}/missing", "no such folder"), ("relative/path", "give an absolute path"),
    ("s3://", "give a bucket")])
def test_an_artifact_store_that_cannot_be_used_is_refused_before_anything(tmp_path, where,
                                                                          says):
    sweep = write_sweep(tmp_path, name="art", trials=0, seeds="[0]", objective="single",
                        extra_study=f'artifacts = "{where.format(tmp=tmp_path)}"',
                        comparison=COMPARISON)
    done = spikebench("sweep", str(sweep), "--results", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2 and "study.artifacts" in done.stderr and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()


def test_a_read_only_artifact_store_is_refused(tmp_path):
    if os.geteuid() == 0:
        store = tmp_path / "file-not-folder"
        store.write_text("")
        says = "no such folder"
    else:
        store = tmp_path / "ro"
        store.mkdir(mode=0o500)
        says = "cannot be written"
    sweep = write_sweep(tmp_path, name="art", trials=0, seeds="[0]", objective="single",
                        extra_study=f'artifacts = "{store}"', comparison=COMPARISON)
    done = spikebench("sweep", str(sweep), "--results", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2 and says in done.stderr, done.stderr
