"""The framework callbacks' cost: the same tiny model trained with and without spikebench's
callback, per framework, in one process.

For each framework (``hf``: a Hugging Face ``Trainer`` on a GPT-2 of 2 layers, width 64,
built from its config; ``lightning``: a Lightning ``Trainer`` on a causal transformer of
the same size; ``loop``: a plain PyTorch loop on that transformer, with
``SpikebenchLoop`` and ``grad_norm``; ``loop_clip``: the same loop clipping at 1.0 in both
arms, logging the norm ``clip_grad_norm_`` returns; ``lightning_every4``: the Lightning
callback computing the norm on every 4th step only), on random tokens built here, N
optimizer steps with a log every step:
a discarded warm-up pair, then ``--repeats`` pairs, their order alternating. Prints the
bare and the with-callback step time (the whole ``train()`` / ``fit()`` / loop over its
steps, the run's finish included), the ratio of mean step times (goal <= 1.02) with the
exact 95% sign-flip interval over the pairs, and the time spent inside the callback's
hooks per step (each hook of a subclass timed with the same clock) with the ratio it
implies, ``1 + inside / bare step`` (its worst run over the fastest bare run as the bound):
far less noisy than a difference of two runs on a shared machine. ``--clock cpu`` (the
default) times in the process's CPU seconds (``time.process_time``), which the other work
of a shared machine does not lengthen as it does wall time; ``--clock wall`` in seconds.

    python benchmarks/callback_overhead.py --steps 100 --repeats 6 --threads 1
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F

from spikebench.report.exact import relative_interval

VOCAB, BLOCK, WIDTH, LAYERS, HEADS, BATCH = 256, 64, 64, 2, 2, 8
LR = 1e-3
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
now = CLOCKS["cpu"]  # set by --clock


class Clock:
    """Seconds spent inside timed calls, in all and by name; a call made from inside
    another is not counted twice."""

    def __init__(self) -> None:
        self.inside = 0.0
        self.by_name: dict[str, float] = {}
        self._depth = 0

    def wrap(self, fn: Callable, name: str | None = None) -> Callable:
        name = name or fn.__name__

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t = now()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = now() - t
                self.inside += dt
                self.by_name[name] = self.by_name.get(name, 0.0) + dt
                self._depth -= 1
        return timed


def timed_subclass(cls: type, names: Iterable[str], clock: Clock) -> type:
    """A subclass of ``cls`` whose methods ``names`` add their time to ``clock``."""
    return type(f"Timed{cls.__name__}", (cls,),
                {n: clock.wrap(getattr(cls, n)) for n in names})


def hooks(cls: type) -> list[str]:
    """The framework hooks the spikebench class itself defines (``on_*``)."""
    return sorted(n for n in vars(cls) if n.startswith("on_") and callable(vars(cls)[n]))


def tokens(n: int, seed: int) -> torch.Tensor:
    """``n`` random sequences of BLOCK tokens."""
    return torch.randint(0, VOCAB, (n, BLOCK), generator=torch.Generator().manual_seed(seed))


class TinyLM(torch.nn.Module):
    """A causal transformer of the GPT-2's size: token and position embeddings, LAYERS
    pre-norm layers of width WIDTH, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.tok = torch.nn.Embedding(VOCAB, WIDTH)
        self.pos = torch.nn.Embedding(BLOCK, WIDTH)
        layer = torch.nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.0,
                                                 batch_first=True, norm_first=True)
        self.body = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = torch.nn.Linear(WIDTH, VOCAB)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(
            BLOCK - 1), persistent=False)

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        inp = x[:, :-1]
        h = self.tok(inp) + self.pos(torch.arange(inp.shape[1]))
        h = self.body(h, mask=self.mask, is_causal=True)
        logits = self.head(h)
        return F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))


# ---------------------------------------------------------------------------- frameworks


