"""Corpora as 1-D token arrays, split into train and validation, optionally contaminated.

Three sources, chosen by ``data.corpus``:

* ``"stdlib"`` (default): the ``.py`` source of the running Python's standard library, a
  byte-level corpus present on every machine with no download. Its content depends on the
  Python version, so the SHA-256 of the exact bytes used is recorded in ``Corpus.meta``.
* a ``.txt`` / ``.jsonl`` file, or a folder searched recursively for them: byte-level tokens.
* a nanoGPT-style ``.bin`` file of uint16 token ids, memory-mapped read-only.

Byte corpora become ``torch.uint8`` tensors (vocab 256); ``.bin`` corpora stay
``np.memmap`` arrays so multi-GB token files cost no RAM. Every user-input problem raises a
one-line :class:`ConfigError` naming the key and value.

``faults.target = "corpus"`` plants segments of bad text into the train split at recorded
positions (see :func:`contaminate`), so data-cleaning strategies have something real to find.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import platform
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from spikebench.config import Config, ConfigError

BYTE_VOCAB = 256
# Joins files and .jsonl documents, so a model sees a paragraph break between documents.
DOC_SEP = b"\n\n"
TEXT_SUFFIXES = (".txt", ".jsonl")
# Tests are huge and repetitive, idlelib is GUI code, site-packages is not the stdlib at all.
STDLIB_SKIP_DIRS = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idlelib", "__pycache__"}
)
# Larger .bin files are fingerprinted (size + first and last MiB) instead of fully hashed:
# hashing tens of GB would dominate start-up time.
FULL_HASH_LIMIT = 64 << 20
_HASH_CHUNK = 1 << 20


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


# ----------------------------------------------------------------------------------------
# Reading text sources into bytes.


class _CappedBytes:
    """Documents joined by :data:`DOC_SEP`, cut off at ``cap`` bytes (the last one truncated).

    Empty documents are skipped so they do not produce doubled separators. The result may
    fall up to ``len(DOC_SEP)`` bytes short of ``cap`` rather than end on a bare separator.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0

    @property
    def room(self) -> int:
        """Bytes of document that still fit, after the separator the next one needs."""
        return max(0, self.cap - self.size - (len(DOC_SEP) if self.parts else 0))

    @property
    def full(self) -> bool:
        # Also full when only a separator would fit: never end on a dangling separator.
        return self.room == 0

    def add(self, doc: bytes) -> bool:
        """Append ``doc`` (or as much as fits); return whether any of it was used."""
        if not doc or self.full:
            return False
        piece = (DOC_SEP if self.parts else b"") + doc[: self.room]
        self.parts.append(piece)
        self.size += len(piece)
        return True

    def value(self) -> bytes:
        return b"".join(self.parts)


def _walk_files(root: Path, keep, skip_dirs=frozenset()) -> list[Path]:
    """Files under ``root`` accepted by ``keep(name)``, sorted by relative POSIX path.

    Sorting the full relative paths (not per directory) makes the order independent of the
    file system's listing order. Symlinked directories are not followed (no loops).
    """
    rels = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip_dirs]
        rel_dir = Path(dirpath).relative_to(root)
        rels += [(rel_dir / f).as_posix() for f in filenames if keep(f)]
    return [root / r for r in sorted(rels)]


def _read_txt(path: Path, out: _CappedBytes) -> bool:
    with open(path, "rb") as f:
        # Read only what still fits: a huge file under a small cap costs nothing.
        return out.add(f.read(out.room))


def _read_jsonl(path: Path, out: _CappedBytes, text_field: str, key: str, source: str) -> bool:
    """Append each line's ``obj[text_field]`` as a document; stop reading once ``out`` is full.

    Blank lines are skipped. Lines after the cap is reached are not read, hence not checked.
    """
    used = False
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if out.full:
                break
            if not line.strip():
                continue
            where = f"{key} = {source!r}: {path.name} line {lineno}"
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise ConfigError(f"{where} is not valid JSON") from None
            if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
                raise ConfigError(
                    f"{where} has no string field {text_field!r} (set data.text_field)"
                )
            used |= out.add(obj[text_field].encode("utf-8", errors="replace"))
    return used


