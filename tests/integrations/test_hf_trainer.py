"""A real Hugging Face Trainer, swept by spikebench: a tiny GPT-2 from its config (no hub
download) trained by examples/hf_trainer/train.py, whose callback logs to the run API;
two arms (warmup and clipping off, and on) x two seeds, then the report."""

import json
import os
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from spikebench.cli import main
from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage

if os.environ.get("CI"):  # CI installs the dev extra, which has transformers: never skip
    import transformers  # noqa: F401
else:
    pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "hf_trainer" / "train.py"


def test_a_hf_trainer_script_is_swept_and_reported(tmp_path):
    sweep = tmp_path / "hf.toml"
    sweep.write_text(f"""
[study]
name = "hf"
target_loss = 4.5
seeds = [0, 1]
[trainer]
command = [{json.dumps(sys.executable)}, "{SCRIPT}"]
steps = 20
eval_every = 10
[config]
steps = 20
lr = 3e-3
warmup = 0
clip = 0.0
[comparison]
baseline = {{}}
recipe = false
[comparison.arms]
"warmup + clip" = {{ warmup = 5, clip = 1.0 }}
""")
    out = run_sweep(load_sweep(sweep), results=tmp_path / "r", jobs=2, log=lambda s: None)
    assert out["done"] == out["total"] == 2
    study = optuna.load_study(study_name="hf", storage=default_storage(tmp_path / "r" / "hf"))
    for t in study.get_trials():
        assert t.state == TrialState.COMPLETE, t.user_attrs.get("error")
        folder = Path(t.user_attrs["dir"])
        for seed in (0, 1):
            summary = json.loads((folder / f"seed-{seed}" / "summary.json").read_text())
            assert summary["status"] == "completed" and summary["steps"] == 20
            assert [e["step"] for e in summary["evals"]] == [10, 20]
            config = json.loads((folder / f"seed-{seed}" / "config.json").read_text())
            assert config["seed"] == seed and config["params"]["clip"] == (
                1.0 if t.user_attrs["arm"] == "warmup + clip" else 0.0)
    reports = tmp_path / "reports"
    assert main(["report", str(tmp_path / "r" / "hf"), "--out", str(reports)]) == 0
    strategy = (reports / "hf" / "report.md").read_text().split("## 2.", 1)[1].split(
        "\n## ", 1)[0]
    assert "baseline" in strategy and "warmup + clip" in strategy
