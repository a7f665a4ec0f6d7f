"""How fast cleaning runs: MB/s of each cleaner over the stdlib corpus at several sizes.

Cleans the training split of ``data.max_bytes`` = each ``--mb`` with the quality rules
alone, then MinHash dedup alone (no cache), and prints MB/s per cleaner and size, so the
scaling with corpus size shows (dedup's LSH lookups should keep it near linear).

    python benchmarks/clean_speed.py
    python benchmarks/clean_speed.py --mb 1 4 16
"""

from __future__ import annotations

import argparse
import time

from spikebench import config as cfgmod
from spikebench.data.clean.run import decide
from spikebench.data.corpus import load_corpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", nargs="+", type=float, default=[1, 4])
    args = ap.parse_args()
    for mb in args.mb:
        cfg = cfgmod.load(None, [f"data.max_bytes={int(mb * 1e6)}"])
        data = bytes(load_corpus(cfg).train.numpy())
        for name, over in (("quality", {"quality": True}), ("dedup", {"dedup": True})):
            clean = cfgmod.CleanConfig(**over, cache_dir="")
            start = time.perf_counter()
            removed = decide(data, clean)
            took = time.perf_counter() - start
            print(f"{name:8s} {len(data) / 1e6:6.2f} MB: {took:6.2f} s, "
                  f"{len(data) / 1e6 / took:5.2f} MB/s, {len(removed)} units removed")


if __name__ == "__main__":
    main()
