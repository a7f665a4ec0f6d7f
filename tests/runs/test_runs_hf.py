"""The HF Trainer's trainer_state.json and output folders, from a real (tiny) Trainer run with a
garbage batch at a known step."""

import json
import zipfile

import pytest
import runs_writers as W

from spikebench.cli import main
from spikebench.runs import read_runs
from spikebench.runs.hf_args import read_training_args

SPIKE = W.HF_SPIKES["run-a"]


def spikes_json(capsys, *argv):
    assert main(["spikes", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_trainer_state_json_is_read_not_refused_as_json_lines(capsys, hf_out):
    # Failure 1: it was read as JSON Lines and refused with "line 1: not valid JSON".
    path = hf_out / "run-a" / "checkpoint-50" / "trainer_state.json"
    res, _ = spikes_json(capsys, path)
    assert res["steps"] == W.HF_STEPS
    loss = [e for e in res["events"] if e["metric"] == "loss"]
    assert [e["onset"] for e in loss] == [SPIKE]
    assert any(e["metric"] == "grad_norm" and e["onset"] == SPIKE for e in res["events"])


def test_an_output_folder_is_its_latest_checkpoint(capsys, hf_out):
    (run,) = read_runs(hf_out / "run-a")
    assert run.path == hf_out / "run-a" / "checkpoint-50" / "trainer_state.json"
    assert run.format == "hf-trainer-state" and run.name == "run-a"
    assert [r["step"] for r in run.records] == list(range(1, W.HF_STEPS + 1))
    # Evaluations join their step; the run summary (train_loss, the mean) is left out.
    assert [r["step"] for r in run.records if "val/loss" in r] == [40, 50]
    assert all(0 < r["optim/lr"] <= 1e-2 for r in run.records)
    # Hyperparameters: the model config beside the state, the TrainingArguments read as data.
    assert run.params["model.n_embd"] == 32 and run.params["model.n_layer"] == 1
    assert run.params["args.learning_rate"] == 1e-2 and run.params["args.max_steps"] == 50
    assert run.params["args.lr_scheduler_type"] == "linear"  # an enum, as its value
    assert run.seed == 0 and run.params["args.seed"] == 0
    assert read_runs(hf_out / "run-b")[0].seed == 1
    # The folder given is one run: shown in full, as a single file is.
    assert main(["spikes", str(hf_out / "run-a")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{run.path}: 50 steps, loss column 'loss'")


def test_an_earlier_checkpoint_reads_its_own_steps(hf_out):
    (run,) = read_runs(hf_out / "run-a" / "checkpoint-20")
    assert run.records[-1]["step"] == 20 and run.name == "checkpoint-20"


def test_without_training_args_the_state_s_own_fields_are_the_args(tmp_path, hf_out):
    state = json.loads((hf_out / "run-a" / "checkpoint-50" / "trainer_state.json").read_text())
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    (run,) = read_runs(tmp_path / "trainer_state.json")
    assert run.params == {"args.max_steps": 50, "args.num_train_epochs": 1,
                          "args.logging_steps": 1, "args.eval_steps": 40,
                          "args.save_steps": 20, "args.train_batch_size": 8}
    assert run.seed is None


def test_training_args_bin_runs_no_code(tmp_path):
    """A pickle naming os.system is read as inert data: the command never runs."""
    import os
    import pickle

    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    data = pickle.dumps({"seed": 5, "evil": Evil(), "learning_rate": 0.1}, protocol=2)
    with zipfile.ZipFile(tmp_path / "training_args.bin", "w") as z:
        z.writestr("training_args/data.pkl", data)
    args = read_training_args(tmp_path / "training_args.bin")
    assert not marker.exists()
    assert args["seed"] == 5 and args["learning_rate"] == 0.1 and isinstance(args["evil"], str)
    (tmp_path / "junk.bin").write_bytes(b"not a zip")
    assert read_training_args(tmp_path / "junk.bin") is None


@pytest.mark.parametrize("text,needle", [
    ('{"log_history": [1, 2]}', "log_history[0]: expected an object, got int"),
    ('{\n  "global_step": 3\n}', "with a 'log_history' list"),
    ('{\n  "log_history": [\n', "not valid JSON"),
    ('{"log_history": [{"step": 1, "loss": "x"}]}', "column 'loss', row 1: non-numeric value 'x'"),
    ('{"log_history": [{"step": 1.5, "loss": 2.0}]}', "not an integer"),
    ('{"log_history": []}', "log_history is empty"),
])
def test_a_damaged_state_is_one_line(tmp_path, capsys, text, needle):
    from fuzzkit import refused

    (tmp_path / "trainer_state.json").write_text(text)
    line = refused(["spikes", "trainer_state.json"], tmp_path, capsys)
    assert needle in line and "trainer_state.json" in line


def test_a_json_document_that_is_no_trainer_state_is_named_so(tmp_path, capsys):
    from fuzzkit import refused

    (tmp_path / "summary.json").write_text('{\n  "loss": 1\n}\n')
    line = refused(["spikes", "summary.json"], tmp_path, capsys)
    assert "one JSON document, not JSON Lines" in line
