"""Spike precursors (issue 47): the warning rule, the labelled set and the scorecard."""
