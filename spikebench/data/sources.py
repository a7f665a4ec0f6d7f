"""Reading a corpus source into tokens: the stdlib, .txt/.jsonl files or folders, nanoGPT .bin.

Text sources become bytes (vocabulary 256), joined by :data:`DOC_SEP` and capped at
``data.max_bytes``; ``.bin`` files stay read-only ``np.memmap`` arrays of uint16 ids, so
multi-GB token files cost no RAM. Every problem raises a one-line :class:`UserError` naming
the key and value.
"""

from __future__ import annotations

import hashlib
import json
import os
import sysconfig
from pathlib import Path
from typing import NamedTuple

import numpy as np

from spikebench.config import Config
from spikebench.errors import UserError

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


class _CappedBytes:
    """Documents joined by :data:`DOC_SEP`, cut off at ``cap`` bytes (the last one truncated).

    Empty documents are skipped so they do not produce doubled separators. The result may
    fall up to ``len(DOC_SEP)`` bytes short of ``cap`` rather than end on a bare separator.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0
        self.domains: list[tuple[int, str]] = []  # (offset where a document begins, domain)

    @property
    def room(self) -> int:
        """Bytes of document that still fit, after the separator the next one needs."""
        return max(0, self.cap - self.size - (len(DOC_SEP) if self.parts else 0))

    @property
    def full(self) -> bool:
        # Also full when only a separator would fit: never end on a dangling separator.
        return self.room == 0

    def add(self, doc: bytes, domain: str = ".") -> bool:
        """Append ``doc`` (or as much as fits); return whether any of it was used."""
        if not doc or self.full:
            return False
        sep = DOC_SEP if self.parts else b""
        piece = sep + doc[: self.room]
        self.domains.append((self.size + len(sep), domain))
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


class Text(NamedTuple):
    """A text source read into bytes: ``domains`` lists ``(offset, domain)`` where each
    document begins (see :mod:`spikebench.data.clean.domains`)."""

    data: bytes
    n_files: int
    kind: str  # "stdlib", "text" or "jsonl"
    path: str
    domains: list[tuple[int, str]]


def _folder_domain(root: Path, path: Path) -> str:
    """A file's domain: its top-level folder under ``root``, ``"."`` for files at the root."""
    parts = path.relative_to(root).parts if path != root else ()
    return parts[0] if len(parts) > 1 else "."


def _read_txt(path: Path, out: _CappedBytes, domain: str = ".") -> bool:
    with open(path, "rb") as f:
        # Read only what still fits: a huge file under a small cap costs nothing.
        return out.add(f.read(out.room), domain)


def _read_jsonl(path: Path, out: _CappedBytes, text_field: str, key: str, source: str,
                domain: str = ".", domain_field: str = "") -> bool:
    """Append each line's ``obj[text_field]`` as a document; stop reading once ``out`` is full.

    With ``domain_field``, the document's domain is that string field (it must exist), else
    ``domain``. Blank lines are skipped. Lines after the cap is reached are not read, hence
    not checked.
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
            except (ValueError, RecursionError):  # bad JSON, a 5,000-digit int, deep nesting
                raise UserError(f"{where} is not valid JSON (or nests or counts past "
                                "what a corpus line may)") from None
            if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
                raise UserError(
                    f"{where} has no string field {text_field!r} (set data.text_field)"
                )
            if domain_field:
                if not isinstance(obj.get(domain_field), str):
                    raise UserError(f"clean.domain_field = {domain_field!r}: {where} has no "
                                    f"string field {domain_field!r} (each document's domain)")
                domain = obj[domain_field]
            used |= out.add(obj[text_field].encode("utf-8", errors="replace"), domain)
    return used


def _stdlib_bytes(cap: int, key: str) -> tuple[_CappedBytes, int, str]:
    """The stdlib's ``.py`` files (tests, idlelib, site-packages skipped) up to ``cap`` bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = _walk_files(root, lambda name: name.endswith(".py"), STDLIB_SKIP_DIRS)
    if not files:
        raise UserError(f"{key} = 'stdlib': no .py files under {str(root)!r}")
    out = _CappedBytes(cap)
    n_files = 0
    for path in files:
        if out.full:
            break
        n_files += _read_txt(path, out, _folder_domain(root, path))
    return out, n_files, str(root)


