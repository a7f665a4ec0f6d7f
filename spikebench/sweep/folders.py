"""A sweep's or worker's results folder, checked before the storage is asked for anything.

A folder that cannot hold trials (``--results`` is a file, lies under one, the study's
folder or its ``trials`` folder is a file, or nothing may be written there) would fail
every trial at once; on a shared study those failures would use up the study. So it is
refused first, in one line, and without writing anything (:func:`check_folder`); the folder
is created only by a sweep that will run (:func:`make_folder`).
"""

from __future__ import annotations

import os
from pathlib import Path

from spikebench.errors import UserError


def check_folder(folder: Path, results: str | Path) -> None:
    """Refuse ``folder`` (below the ``--results`` folder ``results``) if it cannot be
    created or written, writing nothing. Every part of it that exists must be a folder,
    and the deepest that exists must be writable (as root it always is, except on a
    read-only file system)."""
    where = f"--results {str(results)[:200]!r}"
    try:
        for part in [folder, *folder.parents]:
            if part.is_symlink() and not part.exists():
                raise UserError(f"{where}: {str(part)[:200]!r} is a broken link")
            if not part.exists():
                continue
            if not part.is_dir():
                raise UserError(f"{where}: {str(part)[:200]!r} is a file, not a folder "
                                f"(the trials go to {str(folder)[:200]}/)")
            if not os.access(part, os.W_OK | os.X_OK):
                raise UserError(f"{where}: cannot write in {str(part)[:200]!r} (read-only)")
            return
    except UserError:
        raise
    except (OSError, ValueError) as e:  # a name too long, a NUL, a loop of links
        raise UserError(f"{where}: cannot be used ({getattr(e, 'strerror', None) or e})") \
            from None


def make_folder(folder: Path, results: str | Path) -> None:
    """Create ``folder`` after :func:`check_folder`; what the check could not foresee
    (a full disk, a read-only file system as root) is one line too."""
    check_folder(folder, results)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--results {str(results)[:200]!r}: cannot create "
                        f"{str(folder)[:200]!r} ({e.strerror or e})") from None
