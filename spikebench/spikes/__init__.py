"""Spikes: detection rules, events and their severity, the monitor, reading any log."""

from spikebench.spikes.events import Event
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.rules import RULES, make_rule

__all__ = ["RULES", "Event", "SpikeMonitor", "make_rule"]
