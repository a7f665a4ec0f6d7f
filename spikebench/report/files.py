"""Reading a run's JSON and JSONL files tolerantly: what cannot be read is said, in a few
words, never raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spikebench.metrics import STEP
from spikebench.report.shapes import STEP_AT, short, step
from spikebench.spikes.logs import json_lines, parse_json

__all__ = ["read_json", "read_jsonl", "read_object", "read_rows"]


def read_object(path: Path) -> tuple[dict[str, Any] | None, str]:
    """A JSON object from ``path`` and "", or None and why not ("" when it is missing)."""
    try:
        data = parse_json(Path(path).read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, f"cannot read ({e.strerror or type(e).__name__})"
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except ValueError as e:
        return None, f"not valid JSON ({e})"
    if not isinstance(data, dict):
        return None, f"not a JSON object (a {type(data).__name__})"
    return data, ""


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None if missing, unreadable or not an object."""
    return read_object(path)[0]


def read_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of a JSONL log and what was skipped: broken lines and rows whose step is not an
    integer in 0..2**53 - 1 are damage; a torn last line (a run killed or still writing) is
    skipped silently."""
    rows, bad = [], []
    try:
        for i, row, ended in json_lines(Path(path)):
            if isinstance(row, ValueError):
                if ended:
                    bad.append(f"line {i}: {row}")
            elif not isinstance(row, dict):
                bad.append(f"line {i}: not a JSON object (a {type(row).__name__})")
            elif STEP in row and not step(row[STEP]):
                bad.append(f"line {i}: {STEP} = {short(row[STEP])} is not {STEP_AT[1]}")
            else:
                rows.append(row)
    except FileNotFoundError:
        pass
    except OSError as e:
        bad.append(f"cannot read ({e.strerror or type(e).__name__})")
    if len(bad) > 1:
        return rows, [f"{len(bad)} lines skipped (first: {bad[0]})"]
    return rows, [f"skipped {b}" if b.startswith("line") else b for b in bad]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL log; a torn last line (a run killed mid-write) and blank or broken
    lines are skipped. Missing file: no rows."""
    return read_rows(path)[0]
