"""The command line's argument types: each value checked as argparse parses it, so a bad
one is a usage error of one line (exit 2) naming the value and what is allowed."""

from __future__ import annotations

import argparse

from spikebench.spikes.rules import RULES


def _above_zero(text: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = -1.0
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: must be {what}")
    return x


def positive_loss(text: str) -> float:
    """A target loss: a number > 0."""
    return _above_zero(text, "a loss > 0")


def positive(text: str) -> float:
    """A finite number > 0."""
    return _above_zero(text, "a number > 0")


def count(text: str) -> int:
    """An integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 0")
    return n


def draws(text: str) -> int:
    """Bootstrap draws: an integer >= 100 (fewer leave the 2.5th and 97.5th percentiles
    resting on a handful of draws; none would give no interval at all)."""
    n = count(text)
    if n < 100:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 100")
    return n


def finite(text: str) -> float:
    """Any finite number."""
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if x != x or x in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number")
    return x


def rule_name(text: str) -> str:
    """The name of a spike rule (:data:`spikebench.spikes.rules.RULES`)."""
    if text not in RULES:
        raise argparse.ArgumentTypeError(f"unknown detector {text!r}; choose from: "
                                         + ", ".join(RULES))
    return text


def port(text: str) -> int:
    """A TCP port, 0 for any free one."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a port number in 0..65535 "
                                         "(0: any free port)")
    return n
