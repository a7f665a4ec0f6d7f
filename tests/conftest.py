"""Hypothesis profiles. ``mutations``: the mutation check (``tests/mutations.py``) needs only
a failure, not the smallest one, so there Hypothesis does not shrink (a caught mutant of the
trial ordering spent 55 s shrinking)."""

from hypothesis import Phase, settings

settings.register_profile("mutations", phases=[p for p in Phase if p is not Phase.shrink])
