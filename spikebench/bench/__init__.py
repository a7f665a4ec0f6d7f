"""``spikebench bench``: regression suites run against a committed baseline, exact tests and
performance ratios."""
