"""Scoring as pure functions over results, apart from running (AlgoPerf's split).

:mod:`.run` scores one run's records (spikes, time to target, final loss); :mod:`.trial`
turns a trial's per-seed summaries into Optuna values, attributes and constraints.
"""
