"""spikebench.responses.SkipStepOptimizer in a plain torch loop: a tiny MLP on random data
with planted bad batches (targets x 100) at steps 20 and 45.

Both ways of skipping (fused AdamW's ``found_inf``; the copy-and-``torch.where`` restore for
any other optimizer) skip exactly the planted steps, leave weights and optimizer state
bit-identical across them, and every other step is a bare optimizer's; nothing is read
back to the host; the state dict resumes exactly; under GradScaler too.
"""

import copy
from contextlib import contextmanager

import pytest
import torch

from spikebench.responses import SkipStepOptimizer
from spikebench.train.skip_step import SkipStep

torch.set_num_threads(1)

BAD = {20, 45}
STEPS = 60
W = torch.linspace(-1, 1, 64).reshape(16, 4)

OPTIMIZERS = {
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-2, fused=True),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
    "adam_single_tensor_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False,
                                                             amsgrad=True),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True),
}


def batch(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(32, 16, generator=g)
    y = x @ W
    return x, (y * 100 if step in BAD else y)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def loss_of(m, step):
    x, y = batch(step)
    return torch.nn.functional.mse_loss(m(x), y)


def opt_state(opt):
    """Every tensor of the optimizer state, cloned, keyed by (param index, name)."""
    sd = opt.state_dict()
    return {(i, k): v.clone() for i, st in sd["state"].items() for k, v in st.items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def weights(m):
    return {k: v.clone() for k, v in m.state_dict().items()}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_skips_exactly_the_bad_steps_and_the_rest_is_a_bare_optimizers(name):
    m, bare_m = model(), model()
    opt = SkipStepOptimizer(OPTIMIZERS[name](m.parameters()), window=16, k=6.0)
    assert opt.method == ("found_inf" if name == "adamw_fused" else "restore")
    bare = OPTIMIZERS[name](bare_m.parameters())  # steps every step but the planted ones
    skipped = []
    for step in range(1, STEPS + 1):
        loss = loss_of(m, step)
        loss.backward()
        before = (weights(m), opt_state(opt))
        opt.step(loss=loss)  # the grad norm: measured by the wrapper
        opt.zero_grad()
        if bool(opt.last_skip):
            skipped.append(step)
            # A skipped step leaves weights and optimizer state (moments, step counts)
            # exactly as they were.
            assert same(weights(m), before[0]) and same(opt_state(opt), before[1]), step
        else:
            assert not same(weights(m), before[0]), step
        bare_loss = loss_of(bare_m, step)
        bare_loss.backward()
        if step not in BAD:
            bare.step()
        bare.zero_grad()
        # Every step: the wrapped run is the bare one that leaves out the planted steps.
        assert same(weights(m), weights(bare_m)), step
        assert same(opt_state(opt), opt_state(bare)), step
    assert skipped == sorted(BAD)
    assert opt.skipped.dtype == torch.long and int(opt.skipped) == len(BAD)
    assert int(opt.detector.n) == STEPS  # the skipped steps are in the window (OLMo-core)


def test_the_wrapper_judges_with_the_built_in_detector():
    # The same values through the built-in loop's SkipStep give the same decisions and
    # the same window: one implementation.
    m = model()
    opt = SkipStepOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=True),
                            window=16, k=6.0)
    ref = SkipStep(16, 6.0, torch.device("cpu"))
    for step in range(1, 50):
        loss = loss_of(m, step)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(m.parameters(), float("inf"), foreach=True)
        opt.step(loss=loss, grad_norm=norm)
        opt.zero_grad()
        assert bool(opt.last_skip) == bool(ref.check(loss.detach(), norm)), step
    assert torch.equal(opt.detector.values, ref.values) and torch.equal(opt.detector.n, ref.n)


@contextmanager
def no_host_reads():
    """Count every way a tensor's value reaches the host."""
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


# Both ways of skipping. (Not a non-capturable, non-fused Adam: its own step reads its
# step counts back, which are host tensors there, as torch keeps them.)
@pytest.mark.parametrize("name", ["adamw_fused", "sgd_momentum"])
def test_no_value_is_read_back_per_step(name):
    m = model()
    opt = SkipStepOptimizer(OPTIMIZERS[name](m.parameters()), window=8, k=6.0, max_norm=1.0)
    with no_host_reads() as control:  # the spy sees a read-back when there is one
        bool(opt.skipped > 0)
    assert control == ["__bool__"]
    with no_host_reads() as calls:
        for step in range(1, 12):  # the planted steps are outside: nothing is skipped...
            loss = loss_of(m, step + 100)
            loss.backward()
            opt.step(loss=loss)
            opt.zero_grad()
        bad = loss_of(m, 20)  # ...but this one is
        bad.backward()
        opt.step(loss=bad)
    assert calls == []
    assert int(opt.skipped) == 1


