"""Data parallelism (DDP): which rank this process is, its share of a batch, the reductions.

A run is data-parallel when torchrun started it (``WORLD_SIZE`` > 1): gloo on CPU, nccl on
GPU (NCCL's ring all-reduce). Every rank draws the same global batch from the stream and
trains its own contiguous block of rows, so the global batch, and the data two paired runs
see, are those of a single-process run. DDP averages the gradients, so every rank holds the
same gradients, grad norm and update. The loss is averaged once per step with an
all-reduce that stays on the device (no host sync on GPU); metrics, spike detection,
checkpoints and files are rank 0's, and a rollback rank 0 decides is broadcast to all.

A single-process run uses :data:`SINGLE`, whose methods do nothing.

``SPIKEBENCH_DIST_BACKEND=gloo`` runs CUDA ranks over gloo instead, and lets ranks share
the visible GPUs (NCCL refuses two ranks on one GPU): how ``benchmarks/gpu_check.py``
checks a two-rank run on a machine with one GPU.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as tdist

from spikebench.errors import UserError

BACKEND_ENV = "SPIKEBENCH_DIST_BACKEND"


def backend(device: torch.device) -> str:
    """The process group's backend: nccl on CUDA, gloo on the CPU, unless
    ``SPIKEBENCH_DIST_BACKEND`` says otherwise (gloo on CUDA; nccl only on CUDA)."""
    chosen = os.environ.get(BACKEND_ENV, "").strip()
    if chosen not in ("", "gloo", "nccl"):
        raise UserError(f"{BACKEND_ENV}={chosen!r}: must be gloo or nccl (or unset)")
    if chosen == "nccl" and device.type != "cuda":
        raise UserError(f"{BACKEND_ENV}=nccl: NCCL needs CUDA devices; this run is on "
                        f"{device.type}")
    return chosen or ("nccl" if device.type == "cuda" else "gloo")


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: the one that logs, detects, checkpoints and writes files."""
        return self.rank == 0

    def shard(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's block of rows of a global batch (the world size divides it)."""
        if self.world == 1:
            return x
        rows = x.shape[0] // self.world
        return x[self.rank * rows:(self.rank + 1) * rows]

    def mean_(self, t: torch.Tensor) -> torch.Tensor:
        """Average ``t`` over the ranks, in place (equal shares: the global mean)."""
        if self.world > 1:
            tdist.all_reduce(t)  # SUM: gloo has no AVG
            t.div_(self.world)
        return t

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (a decision, a run folder)."""
        if self.world == 1:
            return obj
        box = [obj]
        tdist.broadcast_object_list(box, src=0)
        return box[0]

    def check_in_sync(self, params: list[torch.Tensor]) -> None:
        """Every rank must hold the same weights (a decision one rank made alone would part
        them): compare a checksum of them across the ranks, once, at the end of a run."""
        if self.world == 1:
            return
        flat = torch.cat([p.detach().reshape(-1).double() for p in params])
        mine = torch.stack([flat.sum(), (flat * flat).sum(), flat.abs().max()])
        every = [torch.empty_like(mine) for _ in range(self.world)]
        tdist.all_gather(every, mine)
        differ = [r for r, other in enumerate(every) if not torch.equal(other, every[0])]
        if differ:
            raise RuntimeError(f"data-parallel ranks {differ} hold other weights than rank 0 "
                               "at the end of the run: the ranks fell out of step")

    def device(self, device: torch.device) -> torch.device:
        """On CUDA, each rank its own GPU of those visible: cuda:LOCAL_RANK (over gloo,
        ranks past the GPUs share them: LOCAL_RANK modulo their count)."""
        if self.world == 1 or device.type != "cuda":
            return device
        count = torch.cuda.device_count()
        if self.local_rank >= count and not (backend(device) == "gloo" and count):
            raise UserError(f"train.nproc = {self.world}: rank {self.rank} needs GPU "
                            f"{self.local_rank}, this machine shows "
                            f"{torch.cuda.device_count()}")
        device = torch.device("cuda", self.local_rank % count)
        torch.cuda.set_device(device)
        return device

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """The module the step runs: DDP around ``model`` when data-parallel."""
        if self.world == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)


SINGLE = Dist()


def from_env() -> Dist:
    """The rank torchrun gave this process (:data:`SINGLE` when it did not start it)."""
    env = os.environ
    world = int(env.get("WORLD_SIZE", "1"))
    if world == 1:
        return SINGLE
    return Dist(int(env["RANK"]), world, int(env.get("LOCAL_RANK", "0")),
                int(env.get("LOCAL_WORLD_SIZE", str(world))))


def setup(device: torch.device, timeout_s: float) -> tuple[Dist, torch.device]:
    """Join the process group torchrun set up (once per process: later runs reuse it);
    returns this rank and its device."""
    d = from_env()
    device = d.device(device)
    if d.world > 1 and not tdist.is_initialized():
        tdist.init_process_group(backend(device),
                                 timeout=datetime.timedelta(seconds=timeout_s))
    return d, device


def teardown() -> None:
    """Leave the process group (at the end of the process, after its last run)."""
    if tdist.is_available() and tdist.is_initialized():
        tdist.destroy_process_group()
