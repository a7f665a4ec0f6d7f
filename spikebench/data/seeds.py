"""Seed derivation: every random stream of a run named and derived from ``train.seed``.

Model init, dropout, each step's batch and each fault draw from their own stream, so a
change to one strategy never shifts the randomness of another (paired comparisons), and a
resumed run can re-create any stream from the seed and a name.
"""

from __future__ import annotations

import hashlib
import numbers


def derive_seed(seed: int, *names: object) -> int:
    """A stable 63-bit seed for the random stream named ``names`` under ``seed``.

    SHA-256 of ``repr((seed, *names))``, so it is identical across processes, machines and
    Python versions (unlike ``hash()``). Integers are normalised to ``int`` first so that
    ``np.int64(3)`` and ``3`` name the same stream. 63 bits fit both ``torch.manual_seed``
    and ``numpy.random.default_rng``.
    """

    def norm(v: object) -> object:
        return int(v) if isinstance(v, numbers.Integral) and not isinstance(v, bool) else v

    key = repr(tuple(norm(v) for v in (seed, *names))).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1
