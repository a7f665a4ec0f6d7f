import pytest
from sweep_helpers import write_sweep

from spikebench.cli import main
from spikebench.errors import UserError
from spikebench.sweep.spec import ARTICLE_RECIPE, load_sweep
from spikebench.sweep.storage import mask_url
from spikebench.sweep.studies import fixed_params


def test_default_sweep_loads_with_full_comparison():
    spec = load_sweep("sweeps/default.toml")
    assert list(spec.arms)[0] == "baseline" and list(spec.arms)[-1] == "recipe"
    keys = {p.key for p in spec.space}
    assert keys == {"schedule.warmup_ratio", "optim.clip", "precision.mode", "curriculum.kind"}
    # Every arm is the baseline plus its own change only.
    base = spec.arms["baseline"]
    for arm, values in spec.arms.items():
        changed = {k for k in keys if values[k] != base[k]}
        if arm not in ("baseline", "recipe"):
            assert len(changed) == 1, arm
    assert spec.arms["recipe"]["optim.clip"] == 1.0 and base["optim.clip"] is None
    assert spec.arms["baseline"]["curriculum.kind"] == "off"


def test_off_param_maps_to_switch():
    spec = load_sweep("sweeps/default.toml")
    clip = next(p for p in spec.space if p.key == "optim.clip")
    assert clip.fixed(None) == {"optim.clip/on": False}
    assert clip.fixed(1.0) == {"optim.clip/on": True, "optim.clip": 1.0}
    assert fixed_params(spec.space, spec.arms["clip 1.0"])["optim.clip"] == 1.0


def test_overrides_reach_base_config():
    spec = load_sweep("sweeps/default.toml", ["train.steps=40"])
    assert spec.steps == 40 and spec.base["train.steps"] == 40


def test_every_study_has_baseline_and_article_recipe(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[study]\ntarget_loss = 3.0\n[config]\noptim.lr = 3e-3\n'
                 '[space]\n"optim.lr" = { low = 1e-4, high = 1e-2, log = true }\n')
    spec = load_sweep(f)
    assert spec.default_recipe and list(spec.arms) == ["baseline", "recipe"]
    assert spec.arms["baseline"] == {"optim.lr": 3e-3}
    # Outside the space the recipe's values are that arm's config overrides.
    assert spec.arms["recipe"] == {"optim.lr": 3e-3, **ARTICLE_RECIPE}
    assert fixed_params(spec.space, spec.arms["recipe"]) == {"optim.lr": 3e-3}
    # A declared recipe replaces the article's.
    f.write_text(f.read_text() + '[comparison]\nrecipe = { "optim.lr" = 1e-3 }\n')
    spec = load_sweep(f)
    assert not spec.default_recipe and spec.arms["recipe"] == {"optim.lr": 1e-3}


def test_mask_url():
    assert mask_url("postgresql://bob:s3cr:et@db.example:5432/x") == \
        "postgresql://bob:***@db.example:5432/x"
    assert mask_url("sqlite:///r/study.db") == "sqlite:///r/study.db"
    assert mask_url("bob:s3cret@db.example/x") == "bob:***@db.example/x"
    assert mask_url("postgresql+psycopg2://bob:pw@h/x") == "postgresql+psycopg2://bob:***@h/x"
    assert mask_url("postgresql://h:5432/x") == "postgresql://h:5432/x"


