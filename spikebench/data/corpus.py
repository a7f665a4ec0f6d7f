"""A corpus as 1-D token arrays, split into a train head and a validation tail.

``data.corpus`` names the source (see :mod:`.sources`): ``"stdlib"`` (the running Python's
standard library source, present on every machine; its SHA-256 is recorded because it
differs between Python versions), a ``.txt``/``.jsonl`` file or folder, or a nanoGPT
``.bin``. ``faults.target = "corpus"`` plants bad segments in the train split at recorded
positions (:func:`spikebench.data.faults.contaminate`).
"""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from spikebench.config import Config
from spikebench.data.clean.domains import PLANTED, DomainMap
from spikebench.data.clean.run import clean
from spikebench.data.clean.run import enabled as clean_enabled
from spikebench.data.faults import contaminate, contamination_requested
from spikebench.data.sources import (
    BYTE_VOCAB,
    fingerprint,
    max_token,
    open_bin,
    read_text_source,
)
from spikebench.errors import UserError


@dataclass
class Corpus:
    """Token ids of one corpus, split into a train head and a contiguous validation tail.

    ``train``/``val`` are ``torch.uint8`` tensors for byte corpora and ``np.memmap`` (uint16)
    for ``.bin`` corpora. ``meta`` is JSON-serialisable; ``meta["contamination"]`` lists the
    planted ``{"start", "end", "kind"}`` segments as token offsets into ``train`` (end
    exclusive), empty when nothing was planted.
    """

    train: torch.Tensor | np.ndarray
    val: torch.Tensor | np.ndarray
    vocab_size: int
    meta: dict = field(default_factory=dict)


def _load_bin(path: Path, cfg: Config, key: str, source: str):
    """``(train, val, meta)`` for a .bin file; a ``val.bin`` next to a ``train.bin`` is the
    validation split, otherwise the tail of the file is."""
    tokens = open_bin(path, key, source)
    sibling = path.with_name("val.bin")
    files = [path]
    if path.name == "train.bin" and sibling.is_file():
        train, val = tokens, open_bin(sibling, key, source)
        files.append(sibling)
    else:
        train, val = _split(tokens, cfg.data.val_fraction)
    sha, scope = fingerprint(files)
    meta = {
        "kind": "bin",
        "path": str(path.resolve()),
        "n_files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "sha256": sha,
        "sha256_scope": scope,
    }
    return train, val, meta



def _split(tokens, val_fraction: float):
    """Train head and validation tail; the tail holds ``int(n * val_fraction)`` tokens."""
    n_val = int(len(tokens) * val_fraction)
    return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]


def _check_lengths(train, val, cfg: Config) -> None:
    need = 2 * (cfg.data.seq_len + 1)
    for name, part in (("train", train), ("val", val)):
        if len(part) < need:
            raise UserError(
                f"data.corpus = {cfg.data.corpus!r}: the {name} split has {len(part)} tokens, "
                f"needs >= {need} = 2 * (data.seq_len + 1); use more text (data.max_bytes) "
                "or a larger data.val_fraction"
            )



def domain_map(domains: list[tuple[int, str]], planted: list[dict]) -> DomainMap:
    """Each document's domain in the training split; planted ``domain`` segments are a
    domain of their own (:data:`~spikebench.data.clean.domains.PLANTED`)."""
    starts, labels = zip(*domains, strict=True) if domains else ((0,), (".",))
    dm = DomainMap((0, *starts[1:]), labels)
    return dm.overlay([s for s in planted if s["kind"] == "domain"], PLANTED)


def load_corpus(cfg: Config, cache_home: str | Path | None = None) -> Corpus:
    """Load ``cfg.data.corpus`` into a :class:`Corpus`, contaminating it if configured.

    ``cache_home``: the folder an automatic cleaning cache (``clean.cache_dir = "auto"``)
    goes into, as ``.clean-cache/`` (default ``run.out_dir``): the run's output folder.

    ``meta`` holds: source, kind (``stdlib``/``text``/``jsonl``/``bin``), path, n_files,
    bytes (bytes read, or the .bin file sizes), sha256 (of the clean bytes, before any
    contamination; for big .bin files a head/tail fingerprint, see ``sha256_scope``),
    train_tokens, val_tokens and contamination. For .bin corpora ``vocab_size`` is taken from
    ``model.vocab_size`` and checked against the ids in the file (see :func:`max_token`).
    """
    key, source = "data.corpus", cfg.data.corpus
    path = Path(source).expanduser()
    if source != "stdlib" and path.suffix.lower() == ".bin" and not path.is_dir():
        if not path.is_file():
            raise UserError(f"{key} = {source!r}: no such file")
        if contamination_requested(cfg):
            raise UserError(
                f"faults.target = 'corpus': cannot plant contamination in a read-only .bin "
                f"memmap (data.corpus = {source!r}); use faults.target = 'stream'"
            )
        train, val, meta = _load_bin(path, cfg, key, source)
        vocab = cfg.model.vocab_size
        domains: list[tuple[int, str]] = []
    else:
        balancing = cfg.clean.max_domain_share is not None
        text = read_text_source(source, cfg, key, cfg.clean.domain_field if balancing else "")
        data, kind, domains = text.data, text.kind, text.domains
        meta = {
            "kind": kind,
            "path": text.path,
            "n_files": text.n_files,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        if kind == "stdlib":
            meta["python"] = platform.python_version()
        # bytearray: a writable buffer, so contamination can edit train in place.
        tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        train, val = _split(tokens, cfg.data.val_fraction)
        vocab = BYTE_VOCAB
    _check_lengths(train, val, cfg)
    if meta["kind"] == "bin":
        top = max_token([train, val])
        if top >= vocab:
            raise UserError(f"{key} = {source!r}: holds token id {top}, but model.vocab_size "
                              f"= {vocab}; set model.vocab_size > {top} (50304 for GPT-2 ids)")
    meta = {"source": source, **meta, "train_tokens": len(train), "val_tokens": len(val)}
    meta["contamination"] = contaminate(train, cfg) if contamination_requested(cfg) else []
    if clean_enabled(cfg.clean):
        if meta["kind"] == "bin":
            raise UserError(f"clean: cleans text corpora; data.corpus = {source!r} is a .bin "
                            "token file")
        home = Path(cfg.run.out_dir if cache_home is None else cache_home)
        data, meta["cleaning"] = clean(bytes(train.numpy()), cfg.clean, meta["contamination"],
                                       domain_map(domains, meta["contamination"]),
                                       cache_home=home)
        train = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        meta["train_tokens"] = len(train)
        if len(train) < 2 * (cfg.data.seq_len + 1):
            raise UserError(f"clean: left {len(train)} bytes of the training split, fewer than "
                            f"the {2 * (cfg.data.seq_len + 1)} = 2 * (data.seq_len + 1) a run "
                            "needs; loosen the thresholds or turn a cleaner off")
    return Corpus(train=train, val=val, vocab_size=vocab, meta=meta)
