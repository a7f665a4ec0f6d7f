import math

from spikebench.report.blocks import DASH, delta, interval, num, pct, points, signed


def test_numbers_read_at_about_three_digits():
    assert [num(x) for x in (0, 1234.5, 123.4, 12.34, 1.234, 0.001234)] == [
        "0", "1,234", "123", "12.3", "1.23", "1.23e-03"]
    assert num(None) == DASH and num(math.nan) == DASH and num(-math.inf) == "-inf"
    # A whole number reads the same whatever its type or size.
    assert [num(x) for x in (6, 12, 12.0, 300.0, 2.0)] == ["6", "12", "12", "300", "2"]
    assert num(True) == "True" and signed(2.0) == "+2" and signed(-2.0) == "-2"
    assert pct(0.25) == "25%" and pct(0.25, sign=True) == "+25%" and pct(None) == DASH
    assert points(1 / 3) == "+33 pp" and points(0) == "0 pp"


def test_intervals_and_deltas():
    assert interval(None) == DASH and interval({"value": None}) == DASH
    assert interval({"value": 2.0, "lo": None, "hi": None, "n": 1}) == (
        "2 (no 95% interval: one seed)")
    assert interval({"value": 2.0, "lo": None, "hi": None, "n": 3, "why": "x"}) == (
        "2 (no 95% interval: x)")
    # A zero-width interval is never printed as one.
    assert interval({"value": 2.0, "lo": 2.0, "hi": 2.0, "n": 3}) == (
        "2 (no 95% interval: no spread)")
    assert interval({"value": 2.0, "lo": 1.0, "hi": 3.0}) == "2 [1, 3]"
    assert delta(None) == ""
    assert delta({"value": None}) == "\nΔ vs baseline: no matched seeds"
    assert delta({"value": -1.0, "lo": -2.0, "hi": 0.5, "n": 3}) == (
        "\nΔ -1 [-2, +0.5], 3 matched")
    assert delta({"value": 0.5, "lo": 0.2, "hi": 1.0, "n": 3}, points) == (
        "\nΔ +50 pp [+20 pp, +100 pp], 3 matched")
