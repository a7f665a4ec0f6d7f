"""``precision.impl = "auto"`` on CPU: real autocast where it is native and faster.

CPUs of one kind differ. Some compute bf16 (AMX, AVX512-BF16) or fp16 (AMX-FP16,
AVX512-FP16) natively, and there real autocast can beat the emulation. Others have no such
unit, and there real half matmuls run many times slower than fp32. So ``auto`` checks the
CPU's flags first. Where the unit is there, it times one training step of a small GPT under
real autocast and under the emulation, once per machine, CPU model, torch, thread count and
format. The ratio is cached in ``$SPIKEBENCH_CACHE/precision.json`` (default
``~/.cache/spikebench``), and real autocast is used where it was faster.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from spikebench.runio import atomic_write_json, cpu_model

NATIVE_FLAGS = {"bf16": ("amx_bf16", "avx512_bf16"), "fp16": ("amx_fp16", "avx512_fp16")}


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def half_format(mode: str) -> str:
    return "bf16" if mode == "bf16" else "fp16"


def cache_path() -> Path:
    root = os.environ.get("SPIKEBENCH_CACHE")
    if not root:
        try:
            root = Path.home() / ".cache" / "spikebench"
        except RuntimeError:  # no home directory: the temp folder will do
            root = Path(tempfile.gettempdir()) / "spikebench-cache"
    return Path(root) / "precision.json"


def choose(mode: str, flags: set[str] | None = None) -> tuple[str, str]:
    """The impl ``auto`` runs on this CPU for half ``mode`` ("real" or "emulated"), and
    why, in a few words for the run's meta."""
    fmt = half_format(mode)
    flags = cpu_flags() if flags is None else flags
    if not flags & set(NATIVE_FLAGS[fmt]):
        return "emulated", f"no native {fmt} on this CPU ({' or '.join(NATIVE_FLAGS[fmt])})"
    threads = torch.get_num_threads()
    key = f"{cpu_model()} | torch {torch.__version__} | {threads} threads | {fmt}"
    path = cache_path()
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    ratio = cached.get(key) if isinstance(cached, dict) else None
    if not isinstance(ratio, int | float):
        ratio = measure(fmt)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {**(cached if isinstance(cached, dict) else {}),
                                     key: ratio})
        except OSError:
            pass  # an unwritable cache: measure again next time
    impl = "real" if ratio < 1.0 else "emulated"
    return impl, (f"native {fmt}; real autocast step / emulated step = {ratio:.2f} "
                  f"({threads} threads, measured once, cached in {path})")


def measure(fmt: str, steps: int = 3) -> float:
    """Real autocast's median step time over the emulation's, gpt-tiny on one batch."""
    from spikebench import config as cfgmod
    from spikebench.emulation import EmulatedAutocast
    from spikebench.model import build_model

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[fmt]
    cfg = cfgmod.load(None, ["model.preset=gpt-tiny"])
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        model = build_model(cfg.model)
        x = torch.randint(0, cfg.model.vocab_size, (cfg.data.batch_size, cfg.data.seq_len))
    finally:
        torch.random.set_rng_state(state)  # a run's own random streams are untouched

    def step_times(context) -> list[float]:
        times = []
        for _ in range(steps + 1):  # the first is a warm-up
            start = time.perf_counter()
            with context():
                _, loss = model(x, x)
            loss.backward()
            model.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - start)
        return times[1:]

    real = step_times(lambda: torch.autocast("cpu", dtype=dtype))
    emulated = step_times(lambda: EmulatedAutocast(dtype))
    return statistics.median(real) / statistics.median(emulated)
