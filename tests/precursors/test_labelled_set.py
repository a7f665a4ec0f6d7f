"""The labelled set, small: real engine runs whose spikes have an instant cause (an LR
shock, random-byte batches) are labelled the control by ``spikebench precursors``, and the
sweep file that builds the full set holds what docs/precursors.md says it does."""

from __future__ import annotations

import json

import pytest
import torch

from spikebench import config as c
from spikebench.cli import main
from spikebench.precursors.command import read_runs
from spikebench.sweep.spec import load_sweep
from spikebench.train.loop import train

torch.set_num_threads(1)
SMALL = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
         "data.batch_size=8", "data.max_bytes=200000", "train.steps=200",
         "train.eval_every=200", "train.eval_batches=1", "train.probe_every=2",
         "train.progress=false", "optim.lr=1e-2", "schedule.kind=constant"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("labelled")
    for name, fault in (("shock", ["faults.lr_shock_at=0.5", "faults.lr_shock_factor=100.0",
                                   "faults.lr_shock_steps=10"]),
                        ("bad", ["faults.burst=random_bytes", "faults.at=0.5",
                                 "faults.length=20"])):
        train(c.load(None, SMALL + fault + [f"run.out_dir={root}", f"run.name={name}"]))
    return root


def test_spikes_with_an_instant_cause_are_the_control(runs):
    labelled = {r.name.split("/")[-1]: r for r in read_runs([str(runs)], burn_in=50, gap=5)}
    for name in ("shock", "bad"):
        r = labelled[name]
        assert r.control, f"{name}: no loss event was labelled the control"
        assert any(95 <= o <= 125 for o in r.control), (name, r.control)  # the fault's steps
        assert not [o for o in r.onsets if 95 <= o <= 125], (name, r.onsets)


def test_the_command_scores_every_probe_the_engine_records(runs, capsys):
    assert main(["precursors", str(runs), "--json", "--boot", "100"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = {s["signal"] for s in out["signals"]}
    assert {"train/loss", "optim/grad_norm", "probe/update_norm", "probe/update_ratio",
            "probe/attn_logit_max/*", "probe/log_z", "probe/adam_g2v",
            "probe/adam_eps_share", "probe/attn_logit_max/0"} <= names
    assert out["control_events"] >= 2 and out["runs"] == 2


def test_the_sweep_file_builds_the_set_the_docs_describe():
    spec = load_sweep("sweeps/precursors.toml")
    assert len(spec.seeds) >= 5 and spec.base["train.probe_every"] <= 2
    controls = [a for a in spec.arms if a.startswith("control")]
    assert len(controls) == 2
    assert any("faults.lr_shock_at" in spec.arms[a] for a in controls)
    assert any(spec.arms[a].get("faults.burst") == "random_bytes" for a in controls)
    assert "baseline" in spec.arms  # the spike-free runs
