"""Command trials under torchrun: a [trainer] command that starts
examples/nanogpt_csv/train.py as two gloo ranks (DDP on CPU) per seed, with real
processes. Two trials run at once (each torchrun on a free port of its own), both ranks
train, only rank 0 writes the CSV log, and spikebench scores it; a pruned trial's
torchrun stops its workers (and, with TORCH_ELASTIC_SHUTDOWN_TIMEOUT below grace_s, also
workers that catch SIGTERM); a failed rank's error is the trial's."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import torch
from optuna.trial import TrialState
from procs import processes_with

from spikebench.runio import kill_with_parent
from spikebench.sweep.command import stop
from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "nanogpt_csv" / "train.py"
# --standalone: a rendezvous on a free port of each torchrun's own, so trials running at
# the same time never meet on one port (torchrun's default is 29500 for all).
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def _sweep(tmp_path: Path, name: str, study: str, config: str, arms: str,
           jobs: int = 1, script: Path = SCRIPT) -> dict:
    """Run a sweep whose command is ``script`` under torchrun (steps 20, validation every
    10); its trials by arm."""
    command = json.dumps([*TORCHRUN, str(script), "--params", "{params_file}",
                          "--seed", "{seed}", "--out", "log.csv"])
    f = tmp_path / f"{name}.toml"
    f.write_text(f"""
