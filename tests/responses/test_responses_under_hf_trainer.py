"""The public responses under a real Hugging Face Trainer: a tiny GPT-2 built from its config
(never a hub download) learning a counting pattern (each next token = this one + 1, mod 64),
with planted batches of random tokens. The data is an IterableDataset, so the Trainer does
not shuffle it: step s trains on batch s - 1 (plus the rollback's skipped batches).

- skip-step: the wrapper, as the Trainer's optimizer, skips exactly the planted steps
  (weights and AdamW state unchanged across them), and up to the first one the run is a
  bare AdamW's with the Trainer's own clipping, bit for bit; its state resumes with the
  Trainer's checkpoint;
- ZClip: a callback clips before each optimizer step; the bound holds and is the built-in
  ZClip's on the same norms;
- rollback: a callback drives the helper with the model, optimizer and scheduler states.
"""

import copy
import os
from itertools import islice

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from spikebench.responses import Rollback, SkipStepOptimizer, ZClipper
from spikebench.train.zclip import ZClip

if os.environ.get("CI"):  # CI installs the dev extra, which has transformers: never skip
    import transformers
else:
    transformers = pytest.importorskip("transformers")

torch.set_num_threads(1)

BATCH, SEQ, VOCAB = 8, 32, 64


class Pattern(torch.utils.data.IterableDataset):
    """Counting sequences; the batches in ``bad`` are random tokens. ``offset`` (batches to
    skip) is read as the stream goes, so a rollback can move it on."""

    def __init__(self, bad):
        self.bad, self.offset = set(bad), 0

    def __iter__(self):
        b = 0
        while True:
            index = b + self.offset
            g = torch.Generator().manual_seed(index)
            for _ in range(BATCH):
                if index in self.bad:
                    x = torch.randint(0, VOCAB, (SEQ,), generator=g)
                else:
                    x = (torch.randint(0, VOCAB, (1,), generator=g) + torch.arange(SEQ)) % VOCAB
                yield {"input_ids": x, "labels": x}
            b += 1


def gpt():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=SEQ))


def trainer(model, data, opt, steps, out, callbacks=(), sched=None, **args):
    kw = {"max_grad_norm": 0.0, "lr_scheduler_type": "constant", "logging_steps": 10,
          "save_strategy": "no", **args}
    return transformers.Trainer(
        model=model, train_dataset=data, optimizers=(opt, sched), callbacks=list(callbacks),
        args=transformers.TrainingArguments(
            output_dir=str(out), max_steps=steps, per_device_train_batch_size=BATCH,
            report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, seed=0,
            **kw))


def weights(m):
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def opt_state(opt):
    return {(i, k): v.clone() for i, st in opt.state_dict()["state"].items()
            for k, v in st.items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class Watch(transformers.TrainerCallback):
    """Each step's skip flag; weights and optimizer state around the given steps."""

    def __init__(self, model, opt, around=(), at=()):
        self.model, self.opt, self.around, self.at = model, opt, set(around), set(at)
        self.flags, self.before, self.after, self.snap = [], {}, {}, {}

    def on_pre_optimizer_step(self, args, state, control, **kw):
        if state.global_step + 1 in self.around:
            self.before[state.global_step + 1] = (weights(self.model), opt_state(self.opt))

    def on_optimizer_step(self, args, state, control, **kw):
        if state.global_step + 1 in self.around:
            self.after[state.global_step + 1] = (weights(self.model), opt_state(self.opt))

    def on_step_end(self, args, state, control, **kw):
        if isinstance(self.opt, SkipStepOptimizer):
            self.flags.append(self.opt.last_skip.clone())  # read at the end: no sync
        if state.global_step in self.at:
            self.snap[state.global_step] = weights(self.model)


BAD_SKIP = {39, 69}  # batch indices: steps 40 and 70


def test_skip_step_as_the_trainers_optimizer_skips_the_planted_steps(tmp_path):
    model = gpt()
    opt = SkipStepOptimizer(torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True),
                            window=16, k=6.0, max_norm=1.0).watch(model)
    watch = Watch(model, opt, around={39, 40, 70}, at={39})
    trainer(model, Pattern(BAD_SKIP), opt, 80, tmp_path / "a", [watch]).train()
    assert [s for s, f in enumerate(watch.flags, 1) if bool(f)] == [40, 70]
    assert int(opt.skipped) == 2
    for s in (40, 70):  # skipped: weights and AdamW's moments and step counts unchanged
        assert same(watch.before[s][0], watch.after[s][0]), s
        assert same(watch.before[s][1], watch.after[s][1]), s
    assert not same(watch.before[39][0], watch.after[39][0])
    # Up to the first planted step, a bare AdamW clipped by the Trainer itself (the wrapper
    # measures and clips instead: max_grad_norm=0 there) gives the same weights.
    bare_model = gpt()
    bare = Watch(bare_model, None, at={39})
    trainer(bare_model, Pattern(BAD_SKIP), torch.optim.AdamW(
        bare_model.parameters(), lr=3e-3, fused=True), 39, tmp_path / "b", [bare],
        max_grad_norm=1.0).train()
    assert same(watch.snap[39], bare.snap[39])