def _stdlib_bytes(cap: int, key: str) -> tuple[bytes, int, str]:
    """The stdlib's ``.py`` files (tests, idlelib, site-packages skipped) up to ``cap`` bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = _walk_files(root, lambda name: name.endswith(".py"), STDLIB_SKIP_DIRS)
    if not files:
        raise ConfigError(f"{key} = 'stdlib': no .py files under {str(root)!r}")
    out = _CappedBytes(cap)
    n_files = 0
    for path in files:
        if out.full:
            break
        n_files += _read_txt(path, out)
    return out.value(), n_files, str(root)


def _text_bytes(path: Path, cap: int, text_field: str, key: str, source: str):
    """Bytes of a .txt/.jsonl file or of all such files in a folder, up to ``cap`` bytes.

    Returns ``(data, n_files, kind)``; kind is ``"jsonl"`` when every file used is .jsonl,
    else ``"text"``.
    """
    if path.is_dir():
        files = _walk_files(path, lambda name: name.lower().endswith(TEXT_SUFFIXES))
        if not files:
            raise ConfigError(f"{key} = {source!r}: no .txt or .jsonl files in this folder")
    elif path.suffix.lower() in TEXT_SUFFIXES:
        files = [path]
    else:
        raise ConfigError(
            f"{key} = {source!r}: unsupported file type {path.suffix!r} (use 'stdlib', a "
            ".txt/.jsonl file or folder, or a nanoGPT .bin)"
        )
    out = _CappedBytes(cap)
    used: list[Path] = []
    for f in files:
        if out.full:
            break
        try:
            if f.suffix.lower() == ".jsonl":
                hit = _read_jsonl(f, out, text_field, key, source)
            else:
                hit = _read_txt(f, out)
        except OSError as e:
            raise ConfigError(
                f"{key} = {source!r}: cannot read {str(f)!r} ({e.strerror})"
            ) from None
        if hit:
            used.append(f)
    kind = "jsonl" if used and all(f.suffix.lower() == ".jsonl" for f in used) else "text"
    return out.value(), len(used), kind


def read_text_source(source: str, cfg: Config, key: str) -> tuple[bytes, int, str, str]:
    """Bytes of a text source (``"stdlib"``, a .txt/.jsonl file or folder), capped at
    ``data.max_bytes``. Returns ``(data, n_files, kind, path)``; errors name ``key``."""
    cap = cfg.data.max_bytes
    if source == "stdlib":
        data, n_files, root = _stdlib_bytes(cap, key)
        return data, n_files, "stdlib", root
    path = Path(source).expanduser()
    if not path.exists():
        raise ConfigError(
            f"{key} = {source!r}: no such file or folder (use 'stdlib', a .txt/.jsonl file or "
            "folder, or a nanoGPT .bin)"
        )
    data, n_files, kind = _text_bytes(path, cap, cfg.data.text_field, key, source)
    if not data:
        raise ConfigError(f"{key} = {source!r}: empty (no text in the files read)")
    return data, n_files, kind, str(path.resolve())


# ----------------------------------------------------------------------------------------
# nanoGPT .bin token files.


def _fingerprint(paths: list[Path]) -> tuple[str, str]:
    """SHA-256 of the files' bytes, or of (size, first MiB, last MiB) for files above
    :data:`FULL_HASH_LIMIT`. Returns ``(hexdigest, "full" | "head_tail")``."""
    h = hashlib.sha256()
    scope = "full"
    for p in paths:
        size = p.stat().st_size
        with open(p, "rb") as f:
            if size <= FULL_HASH_LIMIT:
                while chunk := f.read(_HASH_CHUNK):
                    h.update(chunk)
            else:
                scope = "head_tail"
                h.update(str(size).encode())
                h.update(f.read(_HASH_CHUNK))
                f.seek(max(0, size - _HASH_CHUNK))
                h.update(f.read(_HASH_CHUNK))
    return h.hexdigest(), scope


def _open_bin(path: Path, key: str, source: str) -> np.memmap:
    size = path.stat().st_size
    if size == 0:
        raise ConfigError(f"{key} = {source!r}: {path.name} is empty")
    if size % 2:
        raise ConfigError(
            f"{key} = {source!r}: {path.name} has {size} bytes, not a whole number of uint16 tokens"
        )
    return np.memmap(path, dtype=np.uint16, mode="r")


def _max_token(parts: list[np.ndarray]) -> int:
    """Largest token id of the memmaps, read whole up to :data:`FULL_HASH_LIMIT` bytes each;
    beyond that, of their first and last MiB (a file with the wrong vocabulary has large ids
    everywhere; :class:`~spikebench.batches.BatchStream` checks every batch of the rest)."""
    n = _HASH_CHUNK // 2
    top = 0
    for part in parts:
        if not len(part):
            continue  # an empty split is refused by _check_lengths, with its own message
        if part.nbytes <= FULL_HASH_LIMIT:
            top = max(top, int(part.max()))
        else:
            top = max(top, int(part[:n].max()), int(part[-n:].max()))
    return top


def _load_bin(path: Path, cfg: Config, key: str, source: str):
    """``(train, val, meta)`` for a .bin file; a ``val.bin`` next to a ``train.bin`` is the
    validation split, otherwise the tail of the file is."""
    tokens = _open_bin(path, key, source)
    sibling = path.with_name("val.bin")
    files = [path]
    if path.name == "train.bin" and sibling.is_file():
        train, val = tokens, _open_bin(sibling, key, source)
        files.append(sibling)
    else:
        train, val = _split(tokens, cfg.data.val_fraction)
    sha, scope = _fingerprint(files)
    meta = {
        "kind": "bin",
        "path": str(path.resolve()),
        "n_files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "sha256": sha,
        "sha256_scope": scope,
    }
    return train, val, meta


# ----------------------------------------------------------------------------------------
# Splitting, checks, loading.


def _split(tokens, val_fraction: float):
    """Train head and validation tail; the tail holds ``int(n * val_fraction)`` tokens."""
    n_val = int(len(tokens) * val_fraction)
    return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]


def _check_lengths(train, val, cfg: Config) -> None:
    need = 2 * (cfg.data.seq_len + 1)
    for name, part in (("train", train), ("val", val)):
        if len(part) < need:
            raise ConfigError(
                f"data.corpus = {cfg.data.corpus!r}: the {name} split has {len(part)} tokens, "
                f"needs >= {need} = 2 * (data.seq_len + 1); use more text (data.max_bytes) "
                "or a larger data.val_fraction"
            )


def contamination_requested(cfg: Config) -> bool:
    return cfg.faults.target == "corpus" and cfg.faults.burst != "none"


def load_corpus(cfg: Config) -> Corpus:
    """Load ``cfg.data.corpus`` into a :class:`Corpus`, contaminating it if configured.

    ``meta`` holds: source, kind (``stdlib``/``text``/``jsonl``/``bin``), path, n_files,
    bytes (bytes read, or the .bin file sizes), sha256 (of the clean bytes, before any
    contamination; for big .bin files a head/tail fingerprint, see ``sha256_scope``),
    train_tokens, val_tokens and contamination. For .bin corpora ``vocab_size`` is taken from
    ``model.vocab_size`` and checked against the ids in the file (see :func:`_max_token`).
    """
    key, source = "data.corpus", cfg.data.corpus
    path = Path(source).expanduser()
    if source != "stdlib" and path.suffix.lower() == ".bin" and not path.is_dir():
        if not path.is_file():
            raise ConfigError(f"{key} = {source!r}: no such file")
        if contamination_requested(cfg):
            raise ConfigError(
                f"faults.target = 'corpus': cannot plant contamination in a read-only .bin "
                f"memmap (data.corpus = {source!r}); use faults.target = 'stream'"
            )
        train, val, meta = _load_bin(path, cfg, key, source)
        vocab = cfg.model.vocab_size
    else:
        data, n_files, kind, where = read_text_source(source, cfg, key)
        meta = {
            "kind": kind,
            "path": where,
            "n_files": n_files,
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
        top = _max_token([train, val])
        if top >= vocab:
            raise ConfigError(f"{key} = {source!r}: holds token id {top}, but model.vocab_size "
                              f"= {vocab}; set model.vocab_size > {top} (50304 for GPT-2 ids)")
    meta = {"source": source, **meta, "train_tokens": len(train), "val_tokens": len(val)}
    meta["contamination"] = contaminate(train, cfg) if contamination_requested(cfg) else []
    return Corpus(train=train, val=val, vocab_size=vocab, meta=meta)


# ----------------------------------------------------------------------------------------
# Fault text, shared with the batch stream.


def numeric_table_text(rng: np.random.Generator, n_bytes: int) -> bytes:
    """``n_bytes`` of CSV-like numeric tables ("12.5,3,-0.75\\n" rows), a domain far from
    prose or code. Each table has its own column count and per-column decimals; tables are
    separated by a blank line. Deterministic given ``rng``'s state."""
    parts: list[bytes] = []
    size = 0
    while size < n_bytes:
        n_rows, n_cols = int(rng.integers(8, 64)), int(rng.integers(2, 9))
        decimals = rng.integers(0, 4, n_cols)
        scale = 10.0 ** rng.integers(0, 4, n_cols)
        values = rng.standard_normal((n_rows, n_cols)) * scale
        rows = (
            ",".join(f"{v:.{d}f}" for v, d in zip(row, decimals, strict=True)) for row in values
        )
        table = ("\n".join(rows) + "\n\n").encode()
        parts.append(table)
        size += len(table)
    return b"".join(parts)[:n_bytes]