def run_hf(steps: int, with_callback: bool, run_dir: str) -> tuple[float, Clock]:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from spikebench.integrations.hf import SpikebenchCallback

    class Data(torch.utils.data.Dataset):
        def __init__(self, x):
            self.x = x

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"input_ids": self.x[i], "labels": self.x[i]}

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=LAYERS, n_embd=WIDTH, n_head=HEADS,
                                       vocab_size=VOCAB, n_positions=BLOCK,
                                       bos_token_id=0, eos_token_id=0))
    args = TrainingArguments(
        output_dir=f"{run_dir}/hf", max_steps=steps, per_device_train_batch_size=BATCH,
        learning_rate=LR, logging_steps=1, save_strategy="no", eval_strategy="no",
        report_to=[], use_cpu=True, seed=0, disable_tqdm=True, dataloader_num_workers=0)
    clock = Clock()
    callbacks = []
    if with_callback:
        cls = timed_subclass(SpikebenchCallback, hooks(SpikebenchCallback), clock)
        callbacks.append(cls(run_dir=f"{run_dir}/run"))
    trainer = Trainer(model=model, args=args, train_dataset=Data(tokens(steps * BATCH, 1)),
                      callbacks=callbacks)
    for cb in (PrinterCallback, ProgressCallback):  # no printing of every log
        trainer.remove_callback(cb)
    t = now()
    trainer.train()
    total = now() - t
    return total, clock


def run_lightning(steps: int, with_callback: bool, run_dir: str, grad_norm_every: int = 1
                  ) -> tuple[float, float]:
    import lightning.pytorch as pl

    from spikebench.integrations.lightning import SpikebenchCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.lm = TinyLM()

        def training_step(self, batch, batch_idx):
            return self.lm.loss(batch)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=LR)

    clock = Clock()
    callbacks = []
    if with_callback:
        cls = timed_subclass(SpikebenchCallback, hooks(SpikebenchCallback), clock)
        callbacks.append(cls(run_dir=f"{run_dir}/run", grad_norm_every=grad_norm_every))
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         limit_val_batches=0, callbacks=callbacks)
    module = Module()
    data = torch.utils.data.DataLoader(tokens(steps * BATCH, 1), batch_size=BATCH)
    t = now()
    trainer.fit(module, data)
    total = now() - t
    return total, clock


def run_loop(steps: int, with_callback: bool, run_dir: str, clip: bool = False
             ) -> tuple[float, Clock]:
    from spikebench.integrations.loop import SpikebenchLoop, grad_norm

    clock = Clock()
    model = TinyLM()
    params = list(model.parameters())  # kept, as grad_norm's docstring advises
    opt = torch.optim.AdamW(params, lr=LR)
    data = tokens(steps * BATCH, 1).split(BATCH)
    norm = clock.wrap(grad_norm)  # what the loop adds to log a grad norm counts too
    sb = None
    if with_callback:
        cls = timed_subclass(SpikebenchLoop, ["start", "log", "finish"], clock)
        sb = cls(run_dir=f"{run_dir}/run")
    t = now()
    if sb is not None:
        sb.start()  # the run, made here rather than in the first log: timed apart
    for step, x in enumerate(data, 1):
        loss = model.loss(x)
        loss.backward()
        gn = None
        if clip:  # both arms: the clip's norm is the pre-clip norm, logged as it is
            gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        elif sb is not None:
            gn = norm(params)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if sb is not None:
            sb.log(step, loss=loss.detach(), grad_norm=gn, lr=opt.param_groups[0]["lr"])
            if sb.should_stop:
                break
    if sb is not None:
        sb.finish()  # what leaving the ``with`` block does
    total = now() - t
    return total, clock


ONCE = {"on_train_begin", "on_train_start", "on_train_end", "start", "finish"}  # per run
FRAMEWORKS = {"hf": run_hf, "lightning": run_lightning, "loop": run_loop,
              "loop_clip": functools.partial(run_loop, clip=True),
              "lightning_every4": functools.partial(run_lightning, grad_norm_every=4)}
NAMES = {"hf": "Hugging Face Trainer", "lightning": "Lightning Trainer", "loop": "plain loop",
         "loop_clip": "plain loop, clipping",
         "lightning_every4": "Lightning Trainer, grad_norm_every=4"}


def one(fn, steps: int, with_callback: bool) -> tuple[float, float, dict[str, float]]:
    """One run: seconds per step, of those the seconds inside the callback, and those by
    hook."""
    with tempfile.TemporaryDirectory() as d:
        total, clock = fn(steps, with_callback, d)
    return total / steps, clock.inside / steps, {k: v / steps for k, v in
                                                  clock.by_name.items()}


