"""Performance figures for the bench: the harness against a bare PyTorch loop (a ratio),
model FLOP utilisation against a matmul peak measured in the same process, and sweep
throughput with N workers against one. Ratios travel between machines better than times,
so the bench judges only these."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from spikebench import config as cfgmod
from spikebench.data.corpus import load_corpus
from spikebench.data.seeds import derive_seed
from spikebench.model import build_model
from spikebench.sweep.spec import Param, SweepSpec
from spikebench.train.loop import train
from spikebench.train.optim import make_optimizer
from spikebench.train.schedule import lr_factor
from spikebench.train.setup import resolve_device


def bare_loop(cfg, corpus, device, on_step=None) -> float:
    """The loop a person would write by hand; returns seconds per step. ``on_step(step,
    loss, grad_norm, lr)`` (device tensors) is called after each update: how a team's loop
    would log to the run API (``benchmarks/api_overhead.py``)."""
    torch.manual_seed(derive_seed(cfg.train.seed, "init"))
    model = build_model(cfg.model).to(device)
    opt = make_optimizer(model, cfg)
    data = corpus.train if isinstance(corpus.train, torch.Tensor) else torch.from_numpy(
        corpus.train[: 10_000_000].astype("int64"))
    B, T = cfg.data.batch_size, cfg.data.seq_len
    gen = torch.Generator().manual_seed(0)
    arange = torch.arange(T + 1)
    clip = cfg.optim.clip if cfg.optim.clip is not None else math.inf
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(cfg.train.steps):
        lr = cfg.optim.lr * lr_factor(i, cfg.train.steps, cfg.schedule)
        for g in opt.param_groups:
            g["lr"] = lr
        off = torch.randint(0, len(data) - T - 1, (B,), generator=gen)
        win = data[off[:, None] + arange].long().to(device, non_blocking=True)
        _, loss = model(win[:, :-1], win[:, 1:])
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_step is not None:
            on_step(i + 1, loss.detach(), norm, lr)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / cfg.train.steps


def spikebench_loop(cfg) -> float:
    with tempfile.TemporaryDirectory() as d:
        cfg.run.out_dir = d
        summary = train(cfg)
    return summary["seconds"] / summary["steps"]


def matmul_peak(device, n=1024, reps=10, rounds=5) -> float:
    """FLOP/s of an n x n fp32 matmul: the best of ``rounds`` timings of ``reps`` products
    (a peak, so the fastest round; one short round varies by a third on a shared machine)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b
    best = 0.0
    for _ in range(rounds):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t0))
    return best


def model_flops_per_step(cfg, n_params) -> float:
    # nanoGPT/PaLM estimate: 6N per token plus the attention score and value matmuls.
    m, T = cfg.model, cfg.data.seq_len
    per_token = 6 * n_params + 12 * m.n_layer * m.n_embd * T
    return per_token * T * cfg.data.batch_size


def paired_runs(cfg: cfgmod.Config, repeats: int, *, warm: bool = True
                ) -> tuple[list[float], list[float]]:
    """Seconds per step of the bare loop and of ``train()``, run back to back ``repeats``
    times (pair i ran under the same machine load). ``warm``: a discarded short pair first,
    since the first train() of a process pays for lazy imports and first-use allocations
    (ratios 10-20% high here)."""
    device = resolve_device(cfg.train.device)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    corpus = load_corpus(cfg)
    cfg = cfgmod.from_dict(cfg.to_dict())
    cfg.train.compile = False  # the bare loop is eager: the harness is measured, not compile
    if warm:
        short = cfgmod.from_dict(cfg.to_dict())
        short.train.steps = short.train.eval_every = min(20, cfg.train.steps)
        bare_loop(short, corpus, device)
        spikebench_loop(short)
    bare, ours = [], []
    for _ in range(repeats):
        bare.append(bare_loop(cfg, corpus, device))
        ours.append(spikebench_loop(cfgmod.from_dict(cfg.to_dict())))
    return bare, ours


