"""SPIKEBENCH_SYNC_DEBUG: where the loop arms torch's sync check, tested on the CPU with a
recorder in place of ``torch.cuda.set_sync_debug_mode`` (on CUDA, benchmarks/gpu_check.py
runs it for real). Armed for every training step and a rollback's kept states; lifted for
each read-back, evaluation and checkpoint; never left armed, also when the run fails."""

import pytest

from spikebench import config as c
from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.train import loop
from spikebench.train.buffer import MetricsBuffer
from spikebench.train.rollback import Rollback
from spikebench.train.sync_debug import ENV, SyncDebug

TINY = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
        "data.batch_size=4", "data.max_bytes=200000", "train.eval_batches=1",
        "train.steps=20", "train.eval_every=10", "train.log_every=5", "train.probe_every=5",
        "train.progress=false", "train.threads=1", "train.checkpoint_every=10",
        "response.kind=rollback", "response.every=5"]


def test_the_guard_arms_and_lifts_in_pairs():
    calls = []
    g = SyncDebug("error", setter=calls.append)
    g.arm()
    g.arm()  # once
    with g.lifted():
        assert not g.armed
    assert g.armed and calls == ["error", "default", "error"]
    g.disarm()
    with pytest.raises(KeyError), g.armed_for():
        assert g.armed
        raise KeyError
    assert not g.armed and calls == ["error", "default", "error", "default", "error", "default"]
    off = SyncDebug(None, setter=calls.append)
    off.arm()
    with off.armed_for(), off.lifted():
        pass
    assert len(calls) == 6 and not off.armed


def test_the_setting_is_read_on_cuda_and_refused_when_bad():
    assert SyncDebug.from_env("cuda", {ENV: "error"}).mode == "error"
    assert SyncDebug.from_env("cuda", {ENV: "warn"}).mode == "warn"
    assert SyncDebug.from_env("cuda", {}).mode is None
    assert SyncDebug.from_env("cpu", {ENV: "error"}).mode is None  # no sync to check there
    with pytest.raises(UserError, match=r"^SPIKEBENCH_SYNC_DEBUG='yes': must be one of "
                                        r"error, warn \(or unset\)$"):
        SyncDebug.from_env("cpu", {ENV: "yes"})


class _OnTheCpu(SyncDebug):
    """A guard the loop cannot switch off for being on the CPU, recording what it sets."""

    @property
    def mode(self):
        return "error"

    @mode.setter
    def mode(self, value):
        pass


class _Crash(Exception):
    pass


class _CrashAt:
    def __init__(self, step):
        self.step = step

    def start(self, run):
        pass

    def write(self, metrics):
        if metrics.get(M.STEP) == self.step:
            raise _Crash

    def close(self, summary=None):
        pass


@pytest.mark.parametrize("crash", [None, 15], ids=["completed", "failed"])
def test_the_loop_arms_the_steps_and_lifts_every_read_back(tmp_path, monkeypatch, crash):
    calls: list[str] = []
    guard = _OnTheCpu(None, setter=calls.append)
    monkeypatch.setattr(SyncDebug, "from_env", classmethod(lambda cls, *a, **k: guard))
    seen: dict[str, list[bool]] = {}

    def spy(name, f):
        def wrapped(*a, **k):
            seen.setdefault(name, []).append(guard.armed)
            return f(*a, **k)
        return wrapped

    monkeypatch.setattr(loop, "train_step", spy("step", loop.train_step))
    monkeypatch.setattr(loop, "evaluate", spy("evaluate", loop.evaluate))
    monkeypatch.setattr(loop.checkpoint, "save", spy("checkpoint", loop.checkpoint.save))
    monkeypatch.setattr(MetricsBuffer, "flush", spy("read-back", MetricsBuffer.flush))
    monkeypatch.setattr(Rollback, "keep", spy("keep", Rollback.keep))
    cfg = c.load(None, [*TINY, f"run.out_dir={tmp_path}", "run.name=r"])
    if crash:
        with pytest.raises(_Crash):
            loop.train(cfg, sinks=[_CrashAt(crash)])
    else:
        assert loop.train(cfg)["status"] == "completed"
    steps = crash or 20
    assert seen["step"] == [True] * steps
    assert seen["keep"] == [True] * (steps // 5)
    assert seen["read-back"] == [False] * (steps // 5)
    assert seen["evaluate"] == [False] * (1 + steps // 10)
    assert seen["checkpoint"] == [False] * (steps // 10)
    assert not guard.armed and calls[-1] == "default"
    assert calls[0] == "error" and all(a != b for a, b in zip(calls, calls[1:], strict=False))
