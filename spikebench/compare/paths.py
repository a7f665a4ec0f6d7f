"""Where ``spikebench compare`` reads and where it writes, checked before anything is read
or written.

The inputs may not overlap (a folder and a folder or file inside it, the same folder twice,
or through a link): their runs would be read twice, into two groups. The output folder is
apart from every input (not one of them, inside one or inside an input file's folder, or
holding one): a comparison changes
nothing where it reads, and a later one never reads its scored runs as runs. An output
folder that already holds a report is replaced only where ``spikebench compare`` wrote it
(a study folder with :data:`~spikebench.compare.study.MARKER` in it). Paths are compared
resolved, so a link or ``./`` makes no difference.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from spikebench.errors import UserError

# What the report writes into OUT beside the study folder (build_report's files).
REPORT_FILES = ("report.md", "report.html")
REPORT_SUFFIXES = (".md", ".html", ".png")


def resolved(path: str | Path) -> Path:
    """``path`` absolute, links and ``..`` resolved (as far as it exists)."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):  # a link loop: compared as written
        return Path(path).expanduser().absolute()


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_inputs(paths: Iterable[str]) -> None:
    """One line for two paths that overlap: the same file or folder (also through a link)
    or one inside the other."""
    seen: list[tuple[str, Path]] = []
    for path in paths:
        if not str(path):
            raise UserError("PATH '': give a run's file or folder (an empty path is none)")
        mine = resolved(path)
        for other, theirs in seen:
            if mine == theirs:
                raise UserError(f"{path}: is {other} again (the same "
                                f"{'folder' if mine.is_dir() else 'file'}): its runs would "
                                "be read twice; give each path once")
            if _within(mine, theirs) or _within(theirs, mine):
                inner, outer = (path, other) if _within(mine, theirs) else (other, path)
                raise UserError(f"{inner}: is inside {outer}, also given: its runs would be "
                                "read twice, into two groups; give paths that do not overlap "
                                "(or the outer one with --group NAME=GLOB)")
        seen.append((str(path), mine))


def _ours(out: Path) -> bool:
    """``out`` holds a study folder spikebench compare wrote."""
    from spikebench.compare.study import MARKER

    try:
        return any((d / MARKER).is_file() for d in out.iterdir() if d.is_dir())
    except OSError:
        return False


def check_out(out: str | Path, name: str, inputs: Iterable[str | Path]) -> None:
    """One line for an output that would write into an input, hold one, replace files
    spikebench compare did not write, or is no folder; ``name`` (the study's folder in
    ``out``) may not be one of the report's files."""
    text = str(out)
    if not text.strip():
        raise UserError(f"--out {text!r}: give a folder for the report (an empty path would "
                        "write into the current folder)")
    low = name.lower()
    if low.endswith(REPORT_SUFFIXES):
        raise UserError(f"--name {name}: is the study's folder OUT/{name}, beside the "
                        "report's report.md, report.html and .png plots; give a name not "
                        "ending in .md, .html or .png")
    where = resolved(out)
    for path in inputs:
        given = resolved(path)
        # A log file is read from its folder: a later comparison of that folder would read
        # an output inside it as runs.
        folder = given if given.is_dir() or not given.exists() else given.parent
        if _within(where, folder):
            what = ("" if where == given else "inside " if folder == given
                    else "inside the folder of ")
            raise UserError(f"--out {text}: is {what}the input {path}: compare writes "
                            "nothing where it reads; give a folder apart from the inputs")
        if _within(given, where):
            raise UserError(f"--out {text}: holds the input {path}: a later comparison "
                            "would read this one's scored runs as runs; give a folder apart "
                            "from the inputs")
    above = next((d for d in [where, *where.parents] if d.exists()), where)
    if not above.is_dir():
        raise UserError(f"--out {text}: {'' if above == where else f'{above} is '}not a folder")
    if where.is_dir() and not _ours(where):
        theirs = [f for f in REPORT_FILES if (where / f).exists()]
        theirs += sorted(p.name for p in where.glob("*.png"))[:3]
        if theirs:
            raise UserError(f"--out {text}: holds {', '.join(theirs)}, which spikebench "
                            "compare did not write (no comparison's study in it); give "
                            "another --out")
