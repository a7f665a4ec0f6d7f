import optuna
from optuna.trial import TrialState

from spikebench.sweep.spec import load_sweep
from spikebench.sweep.studies import count_done, enqueue_plan, recover_interrupted, suggest

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_enqueue_plan_once_and_recover_an_arm_that_died_before_suggesting():
    spec = load_sweep("sweeps/default.toml")
    study = optuna.create_study(directions=["minimize", "minimize"])
    assert enqueue_plan(study, spec) == len(spec.arms)
    assert enqueue_plan(study, spec) == 0  # already there: nothing twice
    first = study.ask()  # the costliest arm, RUNNING, killed before its params were suggested
    assert first.user_attrs["arm"] == "bf16" and first.params == {}
    second = study.ask()
    values = suggest(second, spec.space)
    assert values == {k: spec.arms["fp16 + loss scaling"][k] for k in values}
    assert recover_interrupted(study, spec) == 2
    assert study.user_attrs["interrupted"] == [0, 1]
    assert [t.state for t in study.trials[:2]] == [TrialState.FAIL] * 2
    assert count_done(study) == 0  # interrupted trials do not count as done
    retried = [t for t in study.trials if t.user_attrs.get("retry_of") is not None]
    assert {t.user_attrs["arm"] for t in retried} == {"bf16", "fp16 + loss scaling"}
    # The retried arm gets its own values, not whatever a sampler would pick.
    asked = [study.ask() for _ in range(len(spec.arms))]
    base = next(t for t in asked if t.user_attrs.get("retry_of") == 0)
    assert base.user_attrs["arm"] == "bf16"
    assert suggest(base, spec.space) == {
        k: spec.arms["bf16"][k] for k in (p.key for p in spec.space)}


def test_the_costliest_arms_start_first_and_equal_ones_keep_the_specs_order():
    """Longest processing time first: on a CPU the half-precision arms (1.5-1.7x an fp32
    step there) and longer ones go first; on a GPU, where half is not slower, only tokens
    count, so the default sweep keeps its order."""
    spec = load_sweep("sweeps/default.toml")
    spec.arms["longer"] = {**spec.arms["baseline"], "train.steps": 400}

    def order(gpu):
        study = optuna.create_study(directions=["minimize", "minimize"])
        enqueue_plan(study, spec, gpu=gpu)
        return [study.ask().user_attrs["arm"] for _ in spec.arms]

    fp32 = [a for a in spec.arms if a not in ("bf16", "fp16 + loss scaling", "recipe", "longer")]
    assert order(False) == ["bf16", "fp16 + loss scaling", "recipe", "longer", *fp32]
    assert order(True) == ["longer", *(a for a in spec.arms if a != "longer")]


def test_reopening_a_study_with_choices_in_its_space_is_the_same_sweep(tmp_path):
    from spikebench.sweep.storage import default_storage, make_storage
    from spikebench.sweep.studies import open_study

    spec = load_sweep("sweeps/default.toml")  # precision.mode and curriculum.kind: choices
    url = default_storage(tmp_path)
    open_study(spec, make_storage(url))
    again = open_study(load_sweep("sweeps/default.toml"), make_storage(url))
    assert again.user_attrs["spec"]["name"] == "default"


def test_a_study_from_an_earlier_version_reopens_and_counts_its_retries(tmp_path):
    from spikebench.sweep.storage import default_storage, make_storage
    from spikebench.sweep.studies import open_study

    spec = load_sweep("sweeps/default.toml")
    url = default_storage(tmp_path)
    study = open_study(spec, make_storage(url))
    # Its stored definition predates a field of SweepSpec that has a default.
    old = {k: v for k, v in study.user_attrs["spec"].items() if k != "default_recipe"}
    study.set_user_attr("spec", old)
    study = open_study(load_sweep("sweeps/default.toml"), make_storage(url))
    # A retry made by Optuna's own callback names the trial it retries in system attrs.
    dist = {"x": optuna.distributions.FloatDistribution(0, 1)}
    study.add_trial(optuna.create_trial(state=TrialState.FAIL, params={"x": 0.5},
                                        distributions=dist))
    study.add_trial(optuna.create_trial(
        value=None, values=[1.0, 2.0], params={"x": 0.5}, distributions=dist,
        system_attrs={"failed_trial": 0, "retry_history": [0]}))
    assert count_done(study) == 1
