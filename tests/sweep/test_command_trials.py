"""Command trials: a sweep file's [trainer] runs the team's own script per seed, with real
processes: a nanoGPT-style script that writes only a CSV log (2 arms x 2 seeds, then a
report), a script on the run API pruned in a single-objective study, a failing command,
and the sweep file's refusals."""

import json
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from spikebench.cli import main
from spikebench.errors import UserError
from spikebench.report.data import load_study
from spikebench.report.sections import strategy
from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PY = json.dumps(sys.executable)


def _trials(results: Path, name: str) -> dict[str, optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=name, storage=default_storage(results / name))
    return {t.user_attrs["arm"]: t for t in study.get_trials()}


def test_a_csv_only_script_is_swept_scored_and_reported(tmp_path):
    # The script imports nothing of spikebench: parameters in, a CSV log out. Two arms
    # differing in warmup and LR, two seeds each, then `spikebench report`.
    script = EXAMPLES / "nanogpt_csv" / "train.py"
    f = tmp_path / "nano.toml"
    f.write_text(f"""
[study]
name = "nano"
target_loss = 3.2
seeds = [0, 1]
[trainer]
command = [{PY}, "{script}", "--params", "{{params_file}}", "--seed", "{{seed}}",
           "--out", "log.csv"]
log = "log.csv"
steps = 20
eval_every = 10
[config]
steps = 20
eval_every = 10
lr = 3e-3
warmup = 0
[comparison]
baseline = {{}}
recipe = false
[comparison.arms]
warmup = {{ warmup = 10, lr = 1e-2 }}
""")
    spec = load_sweep(f)
    assert spec.steps == 20 and set(spec.arms) == {"baseline", "warmup"}
    out = run_sweep(spec, results=tmp_path / "r", jobs=2, log=lambda s: None)
    assert out["done"] == out["total"] == 2
    # The live copy of each seed's log is dropped once the whole log is scored.
    assert not list((tmp_path / "r").rglob("*.killed*"))
    trials = _trials(tmp_path / "r", "nano")
    for arm, t in trials.items():
        assert t.state == TrialState.COMPLETE, (arm, t.user_attrs.get("error"))
        assert t.user_attrs["seeds"] == 2 and len(t.values) == 2
        folder = Path(t.user_attrs["dir"])
        assert json.loads((folder / "params.json").read_text())["warmup"] == (
            10 if arm == "warmup" else 0)
        for seed in (0, 1):
            summary = json.loads((folder / f"seed-{seed}" / "summary.json").read_text())
            assert summary["status"] == "completed" and summary["steps"] == 20
            assert [e["step"] for e in summary["evals"]] == [10, 20]
            assert summary["spikes"]["time_to_target"]["target"] == 3.2
            # the run folder the built-in loop writes, from the CSV
            assert (folder / f"seed-{seed}" / "metrics.jsonl").is_file()
    reports = tmp_path / "reports"
    assert main(["report", str(tmp_path / "r" / "nano"), "--out", str(reports)]) == 0
    md = (reports / "nano" / "report.md").read_text()
    strategy = md.split("## 2.", 1)[1].split("\n## ", 1)[0]
    assert "baseline" in strategy and "warmup" in strategy
    # Sections about the built-in engine's switches (cleaning, the LR) say why they are
    # empty for a trainer's free-form parameters, rather than blame optim.lr.
    assert md.count("ran the study's own trainer command") == 4 and "optim.lr" not in md


