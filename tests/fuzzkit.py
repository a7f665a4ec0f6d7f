"""The bad-input promise as one check, for the fuzz tests of every class of bad input.

A refusal is exit code 2 and one line on stderr that starts with ``spikebench`` (never a
traceback), and it leaves every file it was given byte-identical and writes nothing outside
the output folder. :func:`refused` runs the CLI in-process inside a sandbox folder (the
working directory for the call) and checks all of that.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from spikebench.cli import main


def snapshot(root: Path) -> dict[Path, bytes | None]:
    """Every path below ``root``: a regular file's bytes, None for anything else."""
    out: dict[Path, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            try:
                out[p] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
            except OSError:
                out[p] = None
    return out


def changed(before: dict[Path, bytes | None], after: dict[Path, bytes | None]) -> set[Path]:
    return {p for p in set(before) | set(after) if before.get(p, b"\0gone") != after.get(
        p, b"\0gone")}


def refused(argv: Sequence[str], sandbox: Path, capsys, *, out: Path | None = None,
            expect: str = "") -> str:
    """Run ``spikebench argv`` with ``sandbox`` as the working directory and assert a clean
    refusal: exit 2, one line starting with "spikebench" (holding ``expect``), no file
    below ``sandbox`` changed except under ``out``. Returns the line."""
    before = snapshot(sandbox)
    cwd = Path.cwd()
    os.chdir(sandbox)
    try:
        code = main(list(argv))
    finally:
        os.chdir(cwd)
    _, err = capsys.readouterr()
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.startswith("spikebench"), err
    assert expect in err, err
    moved = changed(before, snapshot(sandbox))
    if out is not None:
        moved = {p for p in moved if p != out and out not in p.parents}
    assert not moved, f"{sorted(map(str, moved))[:5]} changed by a refused {list(argv)}"
    return err.strip()


@contextmanager
def deadline(seconds: int = 20) -> Iterator[None]:
    """Fail instead of hanging: a refusal that blocks (opening a FIFO waits for a writer)
    raises TimeoutError here after ``seconds``."""
    def expired(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
