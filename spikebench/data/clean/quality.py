"""Quality filters on one unit of text, each a pure rule with a threshold and a source.

Defaults follow datatrove's implementations of the Gopher filters (Rae et al. 2021) and
Dolma's repetition rule (OLMo); the garbled-byte share is ours (no standard filter reads raw
bytes). A unit fails when any enabled rule fails; each failure is named, for the report.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

_WORD = re.compile(rb"\S+")
_PRINTABLE = frozenset(range(32, 127)) | {9, 10, 13}


@dataclass(frozen=True)
class Rule:
    name: str
    key: str  # the data.clean config field holding its threshold
    source: str


QUALITY_RULES = (
    Rule("garbled", "max_garbled", "ours: share of bytes that are neither printable ASCII, "
         "whitespace, nor part of valid UTF-8"),
    Rule("symbols", "max_symbol_word_ratio", "Gopher quality filter (datatrove "
         "GopherQualityFilter max_symbol_word_ratio = 0.1): '#' and '...' per word"),
    Rule("repeated_lines", "max_dup_line_frac", "Gopher repetition filter (datatrove "
         "GopherRepetitionFilter dup_line_frac = 0.3): share of lines that repeat another"),
    Rule("ngram_repeats", "max_ngram_repeats", "Dolma/OLMo repetition rule: an n-gram "
         "(n <= 13 words) repeated 32 or more times in a row"),
)


def garbled_share(text: bytes) -> float:
    """Share of bytes outside printable ASCII and whitespace that do not decode as UTF-8."""
    if not text:
        return 0.0
    bad = sum(b not in _PRINTABLE for b in text)
    if not bad:
        return 0.0
    decoded = text.decode("utf-8", errors="replace")
    # Valid multi-byte UTF-8 (accents, symbols) is text; replacement marks are not.
    invalid = decoded.count("\ufffd")
    controls = sum(ord(c) < 32 and c not in "\t\n\r" for c in decoded)
    return min(1.0, (invalid + controls) / len(text))


def symbol_word_ratio(text: bytes) -> float:
    words = _WORD.findall(text)
    if not words:
        return 0.0
    return (text.count(b"#") + text.count(b"...")) / len(words)


def dup_line_frac(text: bytes) -> float:
    """Share of non-empty lines equal to an earlier line of the unit."""
    lines = [ln.strip() for ln in text.split(b"\n") if ln.strip()]
    if not lines:
        return 0.0
    counts = Counter(lines)
    return sum(c - 1 for c in counts.values()) / len(lines)


def max_consecutive_ngram(text: bytes, max_n: int = 13) -> int:
    """The most times any word n-gram (n <= ``max_n``) repeats back to back."""
    words = _WORD.findall(text)
    best = 1 if words else 0
    for n in range(1, min(max_n, len(words) // 2) + 1):
        for offset in range(n):
            run, prev = 1, None
            for i in range(offset, len(words) - n + 1, n):
                gram = tuple(words[i:i + n])
                run = run + 1 if gram == prev else 1
                prev = gram
                best = max(best, run)
    return best


def quality_flags(text: bytes, thresholds: dict[str, Any]) -> list[str]:
    """Names of the rules ``text`` fails; a rule whose threshold is None is off."""
    checks = {
        "max_garbled": lambda: garbled_share(text),
        "max_symbol_word_ratio": lambda: symbol_word_ratio(text),
        "max_dup_line_frac": lambda: dup_line_frac(text),
        "max_ngram_repeats": lambda: max_consecutive_ngram(text),
    }
    failed = []
    for rule in QUALITY_RULES:
        limit = thresholds.get(rule.key)
        if limit is None:
            continue
        value = checks[rule.key]()
        if (value >= limit) if rule.key == "max_ngram_repeats" else (value > limit):
            failed.append(rule.name)
    return failed
