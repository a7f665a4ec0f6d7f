"""A run's checkpoints: atomic, checksummed, the last K kept, loaded weights-only.

``run_dir/checkpoints/step-<step>.pt`` is written to a temporary file and renamed, then its
SHA-256 goes beside it (``.sha256``), last: a checkpoint whose checksum is missing (killed
between the two writes), wrong (truncated or corrupted) or that does not load is skipped
with one line naming it, and the one before is used. Everything in it is a tensor or a
plain value, so ``torch.load(weights_only=True)`` reads it and no pickle runs code.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from spikebench.runio import atomic_write_bytes, atomic_write_text

FOLDER = "checkpoints"
VERSION = 1
_NAME = re.compile(r"step-(\d{8})\.pt")


def folder(run_dir: Path, name: str = FOLDER) -> Path:
    return Path(run_dir) / name


def saved(run_dir: Path, name: str = FOLDER) -> list[Path]:
    """The checkpoint files of a run, newest (highest step) first."""
    d = folder(run_dir, name)
    found = [p for p in d.glob("step-*.pt") if _NAME.fullmatch(p.name)] if d.is_dir() else []
    return sorted(found, key=lambda p: p.name, reverse=True)


def _digest_path(path: Path) -> Path:
    return path.with_suffix(".sha256")


def save(run_dir: Path, step: int, state: dict[str, Any], keep: int,
         name: str = FOLDER) -> tuple[Path, int]:
    """Write the checkpoint of ``step`` into ``run_dir/name``, then drop all but the newest
    ``keep``; returns its path and size in bytes."""
    buf = io.BytesIO()
    torch.save({"version": VERSION, "step": step, **state}, buf)
    data = buf.getvalue()
    path = folder(run_dir, name) / f"step-{step:08d}.pt"
    atomic_write_bytes(path, data)
    atomic_write_text(_digest_path(path), hashlib.sha256(data).hexdigest() + "\n")
    for old in saved(run_dir, name)[keep:]:
        old.unlink(missing_ok=True)
        _digest_path(old).unlink(missing_ok=True)
    return path, len(data)


def _problem(path: Path, data: bytes) -> str:
    digest = _digest_path(path)
    if not digest.exists():
        return "has no checksum (the run was killed while writing it)"
    if not digest.is_file():
        return f"has a checksum {digest.name} that is not a regular file"
    expected = digest.read_text().strip()
    if hashlib.sha256(data).hexdigest() != expected:
        return "checksum mismatch (truncated or corrupted)"
    return ""


def load_latest(run_dir: Path, usable: Callable[[dict[str, Any]], str] = lambda s: "",
                warn: Callable[[str], None] = print) -> dict[str, Any] | None:
    """The newest checkpoint that is intact and ``usable`` (a check returning "" or why
    not), on the CPU; each one skipped is one ``warn`` line. None: no usable checkpoint."""
    for path in saved(run_dir):
        try:  # a FIFO or a device named like a checkpoint is never opened: it could block
            data = path.read_bytes() if path.is_file() else None
        except OSError as e:
            data, why = None, f"cannot be read ({e.strerror or e})"
        else:
            why = "" if data is not None else "is not a regular file"
        if data is None:
            warn(f"checkpoint {path}: {why}; using the previous one")
            continue
        try:
            why = _problem(path, data)
        except (OSError, UnicodeDecodeError) as e:
            why = f"has an unreadable checksum file ({type(e).__name__})"
        state = None
        if not why:
            try:
                state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            except Exception as e:  # noqa: BLE001 - any unreadable file is one line
                why = f"does not load ({type(e).__name__})"
        if state is not None and not isinstance(state, dict):
            why, state = f"holds a {type(state).__name__}, not a checkpoint", None
        if state is not None and state.get("version") != VERSION:
            why = f"version {str(state.get('version'))[:40]!r}, this spikebench reads {VERSION}"
        why = why or usable(state)
        if not why:
            return state
        warn(f"checkpoint {path}: {why}; using the previous one")
    return None
