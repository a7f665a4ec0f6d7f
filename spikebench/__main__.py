from spikebench.cli import main

raise SystemExit(main())
