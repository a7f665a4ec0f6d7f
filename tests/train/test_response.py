"""Responses to a spike: rollback, skip-step and ZClip, in the real loop and as parts."""

import copy
import json
import math
from contextlib import contextmanager

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from spikebench import config as c
from spikebench import metrics as M
from spikebench.config import ResponseConfig
from spikebench.model import build_model
from spikebench.precision import make_precision
from spikebench.train.loop import train, train_step
from spikebench.train.optim import make_optimizer
from spikebench.train.rollback import Rollback
from spikebench.train.skip_step import SkipStep
from spikebench.train.state import load_train_state, train_state
from spikebench.train.zclip import ZClip

torch.set_num_threads(1)

# The default scenario cut down: a 10-step burst of random bytes at steps 61-70 of 120.
BURST = [
    "model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
    "data.batch_size=8", "data.max_bytes=200000", "train.steps=120", "train.eval_every=40",
    "train.eval_batches=1", "train.log_every=10", "train.progress=false", "optim.lr=1e-2",
    "faults.burst=random_bytes", "faults.at=0.5", "faults.length=10",
]


def run(tmp_path, *over, name="r"):
    cfg = c.load(None, [*BURST, f"run.out_dir={tmp_path}", f"run.name={name}", *over])
    summary = train(cfg)
    rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").open()]
    return summary, [r for r in rows if M.TRAIN_LOSS in r]


def test_rollback_goes_back_before_the_onset_and_skips_the_named_batches(tmp_path):
    summary, rows = run(tmp_path, "response.kind=rollback", "response.skip_batches=15")
    (ev,) = summary["response"]["rollbacks"]
    # The burst's first batch is at position 61; the newest state kept before it, at 60.
    assert ev["onset_position"] == 61 and ev["to_position"] == 60
    assert ev["redone_steps"] == ev["step"] - 60 and ev["skipped_batches"] == 15
    assert summary["response"]["redone_steps"] == ev["redone_steps"]
    back = [r for r in rows if r[M.STEP] > ev["step"]]
    # Steps worked go on; the schedule position restarts after the restored state...
    assert [r[M.POSITION] for r in back] == list(range(61, 61 + len(back)))
    assert len(rows) == 120 and rows[-1][M.POSITION] == 120 - ev["redone_steps"]
    # ...at the LR that position had, and with the stream 15 batches on: the burst
    # (batches 60-69) is not seen again, and every batch before it was seen once.
    first = {r[M.POSITION]: r[M.LR] for r in rows if r[M.STEP] <= ev["step"]}
    assert all(first[r[M.POSITION]] == r[M.LR] for r in back if r[M.POSITION] in first)
    assert not any(r.get(M.INJECTED) for r in back)
    assert sum(bool(r.get(M.INJECTED)) for r in rows) == ev["step"] - 60
    marked = [r[M.STEP] for r in rows if r.get(M.ROLLBACK)]
    assert marked == [ev["step"]]


def _parts():
    torch.manual_seed(0)
    cfg = c.load(None, BURST)
    model = build_model(cfg.model)
    opt = make_optimizer(model, cfg)
    return cfg, model, opt, make_precision(cfg.precision, torch.device("cpu"))


def _step(model, opt, prec, seed, **kw):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (4, 16), generator=g)
    params = [p for p in model.parameters() if p.requires_grad]
    return train_step(model, opt, params, x, x, precision=prec, grad_accum=1,
                      clip=math.inf, **kw)