[study]
name = "{name}"
target_loss = 3.2
{study}
[trainer]
command = {command}
log = "log.csv"
steps = 20
eval_every = 10
env = {{ OMP_NUM_THREADS = "1" }}
grace_s = 3
[config]
steps = 20
eval_every = 10
{config}
[comparison]
baseline = {{}}
recipe = false
[comparison.arms]
{arms}
""")
    spec = load_sweep(f)
    run_sweep(spec, results=tmp_path / "r", jobs=jobs, log=lambda s: None)
    trials = optuna.load_study(study_name=name, storage=default_storage(
        tmp_path / "r" / name)).get_trials()
    return {t.user_attrs["arm"]: t for t in trials}


def _first_grad_norms(seed: int) -> tuple[float, float]:
    """train.py's first gradient norm (defaults, ``seed``) as two ranks take it, averaged
    over rank 0's batch (batch seed ``seed``) and rank 1's (``seed + 1``); and rank 0's
    alone."""
    spec = importlib.util.spec_from_file_location("nanogpt_train", SCRIPT)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    p = train.DEFAULTS
    chars = sorted(set(train.CORPUS))
    data = torch.tensor([chars.index(c) for c in train.CORPUS])[:int(0.9 * len(train.CORPUS))]
    grads = []
    with torch.random.fork_rng():  # this process's own random state is left as it was
        torch.manual_seed(seed)
        model = train.GPT(len(chars), p)
        for rank in (0, 1):
            torch.manual_seed(seed + rank)
            i = torch.randint(len(data) - p["seq_len"] - 1, (p["batch_size"],))
            x = torch.stack([data[j:j + p["seq_len"]] for j in i])
            y = torch.stack([data[j + 1:j + 1 + p["seq_len"]] for j in i])
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
            grads.append(torch.cat([w.grad.flatten() for w in model.parameters()]))
    return ((grads[0] + grads[1]) / 2).norm().item(), grads[0].norm().item()


def _no_process_left(marker: str) -> bool:
    """Nothing whose command line holds ``marker`` runs (a stray rank would train on for
    minutes; a few seconds let a stopped one be reaped). Strays are killed, not left."""
    deadline = time.time() + 5
    while processes_with(marker) and time.time() < deadline:
        time.sleep(0.2)
    strays = processes_with(marker)
    for pid in strays:
        os.kill(pid, signal.SIGKILL)
    return not strays


def test_two_torchrun_trials_at_once_train_two_ranks_and_rank_0_logs(tmp_path):
    # Two arms on two workers: two torchruns at the same time, each of two ranks.
    trials = _sweep(tmp_path, "ddp", "seeds = [0]", "lr = 3e-3\nwarmup = 0",
                    "warmup = { warmup = 10, lr = 1e-2 }", jobs=2)
    assert set(trials) == {"baseline", "warmup"}
    both, alone = _first_grad_norms(0)  # the first step's, whatever the LR
    assert abs(both - alone) > 1e-3
    for arm, t in trials.items():
        assert t.state == TrialState.COMPLETE, (arm, t.user_attrs.get("error"))
        assert t.user_attrs["seeds"] == 1 and len(t.values) == 2
        run = Path(t.user_attrs["dir"]) / "seed-0"
        # Both ranks joined the process group (each prints its rank to stdout.log) ...
        out = (run / "stdout.log").read_text()
        assert "rank 0 of 2" in out and "rank 1 of 2" in out, out
        # ... and only rank 0 wrote the log: one header, one row per step.
        lines = (run / "log.csv").read_text().splitlines()
        assert lines[0] == "step,loss,grad_norm,lr,val_loss"
        assert [int(r.split(",")[0]) for r in lines[1:]] == list(range(1, 21))
        # DDP averaged both ranks' gradients: the first step's norm is that of rank 0's
        # batch and rank 1's (seeds 0 and 1) together, not rank 0's alone.
        assert float(lines[1].split(",")[2]) == pytest.approx(both, abs=2e-6)
        summary = json.loads((run / "summary.json").read_text())
        assert summary["status"] == "completed" and summary["steps"] == 20
        assert [e["step"] for e in summary["evals"]] == [10, 20]
        assert summary["spikes"]["time_to_target"]["target"] == 3.2
        assert (run / "metrics.jsonl").is_file()
    a, b = trials["baseline"], trials["warmup"]
    assert a.datetime_start < b.datetime_complete and b.datetime_start < a.datetime_complete
    assert _no_process_left(str(tmp_path))


def test_a_pruned_torchrun_trial_leaves_no_rank_behind(tmp_path):
    # The hopeless arm's LR leaves its validation loss far above the baseline's at the
    # first rung: pruned there. Its command (torchrun) gets SIGTERM and stops its ranks,
    # which it started in sessions of their own, out of reach of a signal to its group.
    trials = _sweep(tmp_path, "prune", 'objective = "single"\nseeds = [0]',
                    "lr = 3e-3", "hopeless = { lr = 1e-5, steps = 3000 }")
    good, bad = trials["baseline"], trials["hopeless"]
    assert good.state == TrialState.COMPLETE, good.user_attrs.get("error")
    assert bad.state == TrialState.PRUNED and bad.user_attrs["pruned_at_step"] == 10
    folder = Path(bad.user_attrs["dir"])
    assert (folder / "prune").is_file() and not (folder / "result.json").exists()
    out = (folder / "seed-0" / "stdout.log").read_text()
    assert "rank 0 of 2" in out and "rank 1 of 2" in out, out
    assert len((folder / "seed-0" / "log.csv").read_text().splitlines()) < 3000
    # The ranks' command lines name the trial folder (--params TRIAL/params.json).
    assert _no_process_left(str(folder))


def test_a_failed_rank_fails_its_trial_with_its_own_error(tmp_path):
    # Both ranks fail (a script that does not even import torch, to be quick); torchrun
    # ends its stderr with a report of its own, but the trial's error is the ranks' line.
    script = tmp_path / "fails.py"
    # One write per rank: sys.exit(msg) writes the message and its newline apart, so two
    # ranks failing at once could join their lines in the shared stderr.log.
    script.write_text("import os, sys\nos.write(2, b'ValueError: bad lr\\n')\nsys.exit(1)\n")
    trials = _sweep(tmp_path, "fail", "seeds = [0]", "lr = 0.1", "", script=script)
    t = trials["baseline"]
    assert t.state == TrialState.FAIL
    assert t.user_attrs["error"] == "seed 0: exit code 1: ValueError: bad lr"
    stderr = (Path(t.user_attrs["dir"]) / "seed-0" / "stderr.log").read_text()
    assert "ChildFailedError" in stderr  # torchrun's report is kept in stderr.log


# A rank that catches SIGTERM (to save a checkpoint, say) and does not end.
STUBBORN = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(f"rank {os.environ['RANK']} of 2", flush=True)
time.sleep(600)
"""


def test_ranks_that_catch_sigterm_are_stopped_by_torchrun_within_grace(tmp_path):
    # spikebench's SIGKILL after grace_s reaches torchrun's process group, not its ranks
    # (sessions of their own). With TORCH_ELASTIC_SHUTDOWN_TIMEOUT below grace_s (the
    # trainer's env), torchrun SIGKILLs its ranks itself, then exits, within grace_s.
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    out = tmp_path / "stdout.log"
    env = {**os.environ, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "1", "OMP_NUM_THREADS": "1"}
    with open(out, "wb") as f:  # as the command's seed starts it (command.run_seed)
        proc = subprocess.Popen([*TORCHRUN, str(script)], stdout=f, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True, preexec_fn=kill_with_parent)
    deadline = time.time() + 60
    while out.read_text().count(" of 2") < 2 and time.time() < deadline:
        time.sleep(0.1)
    assert out.read_text().count(" of 2") == 2, out.read_text()
    start = time.monotonic()
    stop(proc, 30)  # what a pruned trial's command gets, with grace_s = 30
    assert time.monotonic() - start < 30 and proc.returncode != -signal.SIGKILL
    assert _no_process_left(str(script))
