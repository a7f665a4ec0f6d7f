"""``train.compile``: the training step through ``torch.compile``, on the CPU.

The runs compile with the ``aot_eager`` backend (SPIKEBENCH_COMPILE_BACKEND): dynamo's
graphs and AOTAutograd's forward and backward, run by the eager kernels. So a compiled run
must log the eager run's values bit for bit, which pins down everything spikebench does
around the compiled module (probes, emulated precision, checkpoints, DDP). Inductor's own
kernels round otherwise and take minutes of C++ compiling on this CPU; a run of it here
logged the eager losses to 1e-7 relative over 20 steps (docs/performance.md)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from spikebench import config as c
from spikebench import metrics as M
from spikebench.cli import main
from spikebench.errors import UserError
from spikebench.train import checkpoint
from spikebench.train import compile as comp
from spikebench.train.loop import train

TINY = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
        "data.batch_size=4", "data.max_bytes=200000", "train.eval_batches=1",
        "train.eval_every=10", "train.log_every=5", "train.probe_every=5",
        "train.progress=false", "train.threads=1", "optim.lr=3e-3", "train.steps=20"]
TIMING = M.VOLATILE


@pytest.fixture(autouse=True)
def aot_eager(monkeypatch):
    monkeypatch.setenv(comp.BACKEND_ENV, "aot_eager")


def _run(tmp_path, name, *over, sinks=(), resume=False):
    cfg = c.load(None, [*TINY, f"run.out_dir={tmp_path}", f"run.name={name}", *over])
    summary = train(cfg, run_dir=tmp_path / name if resume else None, sinks=sinks,
                    resume=resume)
    return summary, _rows(tmp_path / name)


def _rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_the_setting_takes_true_false_or_auto_and_refuses_the_rest_in_one_line(capsys):
    assert c.load(None, []).train.compile == "auto"
    assert c.load(None, ["train.compile=true"]).train.compile is True
    assert c.load(None, ["train.compile=false"]).train.compile is False
    for bad in ("1", "yes", '"on"', "off"):
        with pytest.raises(UserError, match=r"train.compile = .*: must be true or false "
                                            r"or 'auto'$"):
            c.load(None, [f"train.compile={bad}"])
    assert main(["train", "--dry-run", "--set", "train.compile=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.compile = 1: must be true or false or 'auto'" in err


def test_auto_is_off_on_the_cpu_and_true_is_refused_where_torch_cannot_compile(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    off = comp.choose("auto", cpu)
    assert not off.enabled and off.why == "auto: off on the CPU"
    assert comp.choose(True, cpu) == comp.CompileChoice(True, "aot_eager")
    assert not comp.choose(False, cpu).enabled
    monkeypatch.setattr(comp, "missing", lambda device, name: "Triton is not installed")
    assert comp.choose("auto", cuda) == comp.CompileChoice(
        False, "aot_eager", "auto: off, Triton is not installed")
    monkeypatch.undo()
    monkeypatch.setenv(comp.BACKEND_ENV, "aot_eager")
    monkeypatch.setattr(comp, "missing", lambda device, name: "")
    assert comp.choose("auto", cuda) == comp.CompileChoice(True, "aot_eager", "auto: on on CUDA")
    monkeypatch.undo()
    monkeypatch.setenv(comp.BACKEND_ENV, "no_such_backend")
    with pytest.raises(UserError, match=r"^train.compile = true: SPIKEBENCH_COMPILE_BACKEND="
                                        r"'no_such_backend' is not a torch.compile backend"):
        comp.choose(True, cpu)


def test_the_clock_counts_the_steps_that_compiled(monkeypatch):
    graphs = iter([0, 1, 1, 1, 1, 2])  # before/after three steps: the first and third compile
    monkeypatch.setattr(comp, "_graphs", lambda: next(graphs))
    clock = comp.CompileClock()
    took = []
    for _ in range(3):
        clock.begin()
        took.append(clock.end())
    assert took[0] > 0 and took[1] == 0.0 and took[2] > 0
    assert clock.steps == 2 and clock.seconds == pytest.approx(took[0] + took[2])
    monkeypatch.setattr(comp, "_graphs", lambda: None)  # no counter: the first step counts
    clock = comp.CompileClock()
    clock.begin()
    assert clock.end() > 0
    clock.begin()
    assert clock.end() == 0.0 and clock.steps == 1


@pytest.mark.parametrize("over", [
    ["model.dropout=0.1"],  # fp32, dropout's RNG stream, probes every 5 steps
    ["precision.mode=bf16", "precision.impl=emulated"],
    ["precision.mode=fp16", "precision.impl=emulated", "optim.grad_accum=2"],  # scaler
], ids=["fp32-dropout-probes", "bf16-emulated", "fp16-emulated-accum"])
def test_a_compiled_run_logs_the_eager_values_with_compile_off_the_clock(tmp_path, over):
    eager, rows = _run(tmp_path, "eager", *over, "train.compile=false")
    compiled, crows = _run(tmp_path, "compiled", *over, "train.compile=true")
    assert crows == rows  # losses, grad norms, val losses, probes: bit for bit
    assert any(k.startswith(M.ATTN_LOGIT_MAX) for r in crows for k in r)
    assert eager["compile_s"] is None and compiled["compile_s"] > 0
    meta = json.loads((tmp_path / "compiled" / "meta.json").read_text())
    assert meta["compile"] == {"enabled": True, "backend": "aot_eager"}
    assert json.loads((tmp_path / "eager" / "meta.json").read_text())["compile"] == {
        "enabled": False}
    # The first step compiled, in seconds; the steps up to the first read-back took far
    # less on the training clock: the compile is off it, as evaluation is.
    clock = [json.loads(line) for line in (tmp_path / "compiled" / "metrics.jsonl").open()]
    first = next(r[M.ELAPSED_S] for r in clock if r[M.STEP] == 5)
    assert first < compiled["compile_s"]
    assert compiled["seconds"] < eager["seconds"] + compiled["compile_s"]


class _CrashAt:
    """A sink that stops the run at a step, as a crash would (the log stays partial)."""

    def __init__(self, step):
        self.step = step

    def start(self, run):
        pass

    def write(self, metrics):
        if metrics.get(M.STEP) == self.step:
            raise RuntimeError("crash")

    def close(self, summary=None):
        pass


@pytest.mark.parametrize("first, then", [("true", "false"), ("false", "true")],
                         ids=["compiled-then-eager", "eager-then-compiled"])
def test_a_checkpoint_resumes_across_compile_on_and_off(tmp_path, first, then):
    over = ["train.checkpoint_every=10", "precision.mode=fp16", "precision.impl=emulated"]
    _, reference = _run(tmp_path, "ref", *over, "train.compile=false")
    with pytest.raises(RuntimeError, match="crash"):
        _run(tmp_path, "k", *over, f"train.compile={first}", sinks=[_CrashAt(15)])
    state = torch.load(checkpoint.saved(tmp_path / "k")[0], weights_only=True)
    assert state["step"] == 10
    assert not [k for k in state["model"] if "_orig_mod" in k]  # the plain module's state
    summary, rows = _run(tmp_path, "k", *over, f"train.compile={then}", resume=True)
    assert rows == reference and summary["status"] == "completed"
    meta = json.loads((tmp_path / "k" / "meta.json").read_text())
    assert meta["compile"]["enabled"] is (first == "true")  # the first start's record
    assert [r["compile"] for r in meta["resumes"]] == [then == "true"]


def test_two_gloo_ranks_compiled_match_one_eager_process(tmp_path):
    from test_dist import SHORT, _close, _single
    from test_dist import TINY as DIST_TINY

    one = _single(tmp_path, "one", *SHORT, "train.compile=false")
    args = [a for o in [*DIST_TINY, *SHORT, f"run.out_dir={tmp_path}", "run.name=two",
                        "train.nproc=2", "train.compile=true"] for a in ("--set", o)]
    out = subprocess.run([sys.executable, "-m", "spikebench", "train", *args],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, comp.BACKEND_ENV: "aot_eager"})
    assert out.returncode == 0, out.stderr[-3000:]
    two = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").open()]
    for key in (M.TRAIN_LOSS, M.GRAD_NORM, M.VAL_LOSS):
        _close(one, two, key)
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["compile_s"] > 0