def test_rollback_restores_exactly_the_kept_state():
    cfg, model, opt, prec = _parts()
    zclip = ZClip(0.97, 2.5, 2, torch.device("cpu"))
    parts = {"zclip": zclip}
    rb = Rollback(ResponseConfig(kind="rollback", skip_batches=7), gap=5, run_dir=".")
    for s in range(3):
        _step(model, opt, prec, s, zclip=zclip)
    rb.keep(3, train_state(model, opt, prec, parts))
    kept = copy.deepcopy(train_state(model, opt, prec, parts))
    for s in range(3, 6):
        _step(model, opt, prec, s, zclip=zclip)
    assert not torch.equal(model.state_dict()["wte.weight"], kept["model"]["wte.weight"])
    back = rb.roll_back(5, 6, 6, lambda st: load_train_state(st, model, opt, prec, parts))
    assert back == 3 and rb.batch(4) == 3 + 7  # position 4 now takes batch 10
    now = train_state(model, opt, prec, parts)
    for k, v in kept["model"].items():
        assert torch.equal(now["model"][k], v), k
    for pid, st in kept["optim"]["state"].items():
        for k, v in st.items():
            assert torch.equal(now["optim"]["state"][pid][k], v), (pid, k)
    assert torch.equal(now["rng"]["cpu"], kept["rng"]["cpu"])
    assert all(torch.equal(now["parts"]["zclip"][k], v) for k, v in kept["parts"]["zclip"].items())
    # Nothing older than the onset is left to restore twice; no state from before 5 - 2.
    assert rb.roll_back(3, 4, 7, lambda st: None) is None


def test_skip_step_leaves_weights_and_optimizer_state_untouched():
    _, model, opt, prec = _parts()
    skipper = SkipStep(window=4, k=1e9, device=torch.device("cpu"))
    for s in range(4):  # fill the window with applied updates (no step is 1e9 sd out)
        out = _step(model, opt, prec, s, skipper=skipper)
        assert not out.skipped
    skipper.k = 6.0
    skipper.values[:] = 1e-3  # every recent loss and norm tiny: the next step is an outlier
    before = copy.deepcopy((model.state_dict(), opt.state_dict()))
    out = _step(model, opt, prec, 9, skipper=skipper)
    assert bool(out.skipped) and int(skipper.n) == 5  # recorded, as OLMo-core does
    for k, v in before[0].items():
        assert torch.equal(model.state_dict()[k], v), k
    for pid, st in before[1]["state"].items():
        for k, v in st.items():
            assert torch.equal(opt.state_dict()["state"][pid][k], v), (pid, k)


def test_skip_step_in_the_loop_skips_the_burst(tmp_path):
    summary, rows = run(tmp_path, "response.kind=skip_step", "response.skip_window=40")
    skipped = [r[M.STEP] for r in rows if r.get(M.SKIPPED_UPDATE)]
    assert summary["response"]["skipped_updates"] == len(skipped) > 0
    assert set(skipped) <= {r[M.STEP] for r in rows if r.get(M.INJECTED)}


@contextmanager
def _step_spy():
    norms = []

    def hook(opt, args, kwargs):
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(x) for x in grads]))))
    handle = register_optimizer_step_pre_hook(hook)
    try:
        yield norms
    finally:
        handle.remove()


def test_zclip_bound_holds_at_every_applied_update(tmp_path):
    with _step_spy() as norms:
        summary, rows = run(tmp_path, "optim.clip_mode=zclip", "optim.zclip_warmup=10")
    bounds = [r[M.CLIP_BOUND] for r in rows]
    assert len(norms) == len(bounds) == 120
    assert all(math.isinf(b) for b in bounds[:10]) and all(math.isfinite(b) for b in bounds[10:])
    for applied, bound, pre in zip(norms, bounds, (r[M.GRAD_NORM] for r in rows), strict=True):
        assert applied <= min(bound, pre) * (1 + 1e-4) + 1e-6
    assert any(pre > b * 1.01 for pre, b in zip((r[M.GRAD_NORM] for r in rows), bounds,
                                                strict=True))  # it did clip


def test_zclip_statistics():
    z = ZClip(alpha=0.5, z=2.0, warmup=3, device=torch.device("cpu"))
    for g in (1.0, 2.0, 3.0):
        assert math.isinf(float(z.bound()))
        z.clip_([], torch.tensor(g))
    # After warmup: the warmup's mean and population variance.
    assert float(z.mean) == pytest.approx(2.0) and float(z.var) == pytest.approx(2 / 3)
    bound = 2.0 + 2.0 * math.sqrt(2 / 3)
    assert float(z.bound()) == pytest.approx(bound)
    grad = torch.full((4,), 5.0)  # norm 10: clipped to the bound, which the EMA then takes
    z.clip_([grad], torch.tensor(10.0))
    assert float(grad.norm()) == pytest.approx(bound, rel=1e-5)
    mean = 0.5 * 2.0 + 0.5 * bound
    assert float(z.mean) == pytest.approx(mean)
    assert float(z.var) == pytest.approx(0.5 * 2 / 3 + 0.5 * (bound - mean) ** 2)