def measure(name: str, steps: int, repeats: int) -> dict:
    fn = FRAMEWORKS[name]
    short = min(20, steps)
    one(fn, short, False)  # warm-up pair: lazy imports, first allocations
    one(fn, short, True)
    bare, cb, inside, by_hook = [], [], [], {}
    for r in range(repeats):
        order = (False, True) if r % 2 == 0 else (True, False)
        for with_callback in order:
            per_step, own, by_name = one(fn, steps, with_callback)
            if with_callback:
                cb.append(per_step)
                inside.append(own)
                for k, v in by_name.items():
                    by_hook[k] = by_hook.get(k, 0.0) + v / repeats
            else:
                bare.append(per_step)
    return {"bare": bare, "cb": cb, "inside": inside, "by_hook": by_hook, "steps": steps}


def report(name: str, m: dict) -> str:
    bare, cb, inside = m["bare"], m["cb"], m["inside"]
    b, a, own = statistics.fmean(bare), statistics.fmean(cb), statistics.fmean(inside)
    ci = relative_interval(cb, bare)
    interval = (f"no interval: {ci.why}" if ci.lo is None else
                f"95% interval {1 + ci.lo:.3f} to {1 + ci.hi:.3f}, {ci.method}")
    print(f"{NAMES[name]}")
    print(f"  bare          : {b * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in bare) + ")")
    print(f"  with callback : {a * 1e3:8.2f} ms/step  (runs: "
          + ", ".join(f"{x * 1e3:.2f}" for x in cb) + ")")
    print(f"  step-time ratio callback/bare: {a / b:.3f}  ({interval}; goal <= 1.02)")
    print(f"  inside the callback: {own * 1e6:.1f} us/step (worst run "
          f"{max(inside) * 1e6:.1f}), {own / b:.2%} of a bare step: implied ratio "
          f"{1 + own / b:.4f} (worst {1 + max(inside) / min(bare):.4f}; goal <= 1.02)")
    hooks_ = sorted(m["by_hook"].items(), key=lambda kv: -kv[1])
    every = sum(v for k, v in hooks_ if k not in ONCE)
    once = sum(v for k, v in hooks_ if k in ONCE) * m["steps"]
    print(f"    every step: {every * 1e6:.1f} us/step, implied ratio {1 + every / b:.4f} ("
          + ", ".join(f"{k} {v * 1e6:.1f}" for k, v in hooks_ if k not in ONCE) + ")")
    print(f"    once a run (start, finish): {once * 1e3:.1f} ms, {once / m['steps'] * 1e6:.1f}"
          f" us/step over {m['steps']} steps ("
          + ", ".join(f"{k} {v * m['steps'] * 1e3:.1f} ms" for k, v in hooks_ if k in ONCE)
          + ")")
    return (f"| {NAMES[name]} | {b * 1e3:.2f} | {a * 1e3:.2f} | {a / b:.3f} ("
            + ("–" if ci.lo is None else f"{1 + ci.lo:.3f} to {1 + ci.hi:.3f}")
            + f") | {own * 1e6:.0f} | {1 + own / b:.4f} | {every * 1e6:.0f} | "
            f"{1 + every / b:.4f} | {once * 1e3:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=6,
                    help="measured pairs per framework (an exact interval needs 6)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                    help="cpu: the process's CPU seconds (default); wall: seconds")
    ap.add_argument("--frameworks", default="hf,lightning,loop,loop_clip",
                    help="comma-separated, of: " + ", ".join(FRAMEWORKS))
    args = ap.parse_args()
    names = [n.strip() for n in args.frameworks.split(",") if n.strip()]
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown:
        ap.error(f"unknown framework(s): {', '.join(unknown)}")
    torch.set_num_threads(args.threads)
    global now
    now = CLOCKS[args.clock]
    warnings.filterwarnings("ignore")
    if any(n.startswith("lightning") for n in names):
        import lightning.pytorch  # noqa: F401  (it sets its loggers' level on import)
    for log in ("lightning", "lightning.pytorch", "lightning.fabric", "transformers"):
        logging.getLogger(log).setLevel(logging.ERROR)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch "
          f"{BATCH}x{BLOCK} tokens, vocab {VOCAB}, {LAYERS} layers of width {WIDTH}, "
          f"{args.steps} steps x {args.repeats} pairs (after a warm-up pair), a log every step, "
          f"{args.clock} clock; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows = []
    t0 = time.perf_counter()
    for name in names:
        rows.append(report(name, measure(name, args.steps, args.repeats)))
    print("\n| Framework | bare ms/step | with callback ms/step | ratio (95% interval) "
          "| inside µs/step | implied ratio | every step µs | its implied ratio "
          "| start + finish ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n({time.perf_counter() - t0:.0f} s; load average at the end "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
