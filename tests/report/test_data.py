import shutil

import optuna
import pytest
from fixtures import ARMS, make_study, storage_url

from spikebench import report_cmd
from spikebench.report.data import UserError, load_study, read_jsonl, seed_log, trials_frame


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory):
    return make_study(tmp_path_factory.mktemp("data"), folder="fix", name="the-study",
                      failed=1)


def test_load_study_reads_spec_trials_and_folders(study_dir):
    st = load_study(study_dir)
    assert st.name == "the-study"  # the study's own name, not the folder's
    assert list(st.arms) == list(ARMS)
    assert st.seeds == [0, 1, 2] and st.steps == 100 and st.objective == "multi"
    assert len(st.trials) == len(ARMS) + 2 + 1
    assert [t.number for t in st.trials] == sorted(t.number for t in st.trials)
    base = st.arm_trial("baseline")
    assert base.number == 0 and base.complete and base.folder == study_dir / "trials" / "00000"
    assert base.seed_values("n_events") == {0: 3, 1: 3, 2: 3}
    failed = st.trials[-1]
    assert failed.state == "FAIL" and not failed.complete and "out of memory" in failed.attrs[
        "error"]
    assert st.metas[0]["precision"] == "fp32"


def test_a_moved_results_folder_still_finds_its_trial_folders(study_dir, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(study_dir, moved)
    st = load_study(moved)
    assert st.arm_trial("baseline").folder == moved / "trials" / "00000"


def test_seed_log_and_tolerant_jsonl(study_dir, tmp_path):
    st = load_study(study_dir)
    log = seed_log(st.arm_trial("baseline"), 0)
    assert log["rows"][0]["step"] == 0 and log["summary"]["status"] == "completed"
    assert seed_log(st.arm_trial("baseline"), 99) is None
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1}\n\nnot json\n[1, 2]\n{"step": 2}\n{"step": 3, "tr')
    assert read_jsonl(p) == [{"step": 1}, {"step": 2}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_trials_frame_has_one_row_per_trial_and_prefixed_params(study_dir):
    df = trials_frame(load_study(study_dir))
    assert len(df) == len(ARMS) + 3
    assert {"number", "state", "arm", "spikes", "convergence", "param:precision.mode"} <= set(
        df.columns)
    assert df.loc[0, "arm"] == "baseline" and df.loc[0, "final_loss_median"] == pytest.approx(
        3.2)


def test_errors_are_one_line(tmp_path):
    with pytest.raises(UserError, match="no such folder"):
        load_study(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no study.db"):
        load_study(tmp_path / "empty")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "study.db").write_text("not a database at all" * 100)
    with pytest.raises(UserError, match="cannot read the Optuna storage"):
        load_study(tmp_path / "junk")


def _storage(d):
    return storage_url(d)


def test_empty_storage_and_study_without_trials(tmp_path):
    _storage(tmp_path / "nostudy")  # the schema, no study
    with pytest.raises(UserError, match="no study"):
        load_study(tmp_path / "nostudy")
    url = _storage(tmp_path / "fresh")
    optuna.create_study(storage=url, study_name="fresh")
    with pytest.raises(UserError, match="no trials yet"):
        load_study(tmp_path / "fresh")


def test_several_studies_pick_the_folders_namesake_or_refuse(tmp_path):
    url = _storage(tmp_path / "b")
    for name in ("a", "b"):
        s = optuna.create_study(storage=url, study_name=name)
        s.enqueue_trial({})
        s.optimize(lambda t: 1.0, n_trials=1)
    assert load_study(tmp_path / "b").name == "b"
    shutil.copytree(tmp_path / "b", tmp_path / "c")
    with pytest.raises(UserError, match="2 studies"):
        load_study(tmp_path / "c")


def test_a_plain_optuna_study_loads_with_an_empty_spec(tmp_path):
    url = _storage(tmp_path / "plain")
    s = optuna.create_study(storage=url, study_name="plain")
    s.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    st = load_study(tmp_path / "plain")
    assert st.spec == {} and st.arms == {} and st.arm_trial("baseline") is None
    assert all(t.folder is None and t.arm == "search" for t in st.trials)


def _cli(argv):
    parser = report_cmd.argparse.ArgumentParser(prog="spikebench")
    report_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["report", *argv])
    return args.func(args)


def test_cli_errors_exit_2_with_one_line(tmp_path, capsys):
    assert _cli([str(tmp_path / "missing"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spikebench report: error: ") and "no such folder" in err
    assert err.count("\n") == 1
    (tmp_path / "x").mkdir()
    assert _cli([str(tmp_path / "x")]) == 2
    assert "no study.db" in capsys.readouterr().err
    url = _storage(tmp_path / "fresh")
    optuna.create_study(storage=url, study_name="fresh")
    assert report_cmd.main([str(tmp_path / "fresh")]) == 2
    assert "no trials yet" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_out_dir_is_named_after_the_results_folder(tmp_path):
    assert report_cmd.out_dir_for(tmp_path / "default" / "", "reports").parts[-2:] == (
        "reports", "default")