@contextmanager
def _no_host_reads():
    """Count every way a tensor's value reaches the host (item, tolist, bool, float, int)."""
    calls = []
    names = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy")
    saved = {n: getattr(torch.Tensor, n) for n in names}

    def wrap(n):
        def f(self, *a, **k):
            calls.append(n)
            return saved[n](self, *a, **k)
        return f
    for n in names:
        setattr(torch.Tensor, n, wrap(n))
    try:
        yield calls
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)


def test_no_response_reads_a_value_back_per_step():
    _, model, opt, prec = _parts()
    dev = torch.device("cpu")
    zclip, skipper = ZClip(0.97, 2.5, 2, dev), SkipStep(3, 6.0, dev)
    rb = Rollback(ResponseConfig(kind="rollback"), gap=5, run_dir=".")
    parts = {"zclip": zclip, "skipper": skipper}
    _step(model, opt, prec, 0, **parts)  # warm-up outside the count
    with _no_host_reads() as control:  # the spy sees a read-back when there is one
        bool(torch.tensor(True)), float(torch.tensor(1.0)), torch.ones(2).tolist()
        _ = 1 if skipper.n > 0 else 0
    assert control == ["__bool__", "__float__", "tolist", "__bool__"]
    with _no_host_reads() as calls:
        for s in range(1, 8):
            _step(model, opt, prec, s, **parts)
            rb.keep(s, train_state(model, opt, prec, parts))
    assert calls == []


class _Crash(Exception):
    pass


class _CrashAt:
    """A sink that stops the run at a step, as a crash would (the log stays partial)."""

    def __init__(self, step):
        self.step = step

    def start(self, run):
        pass

    def write(self, metrics):
        if metrics.get(M.STEP) == self.step:
            raise _Crash

    def close(self, summary=None):
        pass


@pytest.mark.parametrize("over", [["optim.clip_mode=zclip", "optim.zclip_warmup=10"],
                                  ["response.kind=skip_step", "response.skip_window=40"],
                                  ["response.kind=rollback"]],
                         ids=["zclip", "skip_step", "rollback"])
def test_each_response_resumes_exactly_from_a_checkpoint(tmp_path, over):
    # Checkpointed at 100, crashed at 110: ZClip's and skip-step's statistics and the
    # rollback's counters come back with the checkpoint (the rollback happened at 70).
    ck = ["train.checkpoint_every=50", *over]
    _, full = run(tmp_path, *ck, name="full")
    cfg = c.load(None, [*BURST, f"run.out_dir={tmp_path}", "run.name=crash", *ck])
    with pytest.raises(_Crash):
        train(cfg, sinks=[_CrashAt(110)])
    train(cfg, run_dir=tmp_path / "crash", resume=True)
    rows = [json.loads(line) for line in (tmp_path / "crash" / "metrics.jsonl").open()]
    timing = M.VOLATILE

    def strip(rs):
        return [{k: v for k, v in r.items() if k not in timing} for r in rs]
    assert strip([r for r in rows if M.TRAIN_LOSS in r]) == strip(full)
    state = torch.load(tmp_path / "crash" / "checkpoints" / "step-00000100.pt",
                       weights_only=True)
    part = {"optim.clip_mode=zclip": "zclip", "response.kind=skip_step": "skipper"}.get(over[0])
    if part:
        assert state["parts"][part] is not None
    else:
        assert len(state["parts"]["rollback"]["events"]) == 1


def test_rollback_from_disk_is_the_same_as_from_memory(tmp_path):
    _, memory = run(tmp_path, "response.kind=rollback", name="mem")
    _, disk = run(tmp_path, "response.kind=rollback", "response.storage=disk", name="disk")
    timing = M.VOLATILE
    assert [{k: v for k, v in r.items() if k not in timing} for r in disk] == \
        [{k: v for k, v in r.items() if k not in timing} for r in memory]
    kept = sorted(p.name for p in (tmp_path / "disk" / "rollback").glob("*.pt"))
    assert len(kept) == 4  # the ring's size, in the checkpoint format
    assert any(r.get(M.ROLLBACK) for r in disk)


