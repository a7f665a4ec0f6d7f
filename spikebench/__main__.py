"""``python -m spikebench``: the command line (:mod:`spikebench.cli`)."""

from spikebench.cli import main

raise SystemExit(main())