def test_an_api_script_is_pruned_in_a_single_objective_study(tmp_path):
    # The good arm runs first (one worker); the hopeless arm's LR leaves its validation
    # loss far above the good arm's at the first rung, so Hyperband prunes it: the driver
    # makes the prune file and stops the command. The good arm has one loss spike (step 25,
    # between the rungs): the API tells the loop at once, the run records it, and the arm is
    # spared.
    script = EXAMPLES / "api_loop" / "train.py"
    f = tmp_path / "api.toml"
    f.write_text(f"""
[study]
name = "api"
objective = "single"
target_loss = 2.5
seeds = [0, 1]
[trainer]
command = [{PY}, "{script}"]
steps = 40
eval_every = 20
grace_s = 5
[config]
steps = 40
eval_every = 20
lr = 0.2
sleep_s = 0.1
[comparison]
baseline = {{ spike_at = 25 }}
recipe = false
[comparison.arms]
hopeless = {{ lr = 0.001 }}
""")
    out = run_sweep(load_sweep(f), results=tmp_path / "r", jobs=1, log=lambda s: None)
    assert out["done"] == 2
    trials = _trials(tmp_path / "r", "api")
    good, bad = trials["baseline"], trials["hopeless"]
    assert good.state == TrialState.COMPLETE and good.user_attrs["reached_seeds"] == 2
    seed = Path(good.user_attrs["dir"]) / "seed-0"
    events = json.loads((seed / "summary.json").read_text())["spikes"]["events"]
    assert [(e["metric"], e["onset"]) for e in events] == [("train/loss", 25)]
    assert "spike at step 25" in (seed / "stdout.log").read_text()  # told in time: SPIKE
    assert bad.state == TrialState.PRUNED and bad.user_attrs["pruned_at_step"] == 20
    folder = Path(bad.user_attrs["dir"])
    assert (folder / "prune").is_file() and not (folder / "result.json").exists()
    # Given the prune file and grace_s before any signal, the script saw PRUNE at its next
    # run.log and finished as pruned: its rows are kept in the finished log, none .partial.
    seed = folder / "seed-0"
    assert not (folder / "seed-1").exists()  # a pruned trial starts no further seed
    assert not list(seed.glob("metrics.jsonl.partial*"))
    assert json.loads((seed / "summary.json").read_text())["status"] == "pruned"
    # The API flushes every 10 rows, so the driver sees the rung at step 20 only at step 30,
    # and the script sees PRUNE at its next flush: step 40 of its 40 at the latest.
    rows = [json.loads(r) for r in (seed / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 20
    # The report's strategy table keeps the declared arm the pruner stopped, saying so.
    table = {r["arm"]: r for r in strategy.info(load_study(tmp_path / "r" / "api")).rows}
    assert table["hopeless"]["status"] == "pruned at step 20: 1 of 2 seeds run"
    assert strategy._compact_row(table["hopeless"])[1].text == table["hopeless"]["status"]


def test_a_failing_command_fails_its_trial_with_its_last_stderr_line(tmp_path):
    f = tmp_path / "fail.toml"
    code = "import sys; print('warming up', file=sys.stderr); sys.exit('ValueError: bad lr')"
    f.write_text(f"""
[study]
name = "fail"
target_loss = 3.0
[trainer]
command = [{PY}, "-c", "{code}", "{{args}}"]
log = "log.csv"
steps = 10
[config]
lr = 0.1
[comparison]
recipe = false
""")
    run_sweep(load_sweep(f), results=tmp_path / "r", jobs=1, log=lambda s: None)
    t = _trials(tmp_path / "r", "fail")["baseline"]
    assert t.state == TrialState.FAIL
    assert t.user_attrs["error"] == "seed 0: exit code 1: ValueError: bad lr"
    stderr = (Path(t.user_attrs["dir"]) / "seed-0" / "stderr.log").read_text()
    assert "warming up" in stderr


def test_a_relative_results_folder_gives_the_command_absolute_paths(tmp_path, monkeypatch):
    # The command runs in its seed's folder, so every path it is given must be absolute.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(
        "import json, os, sys\njson.load(open(sys.argv[1]))\n"
        "with open(os.environ['SPIKEBENCH_RUN_DIR'] + '/log.csv', 'w') as f:\n"
        "    f.write('step,loss\\n' + ''.join(f'{s},{3 - s / 10}\\n' for s in range(1, 11)))\n")
    (tmp_path / "rel.toml").write_text(f"""
[study]
name = "rel"
target_loss = 2.5
[trainer]
command = [{PY}, "train.py", "{{params_file}}"]
log = "log.csv"
steps = 10
[config]
lr = 0.1
[comparison]
recipe = false
""")
    run_sweep(load_sweep(Path("rel.toml")), results=Path("r"), jobs=1, log=lambda s: None)
    t = _trials(tmp_path / "r", "rel")["baseline"]
    assert t.state == TrialState.COMPLETE, t.user_attrs.get("error")
    assert Path(t.user_attrs["dir"]).is_absolute()


@pytest.mark.parametrize("trainer, message", [
    ('command = ["python", "train.py", "--out", "{out_dir}"]\nsteps = 10',
     'trainer.command = "{out_dir}": unknown macro {out_dir}'),
    ('command = ["python", "train.py"]', "trainer.steps: missing"),
    ('command = []\nsteps = 10', "trainer.command = []: is empty"),
    ('command = ""\nsteps = 10', 'trainer.command = "": is empty'),
    ('command = ["python", "train.py", "--x={args}"]\nsteps = 10',
     '"{args}" must be an element of its own'),
    ('command = ["python", "train.py"]\nsteps = 0', "trainer.steps = 0: must be an integer"),
    ('command = ["python", "train.py"]\nsteps = 10\nlog = "../x.csv"',
     "trainer.log"),
    ('command = ["python", "train.py"]\nsteps = 10\nworkers = 2',
     "trainer.workers = 2: unknown key"),
])
def test_trainer_table_refusals(tmp_path, trainer, message):
    f = tmp_path / "bad.toml"
    f.write_text(f'[study]\ntarget_loss = 3.0\n[trainer]\n{trainer}\n')
    with pytest.raises(UserError) as e:
        load_sweep(f)
    text = str(e.value)
    assert message in text and "\n" not in text


def test_trainer_parameters_are_free_form_and_the_macros_expand(tmp_path):
    # Keys spikebench's config refuses (model.rotary, data.loader) are a trainer's own.
    from spikebench.sweep.command import expand

    f = tmp_path / "free.toml"
    f.write_text('[study]\ntarget_loss = 3.0\n[trainer]\ncommand = "python train.py '
                 '--params {params_file} {args}"\nsteps = 10\n[config]\n"model.rotary" = true\n'
                 '"data.loader" = "webdataset"\nlr = 0.1\n[space]\nlr = { low = 0.01, '
                 'high = 1.0, log = true }\n[comparison.arms]\nrope = { "model.rotary" = false }\n')
    spec = load_sweep(f)
    assert set(spec.arms) == {"baseline", "rope"}  # no article recipe for a trainer
    assert spec.arms["rope"] == {"lr": 0.1, "model.rotary": False}
    argv = expand(spec.trainer["command"], params={"lr": 0.1, "model.rotary": True,
                                                   "name": "x"},
                  params_file=Path("/t/params.json"), run_dir=Path("/t/seed-0"), seed=0,
                  trial_dir=Path("/t"))
    assert argv == ["python", "train.py", "--params", "/t/params.json", "--lr=0.1",
                    "--model.rotary=true", "--name=x"]
