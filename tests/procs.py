"""Processes found by their command lines, for the tests that kill runs and check that
nothing outlives them."""

from __future__ import annotations

import os
from pathlib import Path


def processes_with(*markers: str) -> list[int]:
    """Pids of this machine's processes (this one excepted) whose command line holds every
    one of ``markers``."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if all(m in cmd for m in markers):
                pids.append(int(p.name))
    return pids
