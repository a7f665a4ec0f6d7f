"""What a run resolves before it trains: the device, and the checks a dry run makes."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

import torch

from spikebench.config import Config, value_at
from spikebench.errors import UserError
from spikebench.model import model_class
from spikebench.precision import Precision, make_precision
from spikebench.study import layout as L
from spikebench.train import checkpoint
from spikebench.train.dist import Dist
from spikebench.train.state import usable

DEVICES = "auto, cpu, cuda or cuda:N"


def resolve_device(name: str) -> torch.device:
    """The device to train on; only CPU and CUDA are supported (other torch device types
    parse, but the loop's fused optimizer and metrics do not run there)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise UserError(f"train.device = {name!r}: must be {DEVICES}") from None
    if device.type not in ("cpu", "cuda"):
        raise UserError(f"train.device = {name!r}: must be {DEVICES}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"train.device = {name!r}: CUDA is not available on this machine")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise UserError(f"train.device = {name!r}: this machine has "
                        f"{torch.cuda.device_count()} CUDA device(s)")
    return device


def _path_exists(key: str, value: str) -> bool:
    try:
        return Path(value).expanduser().exists()
    except (OSError, ValueError) as e:  # a name too long for the file system
        why = getattr(e, "strerror", None) or str(e)
        raise UserError(f"{key} = {value[:60]!r}...: not a usable path ({why})") from None


def preflight(cfg: Config, run_dir: str | Path | None = None) -> int:
    """The cheap checks a run makes before it reads data: the device exists, the model is
    built from its config and runs one forward (on the meta device: no memory), the corpus
    and output paths are usable, the run folder's name fits the file system, the memory
    the run needs at least is there, and ``train.compile = true`` can compile here.
    ``run_dir``: the run folder a caller chose (else an automatic one under
    ``run.out_dir``). Raises UserError (one line); returns the model's parameter count."""
    from spikebench.train.compile import choose

    device = resolve_device(cfg.train.device)
    choose(cfg.train.compile, device)
    if cfg.model.cls == BUILTIN:  # even on the meta device, 10^8 blocks would never build
        check_memory(cfg, device, gpt_params(cfg))
    model = build_model_meta(cfg.model, seq_len=cfg.data.seq_len)
    for key, value in (("data.corpus", cfg.data.corpus),
                       ("faults.domain_corpus", cfg.faults.domain_corpus)):
        if value and value != "stdlib" and not _path_exists(key, value):
            raise UserError(f"{key} = {value!r}: no such file or folder")
    out = Path(cfg.run.out_dir)
    _path_exists("run.out_dir", cfg.run.out_dir)
    for parent in (out, *out.parents):
        if parent.exists() and not parent.is_dir():
            raise UserError(f"run.out_dir = {cfg.run.out_dir!r}: {str(parent)!r} is a file, "
                            "not a folder")
    if cfg.run.name:
        _path_exists("run.name", str(out / cfg.run.name))
    _check_names(cfg, run_dir)
    n_params = sum(p.numel() for p in model.parameters())
    check_memory(cfg, device, n_params)
    _check_optimizer(model, cfg)
    return n_params


def _check_optimizer(model: torch.nn.Module, cfg: Config) -> None:
    """The optimizer the run builds, built over the meta model (not fused: that is the only
    difference), so a model it would refuse is refused before any data is read."""
    from spikebench.train.optim import param_groups

    groups = param_groups(model, cfg)
    if not any(g["params"] for g in groups):
        raise UserError(f"model.cls = {cfg.model.cls!r}: the model has no trainable parameters")
    try:
        torch.optim.AdamW(groups, lr=cfg.optim.lr)
    except (ValueError, RuntimeError, TypeError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0][:200]
        raise UserError(f"model.cls = {cfg.model.cls!r}: the optimizer refuses its "
                        f"parameters ({first})") from None


BUILTIN = "spikebench.model:GPT"


def gpt_params(cfg: Config) -> int:
    """A lower bound of the built-in GPT's parameter count, from its config alone: tied
    token and position embeddings, and per block attention (4 C^2) and MLP (8 C^2)."""
    m = cfg.model
    return (m.vocab_size + m.block_size) * m.n_embd + 12 * m.n_layer * m.n_embd ** 2


NAME_MAX = 255  # bytes in one folder name (Linux, macOS, Windows)


def automatic_name(cfg: Config, stamp: str = "YYYYmmdd-HHMMSS") -> str:
    """The run folder's name when ``run.name`` is empty (as :func:`runio.new_run_dir`)."""
    return cfg.run.name or f"{stamp}-{cfg.model.preset}-s{cfg.train.seed}"


def _short(x: object, n: int = 24) -> str:
    text = str(x)
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def _check_names(cfg: Config, run_dir: str | Path | None) -> None:
    """Every folder name of the run's path fits the file system (255 bytes), the
    automatic one with room for a ``-N`` suffix: refused before any data is read."""
    if run_dir is not None:
        name = Path(run_dir).name
        if len(os.fsencode(name)) > NAME_MAX:
            raise UserError(f"train.seed = {_short(cfg.train.seed)}: the run folder name "
                            f"{_short(name, 40)!r} is {len(os.fsencode(name))} bytes, longer "
                            f"than the {NAME_MAX} a folder name may have")
        return
    if cfg.run.name:
        return  # checked by the config: at most 200 bytes
    name = automatic_name(cfg)
    longest = max((len(os.fsencode(p)) for p in Path(name).parts), default=0)
    if longest + 6 > NAME_MAX:  # "-99999": the suffix a taken name gets
        key, value = ("model.preset", cfg.model.preset) if len(
            os.fsencode(cfg.model.preset)) > len(str(cfg.train.seed)) else (
            "train.seed", cfg.train.seed)
        raise UserError(f"{key} = {_short(value)}: the automatic run name (time-preset-seed) "
                        f"would be {longest} bytes, longer than the {NAME_MAX - 6} allowed "
                        f"(a folder name holds {NAME_MAX}); set run.name (at most 200 bytes) "
                        f"or a shorter {key}")


def _fmt_bytes(n: float) -> str:
    if n >= 10**18:  # past any machine; an int this large may not even convert to a float
        return f"about 10^{len(str(int(n))) - 1} bytes" if n < 10**4000 else "over 10^4000 bytes"
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def memory_needed(cfg: Config, n_params: int) -> dict[str, int]:
    """A lower bound, in bytes, of what a run holds at once, by part: the fp32 weights,
    their gradients and AdamW's two moments (16 bytes a parameter); the validation
    batches (kept for the whole run) and a training batch (int64 inputs and targets); and
    one micro-batch's activations: fp32 logits and their log-softmax, and a few
    ``n_embd``-wide tensors per layer per token (the real count is higher). Per rank;
    ranks on the CPU share its memory."""
    d, m, t = cfg.data, cfg.model, cfg.train
    rows = -(-d.batch_size // (cfg.optim.grad_accum * t.nproc))
    tokens = rows * d.seq_len
    return {
        "model and optimizer": 16 * n_params,
        "validation batches": 2 * 8 * t.eval_batches * d.batch_size * d.seq_len,
        "a training batch": 2 * 8 * d.batch_size * d.seq_len,
        "one step's activations": tokens * (8 * m.vocab_size + 4 * 8 * m.n_embd * m.n_layer),
    }


def _real_half(cfg: Config, device: torch.device) -> bool:
    """Whether the run's activations are half precision: real autocast, as chosen on CUDA.
    (On the CPU ``auto`` measures the machine first; a dry run does not, so it counts fp32
    there, the larger.)"""
    p = cfg.precision
    return p.mode != "fp32" and (p.impl == "real" or (p.impl == "auto" and device.type == "cuda"))


def memory_estimate(cfg: Config, n_params: int, device: torch.device) -> dict[str, int]:
    """What one training step holds at its peak, by part, in bytes, per rank: an estimate
    from the config (not the bound :func:`memory_needed` refuses by). The fp32 weights,
    their gradients and AdamW's two moments (16 bytes a parameter) and, on a probe step,
    a copy of the weights (the update ratio's); the batches; and one micro-batch's
    activations kept for the backward of the built-in GPT: per layer and token 68 x
    ``n_embd`` bytes in fp32 (layer-norm and linear inputs, q, k, v, the attention output
    and the MLP's 4 x wide GELU input and output) or 38 x in real half autocast, and for
    the output layer 12 x ``vocab_size`` bytes a token (fp32 logits, their log-softmax and
    its gradient; 16 x under autocast, which adds the half logits), and under autocast
    its half copies of the weights (2 bytes a parameter). Dropout masks, the allocator's
    slack, torch.compile's buffers and torch itself come on top."""
    d, m, t = cfg.data, cfg.model, cfg.train
    rows = -(-d.batch_size // (cfg.optim.grad_accum * t.nproc))
    tokens = rows * d.seq_len
    half = _real_half(cfg, device)
    out = {
        "weights, gradients and AdamW": 16 * n_params,
        "a probe step's copy of the weights": 4 * n_params,
        "batches": 2 * 8 * (t.eval_batches + 1) * d.batch_size * d.seq_len,
        "activations": tokens * m.n_layer * m.n_embd * (38 if half else 68),
        "logits and loss": tokens * m.vocab_size * (16 if half else 12),
    }
    if half:
        out["autocast's half weights"] = 2 * n_params
    return out


def describe_memory(cfg: Config, n_params: int) -> str:
    """One line: the memory a step takes (:func:`memory_estimate`), by part, against what
    the device has; what ``spikebench train --dry-run`` prints."""
    device = resolve_device(cfg.train.device)
    parts = memory_estimate(cfg, n_params, device)
    d = cfg.data
    rows = -(-d.batch_size // (cfg.optim.grad_accum * cfg.train.nproc))
    split = ", ".join(f"{k} {_fmt_bytes(v)}" for k, v in parts.items())
    have = available_memory(device)
    where = "" if have is None else (
        f"; {have[1]} {_fmt_bytes(have[0])}{' available' if device.type == 'cpu' else ''}")
    ranks = f" x {cfg.train.nproc} ranks" if cfg.train.nproc > 1 else ""
    kind = "half" if _real_half(cfg, device) else "fp32"
    return (f"memory per step (estimate, per rank{ranks}): {_fmt_bytes(sum(parts.values()))} "
            f"for {n_params / 1e6:.1f}M parameters and micro-batches of {rows} x {d.seq_len} "
            f"tokens, {kind} activations ({split}){where}")


def available_memory(device: torch.device) -> tuple[int, str] | None:
    """Bytes this run can have, and a phrase naming where: a CUDA device's total memory,
    or on the CPU what the OS reports available (and the cgroup's limit, in a container).
    None when it cannot be told."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return props.total_memory, f"{device} ({props.name}) has"
    found: list[int] = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit) as f, open(usage) as g:
                found.append(int(f.read().strip()) - int(g.read().strip()))
        except (OSError, ValueError):  # "max": no limit
            pass
    if not found:
        try:
            found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (OSError, ValueError, AttributeError):
            return None
    return max(0, min(found)), "this machine has"


def check_memory(cfg: Config, device: torch.device, n_params: int) -> None:
    """Refuse, in one line naming the setting behind the largest part, a run whose lower
    bound of memory (:func:`memory_needed`) exceeds what the device has: before anything
    is allocated, not an allocator's traceback or the OOM killer minutes later."""
    parts = memory_needed(cfg, n_params)
    ranks = cfg.train.nproc if device.type == "cpu" else 1
    need = ranks * sum(parts.values())
    have = available_memory(device)
    if have is None or need <= have[0]:
        return
    big = max(parts, key=parts.get)
    # The setting behind the largest part that is furthest above its default.
    drivers = {"model and optimizer": ("model.n_embd", "model.n_layer", "model.vocab_size",
                                       "model.block_size"),
               "validation batches": ("train.eval_batches", "data.batch_size", "data.seq_len"),
               "a training batch": ("data.batch_size", "data.seq_len"),
               "one step's activations": ("data.batch_size", "data.seq_len", "model.vocab_size",
                                          "model.n_embd", "model.n_layer")}[big]
    defaults = Config()
    key = max(drivers, key=lambda k: math.log(value_at(cfg, k)) - math.log(value_at(defaults, k)))
    key = (key, value_at(cfg, key))
    split = ", ".join(f"{k} {_fmt_bytes(ranks * v)}" for k, v in parts.items())
    raise UserError(f"{key[0]} = {_short(key[1])}: the run needs at least {_fmt_bytes(need)} "
                    f"of memory ({split}{f'; {ranks} ranks' if ranks > 1 else ''}), and "
                    f"{have[1]} {_fmt_bytes(have[0])}{' available' if device.type == 'cpu' else ''}"
                    "; lower it")


def _why(e: BaseException) -> str:
    text = (str(e).strip().splitlines() or [""])[0][:200]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def build_model_meta(cfg, seq_len: int | None = None) -> torch.nn.Module:
    """Build the model on the meta device, so a class that is no ``nn.Module`` or does not
    take the model config is refused before any data is read; with ``seq_len``, run one
    forward of a (1, seq_len) batch there too, so one without a ``forward`` or whose
    forward does not return ``(logits, loss)`` with a scalar loss that can be
    backpropagated is refused as well (no memory, no run folder). Returns the meta model."""
    cls = model_class(cfg)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise UserError(f"model.cls = {cfg.cls!r}: not a torch.nn.Module subclass")
    try:
        with torch.device("meta"):
            model = cls(cfg)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a user's class can fail in any way
        raise UserError(f"model.cls = {cfg.cls!r}: cannot be built from the model config "
                        f"({_why(e)})") from None
    if seq_len is not None:
        _check_forward(cfg, model, seq_len)
    return model


def _check_forward(cfg, model: torch.nn.Module, seq_len: int) -> None:
    idx = torch.zeros((1, seq_len), dtype=torch.long, device="meta")
    where = f"model.cls = {cfg.cls!r}: forward(idx, targets)"
    try:
        with torch.enable_grad():
            out = model(idx, idx)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a user's class can fail in any way
        if re.search(r"\bmeta\b", str(e), re.IGNORECASE):  # an op the meta device lacks (or
            return  # one that reads a value, .item()): this class is checked when it runs
        if isinstance(e, NotImplementedError) and "forward" in str(e):
            raise UserError(f"model.cls = {cfg.cls!r}: has no forward method; it must "
                            "define forward(idx, targets) returning (logits, loss)") from None
        raise UserError(f"{where} fails on a (1, {seq_len}) batch ({_why(e)})") from None
    if not (isinstance(out, tuple | list) and len(out) == 2):
        got = (f"a {type(out).__name__} of {len(out)}" if isinstance(out, tuple | list)
               else f"a {type(out).__name__}")
        raise UserError(f"{where} returned {got}; it must return (logits, loss)")
    loss = out[1]
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1
            and loss.is_floating_point()):
        got = (f"a tensor of shape {tuple(loss.shape)} and dtype {loss.dtype}"
               if isinstance(loss, torch.Tensor) else f"a {type(loss).__name__}")
        raise UserError(f"{where} returned a loss that is {got}; it must be a scalar "
                        "floating-point tensor")
    if not loss.requires_grad:
        raise UserError(f"{where} returned a loss that does not require grad (detached "
                        "from the parameters); training could not backpropagate it")


# What a run checks and resolves before it trains (moved from loop.py, which reads
# top to bottom without them).


def resolve_precision(cfg: Config, device: torch.device, dist: Dist, saved: dict | None) -> Precision:
    """The run's precision. ``impl = "auto"`` is resolved once: by rank 0, for every rank
    (ranks measuring at once on shared cores could choose apart), and on resume as the
    checkpoint resolved it (another machine or thread count could choose otherwise)."""
    p = cfg.precision
    if p.impl != "auto" or p.mode == "fp32":
        return make_precision(p, device)
    if saved is not None and saved.get("precision_impl") in ("real", "emulated"):
        return make_precision(dataclasses.replace(p, impl=saved["precision_impl"]), device)
    chosen = make_precision(p, device) if dist.main else None
    impl, why = dist.broadcast((chosen.impl, chosen.why) if chosen else None)
    if chosen is None:
        chosen = make_precision(dataclasses.replace(p, impl=impl), device)
        chosen.why = why
    return chosen


def check_world(cfg: Config, dist: Dist) -> None:
    """``train.nproc`` is the world size: torchrun's, when it started this process."""
    t = cfg.train
    if dist.world == t.nproc:
        return
    if dist.world == 1:
        raise UserError(f"train.nproc = {t.nproc}: this process was not started by torchrun; "
                        "run it with `spikebench train` or in a sweep (both launch the "
                        f"ranks), or under torchrun --nproc_per_node={t.nproc}")
    if t.nproc != 1:
        raise UserError(f"train.nproc = {t.nproc}: torchrun started {dist.world} processes")
    t.nproc = dist.world  # torchrun's world size; the config records it
    cfg.check()


def check_resume(run_dir: Path) -> None:
    """What makes a run folder impossible to resume, refused in one line before anything
    runs: a finished run, and a ``meta.json`` that is missing or damaged while checkpoints
    wait (a resume continues the first start's record; with no checkpoint the run trains
    again from step 0 and writes a new one)."""
    if (run_dir / L.SUMMARY_JSON).exists():
        raise UserError(f"--resume {run_dir}: the run already finished (it has a "
                        "summary.json); nothing to resume")
    saved = checkpoint.saved(run_dir)
    if not saved:
        return
    for path in saved:  # the run writes its checkpoints there again
        if path.is_dir():
            raise UserError(f"--resume {run_dir}: {path} is a folder, where the run writes "
                            "a checkpoint file; remove it")
    meta = run_dir / L.META_JSON
    why = ""
    try:
        if not meta.is_file():
            why = "is missing" if not meta.exists() else "is not a regular file"
        else:
            first = json.loads(meta.read_bytes().decode("utf-8"))
            if not isinstance(first, dict):
                why = f"holds a JSON {type(first).__name__}, not an object"
            elif not isinstance(first.get("resumes", []), list):
                why = f"has resumes = {str(first['resumes'])[:40]!r}, not a list"
    except RecursionError:
        why = "is nested too deeply"
    except (OSError, ValueError) as e:  # unreadable, not UTF-8, truncated JSON
        why = f"is damaged ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})"
    if why:
        raise UserError(f"--resume {run_dir}: meta.json {why}; the run's record of its first "
                        "start is lost, so its checkpoints cannot be continued (start a new "
                        "run, or remove checkpoints/ to train this one again from step 0)")


def resumable(cfg: Config, run_dir: Path, log: Path, model: torch.nn.Module | None = None,
               opt: torch.optim.Optimizer | None = None) -> dict[str, Any] | None:
    """The newest checkpoint of ``run_dir`` this run can continue from; None (and one line
    on stderr) when there is none, and the run starts again from step 0."""
    check_resume(run_dir)
    partial = log.with_name(log.name + ".partial")
    if log.is_file() and not partial.exists():  # killed between closing the log and the summary
        os.replace(log, partial)
    found = checkpoint.load_latest(run_dir, lambda st: usable(st, cfg, partial, model, opt),
                                   warn=lambda text: print(text, file=sys.stderr))
    if found is None:
        print(f"{run_dir}: no usable checkpoint; training again from step 0", file=sys.stderr)
    return found
