"""What spikebench claims on a GPU, checked in one command: one table, one JSON.

On a CUDA machine, each part in turn (``--parts`` picks some):

- ``sync``: the no-sync claim. The built-in loop runs under
  ``torch.cuda.set_sync_debug_mode("error")`` between read-backs
  (``SPIKEBENCH_SYNC_DEBUG=error``, :mod:`spikebench.train.sync_debug`): plain with ZClip and
  probes, skip-step (bf16), rollback's kept states with fp16 loss scaling and checkpoints,
  gradient accumulation with the sequence-length curriculum; and the run API's ``log()``
  calls that do not read back. A sync there fails the row, naming the line.
- ``speed``: real bf16 and fp16 (with loss scaling) autocast at gpt-125m, with and without
  ``torch.compile``: ms/step and tokens/s from the run's own log (the read-back intervals
  after the first), MFU against the GPU's bf16 matmul peak measured here, the compile time,
  and the peak memory beside the ``--dry-run`` estimate.
- ``overhead``: spikebench's loop against the bare loop (``benchmarks/overhead.py``'s
  measurement) at gpt-125m, fp32, uncompiled, as a ratio.
- ``ddp``: two ranks (NCCL on two GPUs, else gloo sharing one) against one process: the
  training losses over the first steps.
- ``sweep``: a short ``spikebench sweep`` of the CPU suite's scenarios on CUDA, and its
  utilisation line.
- ``bench``: ``spikebench bench --suite benchmarks/suites/gpu.toml --update-baseline``, the
  GPU suite's first baseline (the longest part by far).

Without CUDA it says so in one line and exits 2. Exit 1 when a check failed.

    .venv/bin/python benchmarks/gpu_check.py --out results/gpu-check.json
    .venv/bin/python benchmarks/gpu_check.py --parts sync,speed,ddp --out results/gpu-check.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import tomllib
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("sync", "speed", "overhead", "ddp", "sweep", "bench")
FORMAT = 1  # of the JSON
OK, FAIL, INFO = "ok", "FAIL", "measured"
# Relative difference of the training loss, two ranks against one, allowed over the first
# DDP_STEPS steps: the CPU test's 1e-5 (float rounding of a sum in another order), with room
# for GPU kernels that pick other algorithms for half the rows.
DDP_TOLERANCE, DDP_STEPS = 1e-4, 10


@dataclasses.dataclass
class Row:
    part: str
    check: str
    status: str  # ok, FAIL or measured
    value: str = ""  # what the table shows
    note: str = ""
    numbers: dict[str, Any] = dataclasses.field(default_factory=dict)  # what the JSON keeps


# --- arguments ---------------------------------------------------------------------------


def _parts(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in PARTS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: parts are a comma-separated list of {', '.join(PARTS)}")
    return [p for p in PARTS if p in names]  # in the order they run


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = low - 1
        if n < low:
            raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= {low}")
        return n
    return parse


_positive = _at_least(1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="gpu_check.py", description=__doc__.splitlines()[0],
        epilog="parts: " + ", ".join(PARTS) + " (all by default)")
    ap.add_argument("--out", default="results/gpu-check.json", help="the JSON to write")
    ap.add_argument("--parts", type=_parts, default=list(PARTS),
                    help="comma-separated parts to run (default: all)")
    ap.add_argument("--work", default="results/gpu-check",
                    help="folder for the runs, the sweep and the bench (default: %(default)s)")
    ap.add_argument("--steps", type=_positive, default=50,
                    help="steps of each gpt-125m speed run (default: %(default)s)")
    ap.add_argument("--batch", type=_positive, default=32,
                    help="gpt-125m batch size, as the GPU suite's (default: %(default)s)")
    ap.add_argument("--seq-len", type=_positive, default=256,
                    help="gpt-125m sequence length, as the GPU suite's (default: %(default)s)")
    ap.add_argument("--overhead-steps", type=_positive, default=50)
    ap.add_argument("--overhead-repeats", type=_positive, default=3)
    ap.add_argument("--sweep-steps", type=_at_least(40), default=60,
                    help="steps of each sweep run; the bad-data scenario's 20-step burst at "
                    "the middle needs 40 (default: %(default)s)")
    ap.add_argument("--sweep-seeds", type=_positive, default=3)
    ap.add_argument("--timeout", type=_positive, default=3600,
                    help="seconds each command it starts (sweep, bench, ranks) may take")
    return ap.parse_args(argv)


# --- what it writes ----------------------------------------------------------------------


def format_table(rows: list[Row]) -> str:
    from tabulate import tabulate

    return tabulate([[r.part, r.check, r.status, r.value, r.note] for r in rows],
                    headers=["part", "check", "result", "value", "note"], tablefmt="github")


def payload(rows: list[Row], *, environment: dict[str, Any], args: argparse.Namespace,
            details: dict[str, Any], started: float) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "parts": list(args.parts),
        "seconds": round(time.perf_counter() - started, 1),
        "environment": environment,
        "failed": [f"{r.part}: {r.check}" for r in rows if r.status == FAIL],
        "rows": [dataclasses.asdict(r) for r in rows],
        "details": details,
    }


def write_json(path: str | Path, obj: dict[str, Any]) -> Path:
    """Written whole or not at all; NaN and infinities as null."""
    from spikebench.runio import atomic_write_json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, obj)
    return path


# --- pure helpers (tested on the CPU) ----------------------------------------------------


def reads_back(n_logged: int, sync_every: int) -> bool:
    """Whether the ``n_logged``-th ``run.log()`` call of a run (1-based, no validation loss)
    reads back: the API flushes every ``sync_every``-th call."""
    return n_logged % sync_every == 0


def where(exc: BaseException, package: str = "spikebench") -> str:
    """The innermost frame of ``exc``'s traceback in ``package`` (else the innermost one),
    as ``path:line in function``: the line that synced."""
    def shown(filename: str) -> str:
        with contextlib.suppress(ValueError, OSError):
            return Path(filename).resolve().relative_to(ROOT).as_posix()
        return filename

    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if shown(f.filename).startswith(f"{package}/")
            or f"/site-packages/{package}/" in Path(f.filename).as_posix()]
    f = (ours or frames or [None])[-1]
    return "" if f is None else f"{shown(f.filename)}:{f.lineno} in {f.name}"


def first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def interval_speed(records: list[dict[str, Any]], tokens_per_step: int,
                   skip_first: int = 1) -> dict[str, float] | None:
    """ms/step and tokens/s from a run's log: the median of the read-back intervals'
    ``perf/tokens_per_s`` after the first ``skip_first`` (warm-up: the allocator and
    cuBLAS's first calls), one value per interval. None when no interval is left."""
    from spikebench import metrics as M

    rates, last = [], None
    for rec in records:
        rate = rec.get(M.TOKENS_PER_S)
        if rate is not None and rate != last:  # every row of an interval holds its rate
            rates.append(float(rate))
            last = rate
    rates = [r for r in rates[skip_first:] if math.isfinite(r) and r > 0]
    if not rates:
        return None
    rate = statistics.median(rates)
    return {"tokens_per_s": rate, "ms_per_step": 1e3 * tokens_per_step / rate,
            "intervals": len(rates)}


def loss_match(one: list[dict[str, Any]], two: list[dict[str, Any]], steps: int,
               tolerance: float) -> tuple[bool, float, str]:
    """Whether two runs' training losses agree over their first ``steps`` steps, to a
    relative ``tolerance``: (ok, the largest relative difference, why not)."""
    from spikebench import metrics as M

    a = {r[M.STEP]: r[M.TRAIN_LOSS] for r in one if M.TRAIN_LOSS in r and r[M.STEP] <= steps}
    b = {r[M.STEP]: r[M.TRAIN_LOSS] for r in two if M.TRAIN_LOSS in r and r[M.STEP] <= steps}
    if sorted(a) != sorted(b) or not a:
        return False, math.inf, (f"logged steps differ ({len(a)} against {len(b)} of the "
                                 f"first {steps})")
    diffs = [abs(a[s] - b[s]) / max(abs(a[s]), 1e-30) for s in a]
    if not all(math.isfinite(d) for d in diffs):  # max() would pass a NaN over
        return False, math.inf, "a non-finite loss"
    worst = max(diffs)
    ok = worst <= tolerance
    return ok, worst, "" if ok else f"relative difference {worst:.2e} > {tolerance:g}"


def utilisation_line(text: str) -> str | None:
    """The sweep's ``utilisation: ...`` line in its output (the last, if several)."""
    found = [line.strip() for line in text.splitlines() if line.strip().startswith(
        "utilisation:")]
    return found[-1] if found else None


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()
                                ) + " }"
    raise TypeError(f"no TOML for a {type(v).__name__}")