def test_skip_step_state_resumes_with_the_trainers_checkpoint(tmp_path):
    # The Trainer saves optimizer.state_dict() (with the detector's window) at step 60 and
    # loads it on resume: the window goes on (a fresh one would count 20 steps at the end,
    # not 80), the skip at 70 happens, and the run ends as it would have.
    def make():
        model = gpt()
        opt = SkipStepOptimizer(torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True),
                                window=16, k=6.0, max_norm=1.0).watch(model)
        return model, opt
    model, opt = make()
    trainer(model, Pattern(BAD_SKIP), opt, 80, tmp_path / "full").train()
    model2, opt2 = make()
    trainer(model2, Pattern(BAD_SKIP), opt2, 60, tmp_path / "cut", save_strategy="steps",
            save_steps=60).train()
    model3, opt3 = make()
    trainer(model3, Pattern(BAD_SKIP), opt3, 80, tmp_path / "cut").train(
        resume_from_checkpoint=str(tmp_path / "cut" / "checkpoint-60"))
    assert int(opt.skipped) == 2 and int(opt3.skipped) == 2  # counted since step 1
    assert int(opt3.detector.n) == 80 and bool(opt3.last_skip) is False
    assert torch.equal(opt.detector.values, opt3.detector.values)
    assert same(weights(model), weights(model3))


class ZClipCallback(transformers.TrainerCallback):
    """ZClip in the Trainer: clip just before each optimizer step (max_grad_norm=0)."""

    def __init__(self, model, clip):
        self.model, self.clip, self.rows = model, clip, []

    def on_pre_optimizer_step(self, args, state, control, **kw):
        bound = self.clip(self.model.parameters())
        self.rows.append((self.clip.norm.clone(), bound))


def test_zclip_in_a_callback_bounds_every_update(tmp_path):
    model = gpt()
    cb = ZClipCallback(model, ZClipper(warmup=10))
    applied = []

    def spy(optimizer, args, kwargs):
        applied.append(torch.nn.utils.get_total_norm(
            [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]))
    handle = register_optimizer_step_pre_hook(spy)
    try:
        trainer(model, Pattern({39}), torch.optim.AdamW(model.parameters(), lr=3e-3), 50,
                tmp_path, [cb]).train()
    finally:
        handle.remove()
    assert len(applied) == len(cb.rows) == 50
    ref = ZClip(0.97, 2.5, 10, torch.device("cpu"))
    for step, ((norm, bound), after) in enumerate(zip(cb.rows, applied, strict=True), 1):
        assert torch.equal(ref.clip_([], norm), bound), step  # the built-in's numbers
        assert float(after) <= min(float(norm), float(bound)) * (1 + 1e-5), step
    norm, bound = cb.rows[39]
    assert float(norm) > float(bound)  # the planted step is clipped


class RollbackCallback(transformers.TrainerCallback):
    """The loop's side of the rollback helper, in the Trainer: the step's loss from a
    forward hook, the state kept in memory (model, optimizer, LR scheduler), the data moved
    on. ``position`` is the step of the state; the Trainer's global_step counts steps
    worked, so redone steps come out of ``max_steps``, as in the built-in loop."""

    def __init__(self, model, data, **kw):
        self.model, self.data, self.position, self.loss, self.backs = model, data, 0, None, []
        self.rb = Rollback(save=self.save, load=self.load, **kw)
        model.register_forward_hook(self.hook)

    def hook(self, module, args, output):
        if module.training and torch.is_grad_enabled():
            self.loss = output.loss.detach()

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kw):
        self.opt, self.sched = optimizer, lr_scheduler

    def save(self, step):
        return copy.deepcopy((self.model.state_dict(), self.opt.state_dict(),
                              self.sched.state_dict()))

    def load(self, token):
        model, opt, sched = copy.deepcopy(token)  # the optimizer would update the kept one
        self.model.load_state_dict(model)
        self.opt.load_state_dict(opt)
        self.sched.load_state_dict(sched)

    def on_step_end(self, args, state, control, **kw):
        self.position += 1
        back = self.rb.step(self.position, self.loss)
        if back is not None:
            self.backs.append((state.global_step, back, weights(self.model)))
            self.position = back.step
            self.data.offset = self.rb.offset  # the stream moves on (after a prefetch)


def test_rollback_driven_from_a_callback_goes_back_before_the_burst(tmp_path):
    def run(respond, bad):
        model = gpt()
        data = Pattern(bad)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        callbacks = [RollbackCallback(model, data, every=5, keep=4, read_every=5,
                                      skip_batches=20)] if respond else []
        watch = Watch(model, opt, at={40})
        trainer(model, data, opt, 100, tmp_path / str(respond), [*callbacks, watch]).train()
        model.eval()
        with torch.no_grad():
            x = torch.stack([it["input_ids"] for it in islice(Pattern(()), 32)])
            val = float(model(input_ids=x, labels=x).loss)
        return val, (callbacks[0] if respond else None), watch
    burst = set(range(40, 45))  # steps 41-45
    val, cb, watch = run(True, burst)
    (worked, back, restored), = cb.backs
    # Decided at the read-back of step 45; the onset is in the burst; the state kept at
    # step 40 (before it) came back, the same weights as the run had then.
    assert worked == 45 and back.step == 40 and 41 <= back.onset <= 45
    assert same(restored, watch.snap[40])
    assert cb.rb.events[0]["redone_steps"] == 5 and cb.rb.offset == 20
    assert cb.position == 100 - 5
    clean, _, _ = run(False, set())
    hit, _, _ = run(False, burst)
    # Recovered: as good as a run without the burst, which left the run without a
    # response at three times the loss at the end.
    assert val < 1.5 * clean and hit > 2 * clean
