"""Watching runs live: Prometheus metrics fed at the loop's read-back (``--metrics-port``)."""