def sweep_from_suite(suite_text: str, *, name: str, seeds: int) -> str:
    """A sweep file of a bench suite's scenarios: its tables but ``[bench]``, under study
    ``name``, with its first ``seeds`` seeds."""
    raw = tomllib.loads(suite_text)
    raw.pop("bench", None)
    study = raw.setdefault("study", {})
    study["name"] = name
    study["seeds"] = list(study.get("seeds", [0]))[:seeds]
    lines = ["# Written by benchmarks/gpu_check.py from a bench suite (its [bench] left out)."]
    for table, body in raw.items():
        lines.append(f"\n[{table}]")
        for k, v in body.items():
            lines.append(f"{json.dumps(k)} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"


def mfu(flops_per_step: float, ms_per_step: float, peak_flops: float) -> float:
    return flops_per_step / (ms_per_step / 1e3) / peak_flops


# --- the parts (CUDA) --------------------------------------------------------------------


def matmul_peak(dtype_name: str = "bf16", n: int = 8192, reps: int = 20,
                rounds: int = 5) -> float:
    """FLOP/s of an n x n matmul in ``dtype_name`` on the GPU, the best of ``rounds``."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        torch.cuda.synchronize()
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - t0))
    return best


def environment() -> dict[str, Any]:
    import torch

    from spikebench.runio import environment as env

    out = env(torch.device("cuda"))
    out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    try:
        from torch.utils._triton import has_triton

        out["triton"] = has_triton()
    except ImportError:
        out["triton"] = None
    return out


def _rows_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


SMALL = ["model.preset=gpt-tiny", "train.device=cuda", "train.progress=false",
         "train.compile=false", "train.steps=60", "train.log_every=10", "train.eval_every=30",
         "train.eval_batches=2"]
SYNC_RUNS = {
    "loop + ZClip + probes (fp32)": ["optim.clip_mode=zclip", "optim.clip=1.0",
                                     "optim.zclip_warmup=10", "train.probe_every=5"],
    "skip-step (bf16)": ["response.kind=skip_step", "response.skip_window=20",
                         "precision.mode=bf16"],
    "rollback's kept states + fp16 scaling + checkpoints": [
        "response.kind=rollback", "response.every=5", "precision.mode=fp16",
        "train.checkpoint_every=20"],
    "grad accumulation + seq-len curriculum": ["optim.grad_accum=2", "curriculum.kind=seqlen"],
}


def part_sync(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    from spikebench import config as cfgmod
    from spikebench.train.loop import train
    from spikebench.train.sync_debug import ENV

    rows, details = [], {}
    for name, sets in SYNC_RUNS.items():
        cfg = cfgmod.load(None, [*SMALL, *sets, f"run.out_dir={work / 'sync'}"])
        try:
            with _env(**{ENV: "error"}):
                summary = train(cfg)
        except Exception as e:  # noqa: BLE001 - a sync raises RuntimeError; any failure is a row
            at = where(e)
            rows.append(Row("sync", name, FAIL, "synced", f"{first_line(e)} at {at}"))
            details[name] = {"ok": False, "error": first_line(e), "where": at}
            continue
        rows.append(Row("sync", name, OK, f"{summary['steps']} steps", "no sync between "
                        "read-backs", {"steps": summary["steps"]}))
        details[name] = {"ok": True, "steps": summary["steps"], "status": summary["status"]}
    rows.append(_api_sync(work))
    details["run API log()"] = rows[-1].numbers
    return rows, details


def _api_sync(work: Path, steps: int = 40, sync_every: int = 10) -> Row:
    """A hand-written loop logging to ``spikebench.init()``: the log() calls that do not
    read back run with the guard armed (the loop itself is the team's, not checked)."""
    import torch

    import spikebench
    from spikebench import config as cfgmod
    from spikebench.model import build_model
    from spikebench.train.optim import make_optimizer
    from spikebench.train.sync_debug import SyncDebug

    cfg = cfgmod.load(None, SMALL)
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = build_model(cfg.model).to(device)
    opt = make_optimizer(model, cfg)
    guard = SyncDebug("error")
    B, T = cfg.data.batch_size, cfg.data.seq_len
    run = spikebench.init(run_dir=work / "sync" / f"api-{os.getpid()}-{time.time_ns()}",
                          sync_every=sync_every, device=device)
    try:
        for step in range(1, steps + 1):
            x = torch.randint(0, cfg.model.vocab_size, (B, T + 1), device=device)
            _, loss = model(x[:, :-1], x[:, 1:])
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf, foreach=True)
            opt.step()
            opt.zero_grad(set_to_none=True)
            with guard.lifted() if reads_back(step, sync_every) else guard.armed_for():
                run.log(step, loss=loss.detach(), grad_norm=norm, lr=cfg.optim.lr)
        run.finish()
    except Exception as e:  # noqa: BLE001
        guard.disarm()
        at = where(e)
        return Row("sync", "run API log()", FAIL, "synced", f"{first_line(e)} at {at}",
                   {"ok": False, "error": first_line(e), "where": at})
    return Row("sync", "run API log()", OK, f"{steps} calls",
               f"{steps - steps // sync_every} calls armed; read back every {sync_every}",
               {"ok": True, "calls": steps, "sync_every": sync_every})


def _speed_config(args, work: Path, mode: str, compiled: bool, steps: int, name: str):
    from spikebench import config as cfgmod

    return cfgmod.load(None, [f"run.name={name}",
        "model.preset=gpt-125m", "train.device=cuda", "train.progress=false",
        f"data.batch_size={args.batch}", f"data.seq_len={args.seq_len}",
        f"train.steps={steps}", f"train.eval_every={steps}", "train.eval_batches=1",
        "train.log_every=10", f"precision.mode={mode}", "precision.impl=real",
        f"train.compile={'true' if compiled else 'false'}", f"run.out_dir={work / 'speed'}"])


def part_speed(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    import torch

    from spikebench.bench.perf import model_flops_per_step
    from spikebench.train.loop import train
    from spikebench.train.setup import memory_estimate

    peak = matmul_peak("bf16")
    rows = [Row("speed", "bf16 matmul peak (8192^3)", INFO, f"{peak / 1e12:.0f} TFLOP/s",
                "the MFU's denominator", {"bf16_matmul_flops": peak})]
    details: dict[str, Any] = {"bf16_matmul_flops": peak, "runs": {}}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for mode in ("bf16", "fp16"):
        for compiled in (False, True):
            label = f"gpt-125m {mode}{' +scaling' if mode == 'fp16' else ''}, " + (
                "compiled" if compiled else "eager")
            name = f"{stamp}-{mode}-{'compiled' if compiled else 'eager'}"
            cfg = _speed_config(args, work, mode, compiled, args.steps, name)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            try:
                summary = train(cfg)
            except Exception as e:  # noqa: BLE001
                rows.append(Row("speed", label, FAIL, "", f"{first_line(e)} at {where(e)}"))
                continue
            peak_mem = torch.cuda.max_memory_allocated()
            run_dir = Path(cfg.run.out_dir) / cfg.run.name
            tokens = cfg.data.batch_size * cfg.data.seq_len
            speed = interval_speed(_rows_of(run_dir), tokens)
            meta = json.loads((run_dir / "meta.json").read_text())
            n_params = meta["n_params"]
            estimate = sum(memory_estimate(cfg, n_params, torch.device("cuda")).values())
            numbers = {"status": summary["status"], "steps": summary["steps"],
                       "compile_s": summary.get("compile_s"), "peak_memory_bytes": peak_mem,
                       "memory_estimate_bytes": estimate, "final_loss": _last_loss(run_dir),
                       "precision": summary["precision"], "compile": meta.get("compile")}
            if speed is None:
                rows.append(Row("speed", label, FAIL, "", "no read-back interval to time",
                                numbers))
                continue
            numbers.update(speed, mfu=mfu(model_flops_per_step(cfg, n_params),
                                          speed["ms_per_step"], peak))
            compile_note = (f", compile {summary['compile_s']:.0f} s (off the clock)"
                            if compiled and summary.get("compile_s") is not None else "")
            rows.append(Row(
                "speed", label, INFO if summary["status"] == "completed" else FAIL,
                f"{speed['ms_per_step']:.1f} ms/step, {speed['tokens_per_s'] / 1e3:.0f}k tok/s, "
                f"MFU {numbers['mfu']:.1%}",
                f"peak memory {peak_mem / 1e9:.1f} GB (estimate {estimate / 1e9:.1f} GB)"
                + compile_note, numbers))
            details["runs"][label] = numbers
    return rows, details


def _last_loss(run_dir: Path) -> float | None:
    from spikebench import metrics as M

    losses = [r[M.TRAIN_LOSS] for r in _rows_of(run_dir) if M.TRAIN_LOSS in r]
    return losses[-1] if losses else None


def part_overhead(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    from spikebench import config as cfgmod
    from spikebench.bench.perf import overhead

    cfg = cfgmod.load(None, [
        "model.preset=gpt-125m", "train.device=cuda", "train.progress=false",
        "train.compile=false", f"data.batch_size={args.batch}", f"data.seq_len={args.seq_len}",
        f"train.steps={args.overhead_steps}", f"train.eval_every={args.overhead_steps}",
        "train.eval_batches=1"])
    out = overhead(cfg, args.overhead_repeats)
    return [Row("overhead", "spikebench / bare loop (gpt-125m, fp32, eager)", INFO,
                f"{out['overhead_ratio']:.3f}",
                f"median of {args.overhead_repeats} pairs of {args.overhead_steps} steps; bare "
                f"{out['bare_s_per_step'] * 1e3:.1f} ms/step, spikebench "
                f"{out['s_per_step'] * 1e3:.1f}", out)], out


def _spikebench(argv: list[str], *, timeout: int, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spikebench", *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def part_ddp(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    import torch

    two_gpus = torch.cuda.device_count() >= 2
    backend = "nccl" if two_gpus else "gloo"
    sets = [*SMALL, "train.steps=20", "train.log_every=1", "train.eval_every=20",
            f"run.out_dir={work / 'ddp'}"]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs = {}
    for name, extra, env in (("one", [], {}), ("two", ["train.nproc=2"], (
            {} if two_gpus else {"SPIKEBENCH_DIST_BACKEND": "gloo"}))):
        run_name = f"{stamp}-{name}"
        proc = _spikebench(["train", *[a for s in [*sets, *extra, f"run.name={run_name}"]
                                       for a in ("--set", s)]], timeout=args.timeout, env=env)
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or [""])[-1][:300]
            return [Row("ddp", f"2 ranks over {backend}", FAIL, "",
                        f"the {name}-process run failed (exit {proc.returncode}): {err}")], {}
        runs[name] = _rows_of(work / "ddp" / run_name)
    ok, worst, why = loss_match(runs["one"], runs["two"], DDP_STEPS, DDP_TOLERANCE)
    where_ = "two GPUs" if two_gpus else "one GPU shared"
    numbers = {"backend": backend, "gpus": torch.cuda.device_count(),
               "max_relative_difference": worst, "steps": DDP_STEPS,
               "tolerance": DDP_TOLERANCE}
    return [Row("ddp", f"2 ranks over {backend} ({where_}) vs 1 process", OK if ok else FAIL,
                f"max rel. diff {worst:.1e}",
                why or f"training loss, first {DDP_STEPS} steps, within {DDP_TOLERANCE:g}",
                numbers)], numbers


def part_sweep(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    suite = ROOT / "benchmarks" / "suites" / "cpu.toml"
    sweep = work / "sweep" / "cpu-suite-on-cuda.toml"
    sweep.parent.mkdir(parents=True, exist_ok=True)
    name = f"gpu-check-sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    sweep.write_text(sweep_from_suite(suite.read_text(), name=name, seeds=args.sweep_seeds))
    t0 = time.perf_counter()
    proc = _spikebench(["sweep", str(sweep), "--results", str(work / "sweep"),
                        "--set", "train.device=cuda", "--set", f"train.steps={args.sweep_steps}"],
                       timeout=args.timeout)
    wall = time.perf_counter() - t0
    line = utilisation_line(proc.stderr + proc.stdout)
    numbers = {"exit": proc.returncode, "wall_s": wall, "utilisation": line,
               "steps": args.sweep_steps, "seeds": args.sweep_seeds,
               "results": str(work / "sweep" / name)}
    if proc.returncode != 0 or line is None:
        err = (proc.stderr.strip().splitlines() or [""])[-1][:300]
        return [Row("sweep", "CPU suite's scenarios on CUDA", FAIL, "",
                    f"exit {proc.returncode}: {err}", numbers)], numbers
    share = re.search(r"utilisation: ([\d.]+)%", line)
    return [Row("sweep", "CPU suite's scenarios on CUDA", INFO,
                f"{share.group(1)}% utilisation" if share else line,
                f"{args.sweep_seeds} seeds x {args.sweep_steps} steps, {wall:.0f} s wall",
                numbers)], numbers


def part_bench(args: argparse.Namespace, work: Path) -> tuple[list[Row], dict]:
    suite = ROOT / "benchmarks" / "suites" / "gpu.toml"
    t0 = time.perf_counter()
    proc = _spikebench(["bench", "--suite", str(suite), "--update-baseline", "--results",
                        str(work / "bench")], timeout=args.timeout)
    wall = time.perf_counter() - t0
    baseline = ROOT / "benchmarks" / "baselines" / "gpu.json"
    numbers = {"exit": proc.returncode, "wall_s": wall, "baseline": str(baseline),
               "tail": proc.stdout.strip().splitlines()[-20:]}
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or [""])[-1][:300]
        return [Row("bench", "GPU suite baseline", FAIL, "", f"exit {proc.returncode}: {err}",
                    numbers)], numbers
    return [Row("bench", "GPU suite baseline", OK, f"{wall / 60:.0f} min",
                f"written to {baseline.relative_to(ROOT)} (commit it)", numbers)], numbers


RUNNERS: dict[str, Callable[[argparse.Namespace, Path], tuple[list[Row], dict]]] = {
    "sync": part_sync, "speed": part_speed, "overhead": part_overhead, "ddp": part_ddp,
    "sweep": part_sweep, "bench": part_bench}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device here (torch {torch.__version__}); this check runs "
              "on a machine with an NVIDIA GPU", file=sys.stderr)
        return 2
    started = time.perf_counter()
    work = Path(args.work).resolve()  # the commands it starts run in the repository
    work.mkdir(parents=True, exist_ok=True)
    env = environment()
    rows: list[Row] = []
    details: dict[str, Any] = {}
    for part in args.parts:
        print(f"gpu_check: {part} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            got, details[part] = RUNNERS[part](args, work)
        except subprocess.TimeoutExpired as e:
            got = [Row(part, "(the part)", FAIL, "", f"timed out after {e.timeout} s")]
        except Exception as e:  # noqa: BLE001 - one broken part must not lose the others
            got = [Row(part, "(the part)", FAIL, "", f"{first_line(e)} at {where(e)}")]
            details[part] = {"error": first_line(e), "traceback": traceback.format_exc()}
        finally:
            with contextlib.suppress(Exception):  # a sync error must not outlive its part
                torch.cuda.set_sync_debug_mode("default")
        rows.extend(got)
        print(f"gpu_check: {part} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)
        # Written after every part: a part that hangs or a session that ends keeps the rest.
        write_json(args.out, payload(rows, environment=env, args=args, details=details,
                                     started=started))
    print(format_table(rows))
    print(f"\nwritten: {args.out}")
    return 1 if any(r.status == FAIL for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
