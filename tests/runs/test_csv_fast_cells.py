"""The fast CSV lane's cell scan, read piece by piece: a cell's emptiness wherever the
pieces cut the rows, and None for a body the careful reader must word (a ragged or blank
row, a field or line past its limit)."""

from __future__ import annotations

import csv
import random

import numpy as np
import pytest

from spikebench.runs import csv_fast


def _want(body: bytes, ncols: int, max_line: int) -> np.ndarray | None:
    lines = body.decode().split("\n")[:-1]
    rows = [line.split(",") for line in lines]
    if any(len(r) != ncols for r in rows) or any(len(x) > csv.field_size_limit()
                                                 for r in rows for x in r):
        return None
    if any(len(line) > max_line for line in lines):
        return None
    return np.array([[x == "" for x in r] for r in rows], dtype=bool).reshape(-1, ncols)


@pytest.mark.parametrize("scan", [3, 7, 64, csv_fast.SCAN])
def test_cells_are_the_rows_split_by_hand(monkeypatch, scan):
    monkeypatch.setattr(csv_fast, "SCAN", scan)
    old_limit = csv.field_size_limit(9)
    try:
        rng = random.Random(scan)
        for _ in range(400):
            ncols = rng.randint(1, 4)
            rows = [[rng.choice(["", "1", "2.5", "nan", "x" * rng.randint(0, 12)])
                     for _ in range(max(1, ncols + rng.choice([0] * 8 + [-1, 1])))]
                    for _ in range(rng.randint(1, 20))]
            body = ("\n".join(",".join(r) for r in rows) + "\n").encode()
            if rng.random() < 0.1:
                body = body.replace(b"\n", b"\n\n", 1)  # a blank line: no fields
            max_line = rng.choice([6, 20, 1000])
            want = _want(body, ncols, max_line)
            got = csv_fast._cells(body, ",", ncols, max_line)
            assert (got is None) == (want is None), body
            if want is not None:
                assert np.array_equal(got, want), body
    finally:
        csv.field_size_limit(old_limit)
