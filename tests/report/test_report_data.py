import shutil

import optuna
import pytest
from fixtures import ARMS, make_study, storage_url

from spikebench.report.data import UserError, load_study, seed_log, trials_frame
from spikebench.report.files import read_jsonl
from spikebench.sweep.spec import Param, SweepSpec


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
    assert st.spec is None and st.arms == {} and st.arm_trial("baseline") is None
    assert all(t.folder is None and t.arm == "search" for t in st.trials)


def test_a_spec_this_version_cannot_read_is_none_with_the_reason(tmp_path):
    url = _storage(tmp_path / "newer")
    s = optuna.create_study(storage=url, study_name="newer")
    s.set_user_attr("spec", {"name": "newer", "a_field_from_the_future": 1, "space": []})
    s.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    st = load_study(tmp_path / "newer")
    assert st.spec is None and st.arms == {} and st.space == []
    assert st.spec_problem.startswith("TypeError: ") and "a_field_from_the_future" in (
        st.spec_problem)


def test_the_spec_loads_through_the_sweeps_own_type(study_dir):
    st = load_study(study_dir)
    assert isinstance(st.spec, SweepSpec) and st.spec_problem == ""
    # The fixture stores a legacy spec: an "extra" key, a dimension without "low".
    assert st.space[0] == Param("schedule.warmup_ratio", low=0.0, high=0.1)
    assert st.space[2].choices == ("fp32", "fp16", "bf16")
