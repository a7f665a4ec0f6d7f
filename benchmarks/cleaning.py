"""What each cleaner finds and how fast: precision and recall against each kind of planted
contamination, and MB/s over the corpus at several sizes.

For every contamination kind (random bytes, one repeated document, another domain's text,
planted as 2 KB segments over 2% of the training split) and every cleaner alone (each
quality rule, MinHash dedup, the domain cap at ``--cap``, planted domain text counting as a
domain of its own), the byte-level precision and recall of what it removed; then the time
of the quality rules, dedup and the domain cap at each ``--mb`` (no cache), as MB/s, so the
scaling with corpus size shows.

    python benchmarks/cleaning.py
    python benchmarks/cleaning.py --mb 1 4 16 --pr-mb 4
"""

from __future__ import annotations

import argparse
import time

from spikebench import config as cfgmod
from spikebench.data.clean.quality import QUALITY_RULES
from spikebench.data.clean.run import decide
from spikebench.data.corpus import domain_map, load_corpus
from spikebench.data.sources import read_text_source
from spikebench.errors import UserError

KINDS = ("random_bytes", "repeat", "domain")


def cleaners(cap: float) -> dict[str, dict]:
    off = {r.key: "off" for r in QUALITY_RULES}
    out = {r.name: {"quality": True, **off, r.key: getattr(cfgmod.CleanConfig(), r.key)}
           for r in QUALITY_RULES}
    out["dedup"] = {"dedup": True}
    out[f"cap {cap:g}"] = {"max_domain_share": cap}
    return out


def _cleaned(over: list[str], clean: dict) -> dict:
    sets = [f"clean.{k}={str(v).lower() if isinstance(v, bool) else v}"
            for k, v in clean.items()]
    return load_corpus(cfgmod.load(None, [*over, *sets, "clean.cache_dir="])).meta["cleaning"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", nargs="+", type=float, default=[1, 4])
    ap.add_argument("--pr-mb", type=float, default=4)
    ap.add_argument("--cap", type=float, default=0.25, help="clean.max_domain_share")
    args = ap.parse_args()
    print(f"precision / recall against planted contamination ({args.pr_mb:g} MB corpus):")
    for kind in KINDS:
        over = [f"data.max_bytes={int(args.pr_mb * 1e6)}", f"faults.burst={kind}",
                "faults.target=corpus"]
        for name, settings in cleaners(args.cap).items():
            rep = _cleaned(over, settings)
            p, r = rep["precision"], rep["recall"]
            print(f"  {kind:12s} {name:15s} removed {rep['removed_bytes']:>9,} B  precision "
                  f"{'—' if p is None else f'{p:.2f}'}  recall {r:.2f}")
    print("speed (no cache):")
    for mb in args.mb:
        cfg = cfgmod.load(None, [f"data.max_bytes={int(mb * 1e6)}"])
        data = bytes(load_corpus(cfg).train.numpy())
        domains = domain_map(read_text_source("stdlib", cfg, "data.corpus").domains, [])
        for name, over in (("quality", {"quality": True}), ("dedup", {"dedup": True}),
                           ("cap", {"max_domain_share": args.cap})):
            start = time.perf_counter()
            try:
                decide(data, cfgmod.CleanConfig(**over, cache_dir=""), domains)
            except UserError as e:  # too few domains in a small corpus for the cap
                print(f"  {name:8s} {len(data) / 1e6:6.2f} MB: n/a ({e})")
                continue
            took = time.perf_counter() - start
            print(f"  {name:8s} {len(data) / 1e6:6.2f} MB: {took:6.2f} s, "
                  f"{len(data) / 1e6 / took:5.2f} MB/s")


if __name__ == "__main__":
    main()
