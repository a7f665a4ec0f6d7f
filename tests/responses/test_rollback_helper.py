"""spikebench.responses.Rollback driven by a plain torch loop: a tiny MLP on random data with
a planted burst of bad batches (targets x 100, batches 60-64, i.e. steps 61-65). Adam's
second moments blown up by the burst stall the run without a response; the rollback goes
back to the state kept at step 60, skips the burst, and the run ends where a clean run
does."""

import copy

import pytest
import torch

from spikebench.responses import Rollback

torch.set_num_threads(1)

W = torch.linspace(-1, 1, 64).reshape(16, 4)
BURST = range(60, 65)  # batch indices
STEPS = 150


def batch(i, burst=True):
    g = torch.Generator().manual_seed(i)
    x = torch.randn(32, 16, generator=g)
    y = x @ W + 0.01 * torch.randn(32, 4, generator=g)
    return x, (y * 100 if burst and i in BURST else y)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def val_loss(m):
    with torch.no_grad():
        return sum(float(torch.nn.functional.mse_loss(m(x), y))
                   for x, y in (batch(10**5 + j) for j in range(4))) / 4


def weights(m):
    return {k: v.clone() for k, v in m.state_dict().items()}


class Loop:
    """A plain loop with its own save/load: one file per kept state (the token is its
    path, removed when the ring drops it)."""

    def __init__(self, folder, respond=True, burst=True, **kw):
        self.m = model()
        self.opt = torch.optim.AdamW(self.m.parameters(), lr=1e-2)
        self.folder, self.burst = folder, burst
        self.saved_weights = {}  # step -> weights, kept aside to check the restore
        self.batches = []  # the batch index each step trained on
        self.step = 0
        self.rb = Rollback(save=self.save, load=self.load, drop=lambda p: p.unlink(), **{
            "every": 10, "keep": 4, "read_every": 10, "skip_batches": 10, **kw}) \
            if respond else None

    def save(self, step):
        path = self.folder / f"state-{step}.pt"
        torch.save({"model": self.m.state_dict(), "optim": self.opt.state_dict(),
                    "step": step}, path)
        self.saved_weights[step] = weights(self.m)
        return path

    def load(self, path):
        state = torch.load(path, weights_only=True)
        self.m.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optim"])

    def train(self, steps_worked=STEPS, loss_as=torch.Tensor):
        backs = []
        for _ in range(steps_worked):
            self.step += 1
            i = self.step - 1 + (self.rb.offset if self.rb else 0)
            self.batches.append(i)
            x, y = batch(i, self.burst)
            loss = torch.nn.functional.mse_loss(self.m(x), y)
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
            if self.rb is not None:
                back = self.rb.step(self.step, loss if loss_as is torch.Tensor
                                    else float(loss.detach()))
                if back is not None:
                    assert self.step - back.redone_steps == back.step
                    backs.append((back, weights(self.m)))
                    self.step = back.step
        return backs


def test_rolls_back_before_the_onset_skips_the_burst_and_recovers(tmp_path):
    loop = Loop(tmp_path)
    backs = loop.train()
    (back, restored), = backs
    # The trigger saw the burst at the read-back of step 70; its onset is step 61; the
    # newest state kept before it, at 60, is loaded: exactly the weights saved then.
    assert (back.onset, back.step, back.redone_steps, back.skip_batches) == (61, 60, 10, 10)
    assert back.token == tmp_path / "state-60.pt"
    assert all(torch.equal(restored[k], v) for k, v in loop.saved_weights[60].items())
    assert loop.rb.events == [{"step": 70, "onset": 61, "to": 60, "redone_steps": 10,
                               "skipped_batches": 10}]
    # Steps worked: 150, 10 of them redone; after the rollback the stream is 10 batches
    # on, so the burst is not met again.
    assert len(loop.batches) == STEPS and loop.step == STEPS - 10
    after = loop.batches[70:]
    assert after[0] == 70 and not set(after) & set(BURST)
    # The ring kept the 4 newest states, on disk; the states from after the onset went.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"state-{s}.pt" for s in (110, 120, 130, 140)]
    # Recovered: as good as a run that never met the burst; without the response the run
    # is stalled (the burst's gradients fill Adam's second moments).
    clean = Loop(tmp_path / "clean", respond=False, burst=False)
    stalled = Loop(tmp_path / "none", respond=False)
    clean.train()
    stalled.train()
    assert val_loss(loop.m) < 1.5 * val_loss(clean.m)
    assert val_loss(stalled.m) > 20 * val_loss(clean.m)


def test_tensor_losses_are_read_back_once_per_read_every(tmp_path):
    loop = Loop(tmp_path)
    names = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy")
    saved = {n: getattr(torch.Tensor, n) for n in names}
    calls = []
    for n in names:
        setattr(torch.Tensor, n, lambda self, *a, n=n, **k: calls.append(n) or saved[n](
            self, *a, **k))
    try:
        loop.train(30)
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)
    assert [c for c in calls if c != "item"] == ["tolist"] * 3
    assert len(loop.rb.pending) == 0 and loop.rb.trigger.n_updates("train/loss") == 30


def test_float_losses_give_the_same_rollback(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "f").mkdir()
    a, b = Loop(tmp_path / "t"), Loop(tmp_path / "f")
    a.train(100)
    b.train(100, loss_as=float)
    assert a.rb.events == b.rb.events and len(a.rb.events) == 1
    assert all(torch.equal(v, b.m.state_dict()[k]) for k, v in a.m.state_dict().items())


def test_state_dict_resumes_exactly(tmp_path):
    # Interrupted at step 65 (inside the burst, before the read-back at 70 that decides
    # the rollback), resumed in a fresh loop from the loop's state and rb.state_dict().
    (tmp_path / "full").mkdir()
    (tmp_path / "cut").mkdir()
    full = Loop(tmp_path / "full")
    full.train(100)
    cut = Loop(tmp_path / "cut")
    cut.train(65)
    saved = copy.deepcopy({"model": cut.m.state_dict(), "optim": cut.opt.state_dict(),
                           "rb": cut.rb.state_dict(), "step": cut.step})
    resumed = Loop(tmp_path / "cut")
    resumed.m.load_state_dict(saved["model"])
    resumed.opt.load_state_dict(saved["optim"])
    resumed.rb.load_state_dict(saved["rb"])
    resumed.step = saved["step"]
    resumed.train(35)
    assert resumed.rb.events == full.rb.events and len(full.rb.events) == 1
    assert all(torch.equal(v, resumed.m.state_dict()[k])
               for k, v in full.m.state_dict().items())


def test_at_most_max_rollbacks(tmp_path):
    # No batches skipped: the burst comes back after every rollback; two, then it stays.
    loop = Loop(tmp_path, skip_batches=0, max_rollbacks=2)
    backs = loop.train(120)
    assert [(b.onset, b.step) for b, _ in backs] == [(61, 60), (61, 60)]
    assert loop.rb.offset == 0 and len(loop.rb.events) == 2
    assert loop.rb.spikes >= 3  # the third sighting (and any later) counted, not acted on
    assert sum(i in BURST for i in loop.batches) == 15


def test_a_ring_that_cannot_reach_past_a_read_is_refused():
    with pytest.raises(ValueError, match="reach 10 steps back, not past one read_every"):
        Rollback(save=lambda s: None, load=lambda t: None, every=5, keep=2, read_every=10)
    with pytest.raises(ValueError, match="keep = 0"):
        Rollback(save=lambda s: None, load=lambda t: None, keep=0)
