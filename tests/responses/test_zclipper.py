"""spikebench.responses.ZClipper: the built-in ZClip's numbers on the same inputs, its bound
held at every update of a plain loop with a planted bad batch, no read-back, and a state
dict that resumes exactly."""

import copy

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from spikebench.responses import ZClipper
from spikebench.train.zclip import ZClip

torch.set_num_threads(1)

BAD = {30}
W = torch.linspace(-1, 1, 64).reshape(16, 4)


def batch(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(32, 16, generator=g)
    y = x @ W
    return x, (y * 100 if step in BAD else y)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def backward(m, step):
    x, y = batch(step)
    torch.nn.functional.mse_loss(m(x), y).backward()


def test_same_numbers_as_the_built_in_zclip():
    # Two copies of one model see the same gradients; one is clipped by the loop's ZClip
    # (the norm from clip_grad_norm_, as train_step measures it), one by ZClipper.
    a, b = model(), model()
    opt_a = torch.optim.SGD(a.parameters(), lr=1e-2)
    opt_b = torch.optim.SGD(b.parameters(), lr=1e-2)
    ref = ZClip(0.97, 2.5, 5, torch.device("cpu"))
    clip = ZClipper(alpha=0.97, z=2.5, warmup=5)
    clipped = 0
    for step in range(1, 41):
        backward(a, step)
        backward(b, step)
        norm = torch.nn.utils.clip_grad_norm_(list(a.parameters()), float("inf"), foreach=True)
        bound_a = ref.clip_([p.grad for p in a.parameters()], norm)
        bound_b = clip(b.parameters())
        assert torch.equal(clip.norm, norm), step
        assert torch.equal(bound_a, bound_b), step
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(pa.grad, pb.grad), step
        clipped += bool(norm > bound_a)
        opt_a.step()
        opt_b.step()
        opt_a.zero_grad()
        opt_b.zero_grad()
    assert all(torch.equal(ref.state_dict()[k], clip.state_dict()[k]) for k in ref.state_dict())
    assert clipped >= 1  # the planted step at least


def test_the_bound_holds_at_every_update_and_the_bad_batch_is_clipped():
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    clip = ZClipper(warmup=10)
    applied = []

    def spy(optimizer, args, kwargs):
        grads = [p.grad for g in optimizer.param_groups for p in g["params"]]
        applied.append(torch.nn.utils.get_total_norm(grads))
    handle = register_optimizer_step_pre_hook(spy)
    rows = []
    try:
        for step in range(1, 41):
            backward(m, step)
            bound = clip(m.parameters())
            rows.append((step, float(clip.norm), float(bound)))
            opt.step()
            opt.zero_grad()
    finally:
        handle.remove()
    assert all(b == float("inf") for s, _, b in rows if s <= 10)
    for (step, pre, bound), after in zip(rows, applied, strict=True):
        assert float(after) <= min(pre, bound) * (1 + 1e-5), step
    step, pre, bound = rows[29]
    assert step == 30 and pre > 50 * bound and float(applied[29]) <= bound * (1 + 1e-5)


def test_no_value_is_read_back():
    m = model()
    clip = ZClipper(warmup=3)
    backward(m, 1)
    clip(m.parameters())
    names = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy")
    saved = {n: getattr(torch.Tensor, n) for n in names}
    calls = []
    for n in names:
        setattr(torch.Tensor, n, lambda self, *a, n=n, **k: calls.append(n) or saved[n](
            self, *a, **k))
    try:
        for step in range(2, 8):
            backward(m, step)
            clip(m.parameters())
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)
    assert calls == []


def test_state_dict_resumes_exactly():
    def run(resume_at=None):
        m = model()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        clip = ZClipper(warmup=5)
        bounds = []
        for step in range(1, 41):
            if step == resume_at:
                saved = copy.deepcopy(clip.state_dict())
                clip = ZClipper(warmup=5)
                clip.load_state_dict(saved)
            backward(m, step)
            bounds.append(clip(m.parameters()))
            opt.step()
            opt.zero_grad()
        return torch.stack(bounds), {k: v.clone() for k, v in m.state_dict().items()}
    (b1, w1), (b2, w2) = run(), run(resume_at=20)
    assert torch.equal(b1, b2) and all(torch.equal(w1[k], w2[k]) for k in w1)
