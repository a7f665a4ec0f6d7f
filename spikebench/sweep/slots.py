"""Worker slots: where a sweep's trials run on this machine (one per GPU, else cores split)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class Slot:
    """Where one trial runs: environment for its process and its torch thread count."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    threads: int = 1


def make_slots(jobs: int | None) -> list[Slot]:
    """The worker slots on this machine (see :func:`plan_slots`)."""
    import torch

    gpus: list[str] = []
    if torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = visible.split(",") if visible else [str(i) for i in range(
            torch.cuda.device_count())]
    return plan_slots(jobs, os.cpu_count() or 1, gpus)


def plan_slots(jobs: int | None, cores: int, gpus: list[str]) -> list[Slot]:
    """One slot per GPU id in ``gpus`` (when ``jobs`` is None), pinned to it with
    ``CUDA_VISIBLE_DEVICES``; else ``jobs`` CPU workers (None: one per core) with the
    cores split between them so they do not oversubscribe. Every slot gets >= 1 thread."""
    if gpus and jobs is None:
        per = max(1, cores // len(gpus))
        return [Slot(f"cuda:{i}", {"CUDA_VISIBLE_DEVICES": i}, per) for i in gpus]
    n = jobs or cores
    per = max(1, cores // n)
    return [Slot(f"cpu{i}", {"CUDA_VISIBLE_DEVICES": ""}, per) for i in range(n)]