BAD = [
    ('study = 5\n', "study = 5: must be a table"),
    ('config = 5\n[study]\ntarget_loss = 3.0\n', "config = 5: must be a table"),
    ('[study]\ntarget_loss = 3.0\n[comparison]\nbaseline = 5\n',
     "comparison.baseline = 5: must be a table"),
    ('[study]\ntarget_loss = 3.0\n[comparison]\narms = 5\n',
     "comparison.arms = 5: must be a table of arms"),
    ('[study]\ntarget_loss = 3.0\n[comparison.arms]\nbaseline = { "optim.clip" = 1.0 }\n',
     "comparison.arms.baseline = {\"optim.clip\": 1.0}: 'baseline' is declared as"),
    ('[study]\ntarget_loss = 3.0\nspike_limit = -1\n', "study.spike_limit = -1: must be"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"train.steps" = { low = 10, high = 20, int = true }\n',
     'space."train.steps": varies train.steps across trials'),
    ('[study]\ntarget_loss = 3.0\n[config]\ntrain.tokens = 100000\n[space]\n'
     '"data.batch_size" = { choices = [4, 8] }\n',
     'space."data.batch_size": varies data.batch_size with train.tokens = 100000'),
    ('[study]\ntarget_loss = 3.0\n[config]\ntrain.tokens = 100000\n[comparison.arms]\n'
     'long = { "data.seq_len" = 64 }\n',
     'comparison arm "long": data.seq_len: varies data.seq_len with train.tokens'),
    ('[study]\ntarget_loss = inf\n', "study.target_loss = inf: must be a validation"),
    ('[study]\ntarget_loss = 3.0\n[nonsense]\n', "unknown table 'nonsense'"),
    ('[study]\ntarget_loss = 3.0\ncolour = 1\n', "unknown key 'study.colour'"),
    ('[study]\n', "study.target_loss = null: must be a validation loss > 0"),
    ('[study]\ntarget_loss = 3.0\nobjective = "both"\n', 'study.objective = "both"'),
    ('[study]\ntarget_loss = 3.0\npruner = "median"\n', 'study.pruner = "median": must be "none"'),
    ('[study]\ntarget_loss = 3.0\nseeds = [1, 1]\n', "study.seeds = [1, 1]"),
    ('[study]\ntarget_loss = 3.0\nname = "../x"\n', 'study.name = "../x"'),
    ('[study]\ntarget_loss = 3.0\n[config]\noptim.lr = -1\n', "config: optim.lr = -1.0"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.lr" = { low = 1, high = 0.1 }\n',
     "low must be <= high"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.lr" = { low = 0, high = 1, log = true }\n',
     "must be > 0 on a log scale"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.clip" = { low = -1.0, high = 1.0 }\n',
     'space."optim.clip": optim.clip = -1.0'),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.nope" = { low = 0.1, high = 1.0 }\n',
     "unknown key 'optim.nope'"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"precision.mode" = { choices = ["fp8"] }\n',
     "precision.mode = 'fp8'"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.lr" = { low = 0.1, high = 1.0 }\n'
     '[comparison]\nbaseline = { "optim.lr" = 5.0 }\n',
     'comparison.baseline.optim.lr = 5.0: outside the search space'),
    ('[study]\ntarget_loss = 3.0\n[comparison.arms]\nx = { "optim.clip" = 0 }\n',
     'comparison.arms."x": optim.clip = 0.0'),
    ('[study]\ntarget_loss = 3.0\n[config]\noptim.lr = 1e-2\n[comparison]\n'
     'grid = { "optim.lr" = [3e-3, 3e-2] }\n',
     'comparison.grid."optim.lr" = [0.003, 0.03]: must include the base config\'s value 0.01'),
    ('[study]\ntarget_loss = 3.0\n[comparison]\ngrid = { "optim.lr" = 0.1 }\n',
     'comparison.grid."optim.lr" = 0.1: must be a non-empty list of distinct values'),
    ('[study]\ntarget_loss = 3.0\n[comparison]\ngrid = { "optim.lr" = [0.003, 0.003] }\n',
     'must be a non-empty list of distinct values'),
    ('[study]\ntarget_loss = 3.0\n[comparison]\ngrid = { "optim.lr" = [0.003, -1] }\n',
     'comparison.grid."optim.lr": optim.lr = -1.0'),
    ('[study]\ntarget_loss = 3.0\n[comparison]\ngrid = { "train.steps" = [10, 20, 300] }\n',
     'varies train.steps across trials'),
    ('[study]\ntarget_loss = 3.0\n[comparison]\ngrid = { "optim.lr" = [0.003, 0.3] }\n'
     '[comparison.arms]\nhot = { "optim.lr" = 0.3 }\n',
     'comparison arm "hot": optim.lr = 0.3: optim.lr is on the comparison grid'),
    ('[study]\ntarget_loss = 3.0\n[comparison]\nrecipe = false\n'
     'grid = { "precision.mode" = ["fp32", "fp16"] }\n[comparison.arms]\nskip = { "response.kind" = "skip_step" }\n',
     'comparison arm "skip @ precision.mode=fp16": response.kind = "skip_step": not with'),
    ('[study]\ntarget_loss = 3.0\n[comparison]\nrecipe = 1\n',
     'comparison.recipe = 1: must be a table, or false for no recipe arm'),
    ('[study]\ntarget_loss = 3.0\n[space]\n"curriculum.kind" = { choices = ["off", "easy_first"] }\n',
     "comparison.recipe (the article's recipe, run when the file declares none).curriculum.kind"
     ' = "seqlen": outside the search space'),
]