def _text_bytes(path: Path, cap: int, text_field: str, key: str, source: str,
                domain_field: str = ""):
    """Bytes of a .txt/.jsonl file or of all such files in a folder, up to ``cap`` bytes.

    Returns ``(out, n_files, kind)``; kind is ``"jsonl"`` when every file used is .jsonl,
    else ``"text"``. With ``domain_field`` every file must be .jsonl.
    """
    if path.is_dir():
        files = _walk_files(path, lambda name: name.lower().endswith(TEXT_SUFFIXES))
        if not files:
            raise UserError(f"{key} = {source!r}: no .txt or .jsonl files in this folder")
    elif path.suffix.lower() in TEXT_SUFFIXES:
        files = [path]
    else:
        raise UserError(
            f"{key} = {source!r}: unsupported file type {path.suffix!r} (use 'stdlib', a "
            ".txt/.jsonl file or folder, or a nanoGPT .bin)"
        )
    out = _CappedBytes(cap)
    used: list[Path] = []
    for f in files:
        if out.full:
            break
        domain = _folder_domain(path, f) if path.is_dir() else f.name
        try:
            if f.suffix.lower() == ".jsonl":
                hit = _read_jsonl(f, out, text_field, key, source, domain, domain_field)
            elif domain_field:
                raise UserError(f"clean.domain_field = {domain_field!r}: {f.name} is not "
                                ".jsonl, so it has no domain field (use .jsonl files, or "
                                "clean.domain_field = '' for folder domains)")
            else:
                hit = _read_txt(f, out, domain)
        except OSError as e:
            raise UserError(
                f"{key} = {source!r}: cannot read {str(f)!r} ({e.strerror})"
            ) from None
        if hit:
            used.append(f)
    kind = "jsonl" if used and all(f.suffix.lower() == ".jsonl" for f in used) else "text"
    return out, len(used), kind


def read_text_source(source: str, cfg: Config, key: str, domain_field: str = "") -> Text:
    """A text source (``"stdlib"``, a .txt/.jsonl file or folder) read into bytes, capped at
    ``data.max_bytes``, with each document's domain; errors name ``key``."""
    cap = cfg.data.max_bytes
    if source == "stdlib":
        out, n_files, root = _stdlib_bytes(cap, key)
        return Text(out.value(), n_files, "stdlib", root, out.domains)
    path = Path(source).expanduser()
    if not path.exists():
        raise UserError(
            f"{key} = {source!r}: no such file or folder (use 'stdlib', a .txt/.jsonl file or "
            "folder, or a nanoGPT .bin)"
        )
    out, n_files, kind = _text_bytes(path, cap, cfg.data.text_field, key, source, domain_field)
    if not out.size:
        raise UserError(f"{key} = {source!r}: empty (no text in the files read)")
    return Text(out.value(), n_files, kind, str(path.resolve()), out.domains)


# ----------------------------------------------------------------------------------------
# nanoGPT .bin token files.


def fingerprint(paths: list[Path]) -> tuple[str, str]:
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


def open_bin(path: Path, key: str, source: str) -> np.memmap:
    size = path.stat().st_size
    if size == 0:
        raise UserError(f"{key} = {source!r}: {path.name} is empty")
    if size % 2:
        raise UserError(
            f"{key} = {source!r}: {path.name} has {size} bytes, not a whole number of uint16 tokens"
        )
    return np.memmap(path, dtype=np.uint16, mode="r")


def max_token(parts: list[np.ndarray]) -> int:
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
