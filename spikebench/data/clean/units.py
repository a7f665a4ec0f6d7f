"""The units cleaning judges: documents, cut at line ends into pieces of at most N bytes.

A cleaner removes whole units, so a unit's size sets how finely removal can follow a bad
stretch of text: a planted 2 KB segment inside a 40 KB source file is found as a few 1 KB
units, not as the whole file. Units keep their byte offsets, so what was removed can be
compared with where contamination was planted.
"""

from __future__ import annotations

from dataclasses import dataclass

from spikebench.data.sources import DOC_SEP


@dataclass(frozen=True)
class Unit:
    start: int  # byte offset in the text
    end: int  # exclusive

    def text(self, data: bytes) -> bytes:
        return data[self.start:self.end]


def split_units(data: bytes, max_bytes: int) -> list[Unit]:
    """Documents (split at :data:`DOC_SEP`, which stays with the document before it), each
    cut after the last line end that keeps a piece within ``max_bytes`` (hard cut where a
    line is longer). Every byte of ``data`` is in exactly one unit."""
    units: list[Unit] = []
    start, n = 0, len(data)
    while start < n:
        sep = data.find(DOC_SEP, start)
        doc_end = n if sep < 0 else sep + len(DOC_SEP)
        while start < doc_end:
            end = min(doc_end, start + max_bytes)
            if end < doc_end:
                cut = data.rfind(b"\n", start, end)
                end = cut + 1 if cut > start else end
            units.append(Unit(start, end))
            start = end
    return units
