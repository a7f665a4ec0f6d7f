"""Near-duplicate removal with MinHash LSH (datasketch), as datatrove's MinHash dedup does:
word 5-gram shingles, a Jaccard threshold, the first unit of each cluster kept."""

from __future__ import annotations

import re

from spikebench.errors import UserError

_WORD = re.compile(rb"\S+")


def _shingles(text: bytes, n: int) -> set[bytes]:
    words = _WORD.findall(text)
    if len(words) < n:
        return {b" ".join(words)} if words else set()
    return {b" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def near_duplicates(texts: list[bytes], *, threshold: float, num_perm: int = 128,
                    ngram: int = 5, seed: int = 1) -> list[int | None]:
    """For each text, the index of an earlier text it near-duplicates (estimated Jaccard
    similarity of shingle sets >= ``threshold``), or None. Texts without shingles are never
    duplicates."""
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError:
        raise UserError("data.clean.dedup = true needs datasketch: pip install -e '.[clean]'"
                        ) from None
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    # One set of permutations for every signature: drawing them per unit was a third of the
    # time, and the signatures are the same for a given seed either way.
    template = MinHash(num_perm=num_perm, seed=seed)
    shared = {"permutations": template.permutations}
    if hasattr(template, "scheme"):  # datasketch >= 2 asks which scheme made them
        shared["scheme"] = template.scheme
    out: list[int | None] = []
    for i, text in enumerate(texts):
        sh = _shingles(text, ngram)
        if not sh:
            out.append(None)
            continue
        m = MinHash(num_perm=num_perm, seed=seed, **shared)
        m.update_batch(sh)
        hits = lsh.query(m)
        out.append(min(hits) if hits else None)
        if not hits:
            lsh.insert(i, m)
    return out