def test_observe_closure_and_grad_norm_only_give_the_same_run():
    def run(mode):
        m = model()
        on = ("grad_norm",) if mode == "grad_norm_only" else ("loss", "grad_norm")
        opt = SkipStepOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-2, fused=True),
                                window=16, k=6.0, on=on)
        for step in range(1, 50):
            if mode == "closure":
                def closure(step=step):
                    opt.zero_grad()
                    loss = loss_of(m, step)
                    loss.backward()
                    return loss
                opt.step(closure)
                continue
            loss = loss_of(m, step)
            loss.backward()
            if mode == "observe":
                opt.observe(loss=loss)
                opt.step()
            elif mode == "grad_norm_only":
                opt.step()
            else:
                opt.step(loss=loss)
            opt.zero_grad()
        return weights(m), int(opt.skipped)
    runs = {mode: run(mode) for mode in ("kwargs", "observe", "closure", "grad_norm_only")}
    for mode, (w, skipped) in runs.items():
        assert skipped == 2, mode  # the planted steps' grad norms are outliers too
        assert same(w, runs["kwargs"][0]), mode


def test_a_step_without_its_loss_is_refused_before_anything_changes():
    m = model()
    opt = SkipStepOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-2), window=4,
                            max_norm=1e-3)
    loss_of(m, 1).backward()
    before = weights(m)
    grads = [p.grad.clone() for p in m.parameters()]
    with pytest.raises(ValueError, match="no loss for this step"):
        opt.step()
    assert same(weights(m), before) and int(opt.detector.n) == 0
    assert all(torch.equal(p.grad, g) for p, g in zip(m.parameters(), grads, strict=True))
    with pytest.raises(ValueError, match="on ="):
        SkipStepOptimizer(torch.optim.AdamW(m.parameters()), on=("loss", "loss"))


def test_a_non_finite_step_is_skipped_and_kept_out_of_the_window():
    m = model()
    opt = SkipStepOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=True),
                            window=16, k=6.0)
    for step in range(1, 4):
        loss = loss_of(m, step)
        loss.backward()
        opt.step(loss=loss)
        opt.zero_grad()
    before = (weights(m), opt_state(opt))
    loss = loss_of(m, 4)
    loss.backward()
    m[0].weight.grad[0, 0] = float("nan")
    opt.step(loss=loss)
    assert bool(opt.last_skip) and int(opt.detector.n) == 3  # before the window is ready
    assert same(weights(m), before[0]) and same(opt_state(opt), before[1])


@pytest.mark.parametrize("name", ["adamw_fused", "sgd_momentum"])
def test_state_dict_resumes_exactly(name):
    def run(resume_at=None):
        m = model()
        opt = SkipStepOptimizer(OPTIMIZERS[name](m.parameters()), window=16, k=6.0)
        for step in range(1, STEPS + 1):
            if step == resume_at:  # a new model and optimizer from the saved state
                saved = copy.deepcopy((m.state_dict(), opt.state_dict()))
                m = model()
                opt = SkipStepOptimizer(OPTIMIZERS[name](m.parameters()), window=16, k=6.0)
                m.load_state_dict(saved[0])
                opt.load_state_dict(saved[1])
            loss = loss_of(m, step)
            loss.backward()
            opt.step(loss=loss)
            opt.zero_grad()
        return weights(m), opt_state(opt), opt.detector.state_dict(), int(opt.skipped)
    full, resumed = run(), run(resume_at=30)
    assert full[3] == resumed[3] == 2  # the skip at 45 needs the window saved at 30
    assert same(full[0], resumed[0]) and same(full[1], resumed[1]) and same(full[2], resumed[2])
    sd = SkipStepOptimizer(torch.optim.AdamW(model().parameters()), window=8).state_dict()
    with pytest.raises(ValueError, match="window=8"):
        SkipStepOptimizer(torch.optim.AdamW(model().parameters()), window=16).load_state_dict(sd)


def test_under_grad_scaler_the_unscaled_grads_are_judged():
    # GradScaler.step(opt, loss=...) unscales, then calls the wrapper's step (the scale
    # never overflows here); the planted steps are still the skipped ones.
    m = model()
    opt = SkipStepOptimizer(torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=True),
                            window=16, k=6.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    skipped = []
    for step in range(1, STEPS + 1):
        loss = loss_of(m, step)
        scaler.scale(loss).backward()
        scaler.step(opt, loss=loss)
        scaler.update()
        opt.zero_grad()
        if bool(opt.last_skip):
            skipped.append(step)
    assert skipped == sorted(BAD)


def test_it_is_an_optimizer_to_lr_schedulers_and_delegates_the_rest():
    m = model()
    inner = torch.optim.AdamW(m.parameters(), lr=1e-2)
    inner.train = lambda: "train mode"  # as a schedule-free optimizer has
    opt = SkipStepOptimizer(inner, window=8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 ** s)
    loss = loss_of(m, 1)
    loss.backward()
    opt.step(loss=loss)
    sched.step()
    assert opt.param_groups is inner.param_groups and inner.param_groups[0]["lr"] == 5e-3
    assert opt.train() == "train mode" and not hasattr(opt, "eval")
    assert copy.deepcopy(opt).detector.window == 8