def overhead(cfg: cfgmod.Config, repeats: int, *, warm: bool = True,
             peak: bool = True) -> dict[str, Any]:
    """Median seconds per step of the bare loop and of ``train()``, run back to back in each
    repeat; the overhead ratio is the median of the repeats' ratios, so drift in machine load
    between repeats cancels; and each loop's MFU against the matmul peak (``peak=False``:
    no MFU). ``warm=False`` skips the warm-up pair, for a process that has trained."""
    device = resolve_device(cfg.train.device)
    bare, ours = paired_runs(cfg, repeats, warm=warm)
    n_params = sum(p.numel() for p in build_model(cfg.model).parameters())
    b, o = statistics.median(bare), statistics.median(ours)
    tokens = cfg.data.batch_size * cfg.data.seq_len
    ratio = statistics.median(x / y for x, y in zip(ours, bare, strict=True))
    out = {"bare_s_per_step": b, "s_per_step": o, "overhead_ratio": ratio,
           "tokens_per_s": tokens / o, "device": str(device),
           "threads": torch.get_num_threads(), "n_params": n_params}
    if peak:
        top = matmul_peak(device)
        flops = model_flops_per_step(cfg, n_params)
        out.update(matmul_peak_flops=top, mfu=flops / o / top, mfu_bare=flops / b / top)
    return out


def sweep_scaling(spec: SweepSpec, *, trials: int, steps: int, jobs: int,
                  results: Path) -> dict[str, Any]:
    """Wall seconds of the same small search (``trials`` random trials of one seed over the
    LR, ``steps`` steps each) with one worker and with ``jobs``; scaling = t1 / tN."""
    from spikebench.sweep.driver import run_sweep

    base = {**spec.base, "train.steps": steps, "train.eval_every": steps}
    for k in cfgmod.BUDGET_KEYS:
        if k != "train.steps":
            base.pop(k, None)
    lr = float(spec.base.get("optim.lr", 3e-3))
    small = dataclasses.replace(
        spec, name="sweep-scaling", trials=trials, seeds=[spec.seeds[0]], arms={},
        space=[Param("optim.lr", low=lr / 3, high=lr, log=True)], sampler="random",
        pruner="none", objective="multi", storage="", base=base, steps=steps,
        eval_every=steps, grid={})
    seconds = {}
    for n in (1, jobs):
        t0 = time.perf_counter()
        run_sweep(dataclasses.replace(small, name=f"sweep-scaling-{n}"), results=results,
                  jobs=n, log=lambda s: None)
        seconds[n] = time.perf_counter() - t0
    return {"workers": jobs, "seconds_1": seconds[1], "seconds_n": seconds[jobs],
            "sweep_scaling": seconds[1] / seconds[jobs]}


def python_unit() -> float:
    """Seconds of a fixed pure-Python workload (building, serialising and sorting 100,000
    small records), best of five with the garbage collector paused: the unit the report
    time is measured in, so that the ratio, not the machine's speed, is compared. (With
    the collector on, one timing moved by half with the size of the process's heap.)"""
    import gc

    best = math.inf
    for _ in range(5):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            rows = [{"step": i, "loss": (i * 7919) % 1000 / 7.0, "name": f"t{i}"}
                    for i in range(100_000)]
            rows = json.loads(json.dumps(rows))
            rows.sort(key=lambda r: (-r["loss"], r["name"]))
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def report_time(trials: int) -> dict[str, Any]:
    """Seconds of ``build_report`` (the faster of two) on a synthetic study of ``trials``
    trials x 3 seeds with 300 logged steps each, built by the report tests' fixture builder (so it needs the
    repository's ``tests/``; building the study is not timed), and that time in units of
    :func:`python_unit`."""
    import sys

    from spikebench.config import REPO_ROOT
    from spikebench.report import build_report

    where = REPO_ROOT / "tests" / "report"
    if not (where / "fixtures.py").is_file():
        return {}
    sys.path.insert(0, str(where))
    try:
        from fixtures import ARMS, LR, SPACE, make_study
    finally:
        sys.path.remove(str(where))
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        study = make_study(Path(tmp), folder="speed", search=max(0, trials - len(ARMS)),
                           space=SPACE + [LR], steps=300)
        seconds = math.inf
        for i in range(2):  # the first also pays for the plotting imports and font cache
            t0 = time.perf_counter()
            build_report(study, Path(tmp) / f"report-{i}")
            seconds = min(seconds, time.perf_counter() - t0)
    unit = python_unit()
    return {"report_trials": trials, "report_seconds": seconds, "python_unit_s": unit,
            "report_ratio": seconds / unit}