def domain_text(cfg: Config, rng: np.random.Generator, min_bytes: int) -> bytes:
    """Text of another domain for the ``domain`` burst, at least ``min_bytes`` long.

    ``faults.domain_corpus`` (any text source, ``"stdlib"`` included, capped at
    ``data.max_bytes``) repeated as needed to reach ``min_bytes``; when empty, generated
    numeric tables drawn from ``rng``.
    """
    source = cfg.faults.domain_corpus
    if not source:
        return numeric_table_text(rng, min_bytes)
    if Path(source).suffix.lower() == ".bin":
        raise ConfigError(f"faults.domain_corpus = {source!r}: must be text, not a .bin file")
    data = read_text_source(source, cfg, "faults.domain_corpus")[0]
    return data * math.ceil(min_bytes / len(data))


def contaminate(train: torch.Tensor, cfg: Config) -> list[dict]:
    """Overwrite ~``faults.corpus_share`` of ``train`` (in place) with bad segments.

    ``round(corpus_share * n / segment_bytes)`` segments (at least 1, at most ``n //
    segment_bytes``) of ``segment_bytes`` tokens each, non-overlapping (they may touch),
    uniformly placed. Content by ``faults.burst``: ``random_bytes`` uniform bytes;
    ``repeat`` one segment-sized window of the clean train split, copied into every segment;
    ``domain`` windows of :func:`domain_text`. Segments replace tokens, so lengths and the
    validation split are unchanged. All draws come from one RNG seeded with
    ``derive_seed(train.seed, "faults")``: positions first, then content. Returns the
    segments as ``{"start", "end", "kind"}`` token offsets (end exclusive), sorted by start.
    """
    f = cfg.faults
    n, seg = len(train), f.segment_bytes
    if seg > n:
        raise ConfigError(f"faults.segment_bytes = {seg}: must be <= the train split ({n} tokens)")
    rng = np.random.default_rng(derive_seed(cfg.train.seed, "faults"))
    n_seg = min(max(1, round(f.corpus_share * n / seg)), n // seg)
    # Sorted gaps in the free space, shifted by the segments before them: no overlaps.
    gaps = np.sort(rng.integers(0, n - n_seg * seg + 1, n_seg))
    starts = gaps + np.arange(n_seg) * seg
    content = _segment_content(f.burst, n_seg, seg, train, cfg, rng)
    idx = torch.from_numpy(starts[:, None] + np.arange(seg))
    train[idx] = torch.from_numpy(content)
    return [{"start": int(s), "end": int(s) + seg, "kind": f.burst} for s in starts]


def _segment_content(kind, n_seg, seg, train, cfg, rng) -> np.ndarray:
    """``(n_seg, seg)`` uint8 contents for :func:`contaminate`."""
    if kind == "random_bytes":
        return rng.integers(0, BYTE_VOCAB, (n_seg, seg), dtype=np.uint8)
    if kind == "repeat":
        at = int(rng.integers(0, len(train) - seg + 1))
        doc = train[at : at + seg].numpy().copy()
        return np.broadcast_to(doc, (n_seg, seg)).copy()
    if kind == "domain":
        text = np.frombuffer(domain_text(cfg, rng, n_seg * seg), dtype=np.uint8)
        offsets = rng.integers(0, len(text) - seg + 1, n_seg)
        return text[offsets[:, None] + np.arange(seg)]
    raise ValueError(f"unknown burst kind {kind!r}")
