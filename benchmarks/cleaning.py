"""What each cleaner finds and how fast: precision and recall against each kind of planted
contamination, and MB/s over the corpus at several sizes.

For every contamination kind (random bytes, one repeated document, another domain's text,
planted as 2 KB segments over 2% of the training split) and every cleaner alone (each
quality rule, MinHash dedup), the byte-level precision and recall of what it removed; then
the time of the quality rules and of dedup at each ``--mb`` (no cache), as MB/s, so the
scaling with corpus size shows.

    python benchmarks/cleaning.py
    python benchmarks/cleaning.py --mb 1 4 16 --pr-mb 4
"""

from __future__ import annotations

import argparse
import time

from spikebench import config as cfgmod
from spikebench.data.clean.quality import QUALITY_RULES
from spikebench.data.clean.run import clean, decide
from spikebench.data.corpus import load_corpus

KINDS = ("random_bytes", "repeat", "domain")


def cleaners() -> dict[str, dict]:
    off = {r.key: None for r in QUALITY_RULES}
    out = {r.name: {"quality": True, **off, r.key: getattr(cfgmod.CleanConfig(), r.key)}
           for r in QUALITY_RULES}
    out["dedup"] = {"dedup": True}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", nargs="+", type=float, default=[1, 4])
    ap.add_argument("--pr-mb", type=float, default=4)
    args = ap.parse_args()
    print(f"precision / recall against planted contamination ({args.pr_mb:g} MB corpus):")
    for kind in KINDS:
        cfg = cfgmod.load(None, [f"data.max_bytes={int(args.pr_mb * 1e6)}",
                                 f"faults.burst={kind}", "faults.target=corpus"])
        corpus = load_corpus(cfg)
        data = bytes(corpus.train.numpy())
        for name, over in cleaners().items():
            _, rep = clean(data, cfgmod.CleanConfig(**over, cache_dir=""),
                           corpus.meta["contamination"])
            p, r = rep["precision"], rep["recall"]
            print(f"  {kind:12s} {name:15s} removed {rep['removed_bytes']:>9,} B  precision "
                  f"{'—' if p is None else f'{p:.2f}'}  recall {r:.2f}")
    print("speed (no cache):")
    for mb in args.mb:
        cfg = cfgmod.load(None, [f"data.max_bytes={int(mb * 1e6)}"])
        data = bytes(load_corpus(cfg).train.numpy())
        for name, over in (("quality", {"quality": True}), ("dedup", {"dedup": True})):
            start = time.perf_counter()
            decide(data, cfgmod.CleanConfig(**over, cache_dir=""))
            took = time.perf_counter() - start
            print(f"  {name:8s} {len(data) / 1e6:6.2f} MB: {took:6.2f} s, "
                  f"{len(data) / 1e6 / took:5.2f} MB/s")


if __name__ == "__main__":
    main()
