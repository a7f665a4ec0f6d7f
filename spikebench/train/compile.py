"""``train.compile``: ``torch.compile`` of the model the training step runs, and its clock.

The training step's module is compiled (around DDP when data-parallel, as PyTorch
recommends); evaluation, probes' reads and checkpoints use the uncompiled module, whose
parameters the compiled one shares. So a checkpoint holds the plain module's state (no
``_orig_mod.`` prefixes) and a compiled run resumes uncompiled and back.

``"auto"`` turns it on on CUDA where torch can compile there (Triton installed) and leaves
it off on the CPU. The backend is inductor (torch's default) unless
``SPIKEBENCH_COMPILE_BACKEND`` names another (``aot_eager``: the same graphs run by eager
kernels, what the CPU tests use, since inductor needs minutes of C++ compiling there).

The first step compiles, and so does the first step of any other kind (the first probe
step, a new sequence length): :class:`CompileClock` takes the steps in which a graph was
compiled off the training clock, whole, as evaluation is, and adds them up as the
summary's ``compile_s``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from spikebench.errors import UserError

BACKEND_ENV = "SPIKEBENCH_COMPILE_BACKEND"
DEFAULT_BACKEND = "inductor"
# Backends torch registers for debugging, which list_backends() leaves out by default.
_DEBUG_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition")


@dataclass(frozen=True)
class CompileChoice:
    enabled: bool
    backend: str
    why: str = ""  # how "auto" decided ("" when set explicitly)

    def meta(self) -> dict:
        out: dict = {"enabled": self.enabled}
        if self.enabled:
            out["backend"] = self.backend
        if self.why:
            out["why"] = self.why
        return out


def backend() -> str:
    return os.environ.get(BACKEND_ENV, "").strip() or DEFAULT_BACKEND


def missing(device: torch.device, name: str) -> str:
    """What ``torch.compile`` with backend ``name`` lacks on ``device`` ("" if nothing)."""
    if name not in _DEBUG_BACKENDS:
        import torch._dynamo

        known = torch._dynamo.list_backends(exclude_tags=())
        if name not in known:
            return (f"{BACKEND_ENV}={name!r} is not a torch.compile backend (this torch has "
                    f"{', '.join(sorted(known))})")
    if name != "inductor":
        return ""
    if device.type == "cuda":
        try:
            from torch.utils._triton import has_triton
        except ImportError:  # a torch without the check: let compile say it
            return ""
        return "" if has_triton() else "Triton is not installed (inductor needs it on CUDA)"
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
    except ImportError:
        return ""
    except Exception:  # noqa: BLE001 - torch's own error for a missing compiler
        return ("no C++ compiler found (inductor needs one on the CPU: g++ or clang++, or "
                "CXX naming one)")
    return ""


def choose(setting: bool | str, device: torch.device) -> CompileChoice:
    """Whether this run compiles its training step, and with which backend. ``true`` where
    torch cannot compile is refused in one line; ``"auto"`` then stays off and says why."""
    name = backend()
    if setting is False:
        return CompileChoice(False, name)
    if setting == "auto" and device.type != "cuda":
        return CompileChoice(False, name, "auto: off on the CPU")
    problem = missing(device, name)
    if setting == "auto":
        if problem:
            return CompileChoice(False, name, f"auto: off, {problem}")
        return CompileChoice(True, name, "auto: on on CUDA")
    if problem:
        raise UserError(f"train.compile = true: {problem}; set train.compile = false")
    return CompileChoice(True, name)


def compile_model(module: torch.nn.Module, choice: CompileChoice) -> torch.nn.Module:
    """``torch.compile(module)``. Dynamo's caches are reset first, so the run compiles its
    own graphs (its ``compile_s`` is its own) and a process that trains many runs (a
    sweep's warm trial process) never reaches torch's recompile limit, past which it would
    run eagerly without a word."""
    import torch._dynamo

    torch._dynamo.reset()
    try:
        return torch.compile(module, backend=choice.backend)
    except RuntimeError as e:  # e.g. a Python version dynamo does not support
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise UserError(f"train.compile = true: torch.compile refuses ({first}); set "
                        "train.compile = false") from None


def _graphs() -> int | None:
    """Graphs dynamo has compiled in this process (None if this torch does not say)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - a private counter: absent, the first step counts
        return None


class CompileClock:
    """Seconds of the steps that compiled. ``begin()`` before a step, ``end()`` after it
    returns the seconds to take off the training clock: the whole step if dynamo compiled
    a graph in it (without a graph counter: the first step), else 0. Host time only, no
    device sync: on CUDA the kernels a compiling step queued run on in the next steps'
    time, as any step's do."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.steps = 0  # steps that compiled
        self._before: int | None = None
        self._t0 = 0.0
        self._first = True

    def begin(self) -> None:
        self._before = _graphs()
        self._t0 = time.perf_counter()

    def end(self) -> float:
        took = time.perf_counter() - self._t0
        after = _graphs()
        compiled = self._first if after is None or self._before is None else (
            after != self._before)
        self._first = False
        if not compiled:
            return 0.0
        self.seconds += took
        self.steps += 1
        return took