def _strip(rows):
    timing = M.VOLATILE
    return [{k: v for k, v in r.items() if k not in timing} for r in rows]


def test_a_rollback_after_a_resume_is_the_uninterrupted_one(tmp_path):
    # Checkpointed at 65 (an extra read-back, between the regular ones at 60 and 70),
    # crashed at 67, resumed: the rollback decided at 70 must still restore position 60,
    # from the ring the checkpoint saved, and checkpointing must not move it.
    _, plain = run(tmp_path, "response.kind=rollback", name="plain")
    ck = ["response.kind=rollback", "train.checkpoint_every=65"]
    _, full = run(tmp_path, *ck, name="full")
    assert _strip(full) == _strip(plain)
    cfg = c.load(None, [*BURST, f"run.out_dir={tmp_path}", "run.name=crash", *ck])
    with pytest.raises(_Crash):
        train(cfg, sinks=[_CrashAt(67)])
    summary = train(cfg, run_dir=tmp_path / "crash", resume=True)
    rows = [json.loads(line) for line in (tmp_path / "crash" / "metrics.jsonl").open()]
    assert _strip([r for r in rows if M.TRAIN_LOSS in r]) == _strip(plain)
    assert summary["response"]["rollbacks"][0]["to_position"] == 60


def test_rolling_back_twice_to_one_state_restores_it_both_times():
    _, model, opt, prec = _parts()
    rb = Rollback(ResponseConfig(kind="rollback"), gap=5, run_dir=".")
    for s in range(3):
        _step(model, opt, prec, s)
    rb.keep(3, train_state(model, opt, prec, {}))
    kept = copy.deepcopy(opt.state_dict())
    for attempt in range(2):
        for s in range(2):
            _step(model, opt, prec, 10 + s)
        assert rb.roll_back(5, 5, 10 + attempt, lambda st: load_train_state(
            st, model, opt, prec, {})) == 3
        for pid, st in kept["state"].items():
            for k, v in st.items():
                assert torch.equal(opt.state_dict()["state"][pid][k], v), (attempt, pid, k)


def test_a_ring_that_cannot_reach_past_a_read_back_is_refused(capsys):
    from spikebench.cli import main

    assert main(["train", "--set", "response.kind=rollback", "--set", "response.every=1",
                 "--dry-run"]) == 2
    assert "response.ring = 4: with response.every = 1" in capsys.readouterr().err


def test_rollback_cooldown_scales_the_lr_and_rollbacks_are_bounded(tmp_path):
    # No batches skipped, so the burst comes back after each rollback: two at most. After
    # a rollback the LR is halved for 5 positions.
    summary, rows = run(tmp_path, "response.kind=rollback", "response.skip_batches=0",
                        "response.lr_factor=0.5", "response.cooldown=5",
                        "response.max_rollbacks=2")
    evs = summary["response"]["rollbacks"]
    assert len(evs) == 2 and summary["response"]["skipped_batches"] == 0
    assert sum(bool(r.get(M.INJECTED)) for r in rows) > 20  # met three times, not undone
    # The article's 3-sigma trigger works too, once its 100-step window is full.
    late, _ = run(tmp_path, "faults.at=0.9", "response.kind=rollback",
                  "response.detector=zscore", name="zscore")
    assert [e["to_position"] for e in late["response"]["rollbacks"]] == [100]
    ev = evs[0]
    first = {r[M.POSITION]: r[M.LR] for r in rows if r[M.STEP] <= ev["step"]}
    back = [r for r in rows if r[M.STEP] > ev["step"]]
    to = ev["to_position"]
    assert back and all(r[M.POSITION] == to + i for i, r in enumerate(back[:5], 1))
    for r in back[:8]:
        if r[M.STEP] > evs[1]["step"]:
            break
        factor = 0.5 if r[M.POSITION] <= to + 5 else 1.0
        assert r[M.LR] == pytest.approx(factor * first[r[M.POSITION]], rel=1e-12)
