"""Worker slots: where a sweep's trials run on this machine (N GPUs each, else cores split).

A data-parallel trial (``train.nproc`` = N) takes N GPUs, or on CPU N processes sharing its
slot's cores."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from spikebench.errors import UserError


@dataclass
class Slot:
    """Where one trial runs: environment for its process and its torch thread count (all
    its ranks together)."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    threads: int = 1

    @property
    def gpu(self) -> bool:
        return self.name.startswith("cuda:")  # as plan_slots names a slot of GPUs


def visible_gpus() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible.split(",") if visible else [str(i) for i in range(torch.cuda.device_count())]


def make_slots(jobs: int | None, nproc: int = 1) -> list[Slot]:
    """The worker slots on this machine (see :func:`plan_slots`)."""
    return plan_slots(jobs, os.cpu_count() or 1, visible_gpus(), nproc)


def worker_slot(nproc: int = 1) -> Slot:
    """A PostgreSQL worker's one slot: its first ``nproc`` GPUs, else every core."""
    gpus = visible_gpus()
    return plan_slots(None if gpus else 1, os.cpu_count() or 1, gpus[:nproc], nproc)[0]


def plan_slots(jobs: int | None, cores: int, gpus: list[str], nproc: int = 1) -> list[Slot]:
    """One slot per ``nproc`` GPU ids of ``gpus`` (when ``jobs`` is None), pinned to them
    with ``CUDA_VISIBLE_DEVICES``; else ``jobs`` CPU workers (None: one per ``nproc``
    cores) with the cores split between them so they do not oversubscribe. Every slot gets
    >= 1 thread."""
    if gpus and jobs is None:
        if len(gpus) < nproc:
            raise UserError(f"train.nproc = {nproc}: a trial needs {nproc} GPUs, this "
                            f"machine shows {len(gpus)}")
        groups = [gpus[i:i + nproc] for i in range(0, len(gpus) - nproc + 1, nproc)]
        per = max(1, cores // len(groups))
        return [Slot(f"cuda:{','.join(g)}", {"CUDA_VISIBLE_DEVICES": ",".join(g)}, per)
                for g in groups]
    n = jobs or max(1, cores // nproc)
    per = max(1, cores // n)
    return [Slot(f"cpu{i}", {"CUDA_VISIBLE_DEVICES": ""}, per) for i in range(n)]