@pytest.mark.parametrize("text, fragment", BAD)
def test_bad_sweep_files_one_line(tmp_path, capsys, text, fragment):
    f = tmp_path / "s.toml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        load_sweep(f)
    assert fragment in str(e.value) and "\n" not in str(e.value)
    assert str(f) in str(e.value)
    assert main(["sweep", str(f), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err


def test_dry_run_prints_plan_and_runs_nothing(tmp_path, capsys):
    f = write_sweep(tmp_path, trials=3, seeds="[0, 1]")
    assert main(["sweep", str(f), "--dry-run", "--results", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "3 comparison arms + 3 search trials, x 2 seeds = 12 training runs" in out
    assert "optim.clip: float in [0.1, 10] log-uniform or \"off\"" in out
    assert not (tmp_path / "r").exists()


def test_off_reads_as_train_reads_it_in_choices_and_arms(tmp_path):
    # "off" among an optional key's choices is None, so the baseline's clip (None) fits;
    # an arm's "none" means no clipping, as `train --set optim.clip=none` does.
    f = tmp_path / "s.toml"
    f.write_text('[study]\ntarget_loss = 3.0\n[space]\n"optim.clip" = { choices = ["off", 1.0] }\n'
                 '[comparison.arms]\n"none" = { "optim.clip" = "none" }\n')
    spec = load_sweep(f)
    assert spec.space[0].choices == (None, 1.0)
    assert spec.arms["baseline"]["optim.clip"] is None and spec.arms["none"]["optim.clip"] is None
    # A literal "off" of a key that takes no None stays a value.
    f.write_text('[study]\ntarget_loss = 3.0\n[space]\n"curriculum.kind" = { choices = ["off", '
                 '"seqlen"] }\n')
    assert load_sweep(f).space[0].choices == ("off", "seqlen")


def test_grid_crosses_every_arm_and_keeps_plain_names_at_the_base(capsys):
    spec = load_sweep("sweeps/lr-stability.toml")
    lrs = [3e-3, 1e-2, 3e-2, 1e-1, 3e-1]
    assert spec.grid == {"optim.lr": lrs} and "recipe" not in spec.arms
    plain = [a for a in spec.arms if " @ " not in a]
    assert plain == ["baseline", "warmup 5%", "clip 1.0", "qk-layernorm", "z-loss 1e-4",
                     "bf16", "curriculum (seq-len warmup)"]
    assert len(spec.arms) == 7 * 5 and len(spec.seeds) >= 3
    for arm in plain:
        assert spec.arms[arm]["optim.lr"] == 1e-1
        at = {spec.arms[f"{arm} @ optim.lr={lr:g}"]["optim.lr"] for lr in lrs if lr != 1e-1}
        assert at == set(lrs) - {1e-1}
        # Crossing changes the LR only.
        hot = {k: v for k, v in spec.arms[f"{arm} @ optim.lr=0.003"].items() if k != "optim.lr"}
        assert hot == {k: v for k, v in spec.arms[arm].items() if k != "optim.lr"}
    assert spec.arms["qk-layernorm @ optim.lr=0.3"]["model.qk_norm"] is True
    base = spec.arms["baseline"]
    assert not base.get("model.qk_norm") and base.get("faults.burst", "none") == "none"
    assert main(["sweep", "sweeps/lr-stability.toml", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "35 comparison arms + 0 search trials, x 6 seeds = 210 training runs" in out
    assert "grid: every arm at optim.lr in [0.003, 0.01, 0.03, 0.1, 0.3]" in out


def test_grid_reads_off_as_every_other_table_does(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('[study]\ntarget_loss = 3.0\n[comparison]\nrecipe = false\n'
                 'grid = { "optim.clip" = ["off", 1.0] }\n')
    spec = load_sweep(f)
    assert spec.grid == {"optim.clip": [None, 1.0]}
    assert spec.arms["baseline"]["optim.clip"] is None
    assert spec.arms["baseline @ optim.clip=1"]["optim.clip"] == 1.0
