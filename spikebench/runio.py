"""Run folders: atomic file writes and the metadata every run records."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from spikebench.config import REPO_ROOT, Config
from spikebench.values import json_safe


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def to_json(obj: Any) -> str:
    """JSON with non-finite floats written as null (JSON has no NaN or Infinity)."""
    return json.dumps(json_safe(obj), indent=2, allow_nan=False)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, to_json(obj) + "\n")


def git_hash() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=5,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


# The vector-unit flags that change which kernels torch picks, hence its float results.
_KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16",
                 "amx_tile", "fma")


def cpu_model() -> str:
    """The CPU's model name and its kernel-relevant flags (/proc/cpuinfo on Linux): float
    results, and so chaotic runs, differ between CPU models, and virtual machines often
    report a generic name, so a determinism check compares both."""
    name, flags = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not name:
                    name = value.strip()
                elif key.strip() == "flags" and not flags:
                    have = set(value.split())
                    flags = " ".join(x for x in _KERNEL_FLAGS if x in have)
    except OSError:
        pass
    name = name or platform.processor() or platform.machine()
    return f"{name} [{flags}]" if flags else name


def memory(device: Any) -> dict[str, int]:
    """The process's resident memory and, on CUDA, the caching allocator's counters. All
    host-side reads (no device sync); the loop takes them once per read-back."""
    from spikebench import metrics as M

    out: dict[str, int] = {}
    try:
        with open("/proc/self/statm") as f:
            out[M.MEM_RSS] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass  # not Linux: no RSS, nothing else lost
    if getattr(device, "type", None) == "cuda":
        import torch

        out[M.CUDA_ALLOCATED] = int(torch.cuda.memory_allocated(device))
        out[M.CUDA_RESERVED] = int(torch.cuda.memory_reserved(device))
    return out


def environment(device: Any) -> dict[str, Any]:
    import torch

    env = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "git": git_hash(),
    }
    if getattr(device, "type", None) == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    return env


def new_run_dir(cfg: Config) -> Path:
    """``run.out_dir/<run.name or time-preset-seed>``, suffixed ``-2``, ``-3``... if taken;
    made here, so that two runs started in the same second never share a folder (mkdir is
    the claim: an exists() check then a later mkdir let both take one name)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = cfg.run.name or f"{stamp}-{cfg.model.preset}-s{cfg.train.seed}"
    Path(cfg.run.out_dir).mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        path = Path(cfg.run.out_dir) / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1


def parent_pid() -> int:
    """The process this one must not outlive: ``SPIKEBENCH_PARENT_PID`` where the starter
    set it (a sweep's driver, spikebench's launcher), else the parent."""
    return int(os.environ.get("SPIKEBENCH_PARENT_PID", os.getppid()))


def kill_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (even by kill -9; a no-op
    elsewhere). Safe in a ``preexec_fn``: a child process asks it for itself."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def die_with_parent() -> bool:
    """:func:`kill_with_parent`; False when :func:`parent_pid` is gone already, before that
    took effect."""
    parent = parent_pid()
    kill_with_parent()
    return os.getppid() == parent
