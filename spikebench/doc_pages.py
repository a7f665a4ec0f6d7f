"""The documentation written from the code, so that it cannot drift from it.

- ``docs/configuration.md``: every configuration key (:mod:`spikebench.config.reference`).
- The help of each command, embedded in the docs page of that command between the markers
  ``<!-- help: spikebench CMD -->`` and ``<!-- end help -->``, written by argparse from
  :func:`spikebench.cli.build_parser` at a fixed width.
- ``docs/api.md``: the public API, what ``spikebench`` and each of its packages export
  (their ``__all__``), each name with the first sentence of its docstring.
- The layout tables of ``docs/development.md``, between ``<!-- layout -->`` and
  ``<!-- end layout -->``: the repository's top-level folders and the package's modules, from
  the tree, each package and module described by the first sentence of its docstring.

``python -m spikebench.doc_pages`` rewrites them all (``make docs`` runs it); ``--check``
only compares, exiting 1 when a page differs. ``tests/test_docs.py`` fails when the
committed pages differ from what this writes now. This module sits beside the command
line, above every package: it imports them all.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import inspect
import os
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

from spikebench.config.reference import CONFIG_PAGE, DOCS, GENERATOR, config_reference

ROOT = DOCS.parent
PACKAGE = ROOT / "spikebench"
API_PAGE = "api.md"
LAYOUT_PAGE = "development.md"
HELP_WIDTH = 100  # columns the embedded help is wrapped to, whatever the terminal

_HELP_BLOCK = re.compile(
    r"(<!-- help: (?P<cmd>spikebench(?: [a-z-]+)?) -->\n)(?P<body>.*?)(<!-- end help -->)",
    re.DOTALL)
_LAYOUT_BLOCK = re.compile(r"(<!-- layout -->\n)(.*?)(<!-- end layout -->)", re.DOTALL)

# What each top-level folder of the repository holds. Rows come from the tree: a folder
# missing here fails the generator (and so tests/test_docs.py), as does one named here that
# is gone.
FOLDERS = {
    ".ci": "what CI runs: `.ci/run` (install, `make test`, `make mutations`) and "
           "`.ci/setup-services` (PostgreSQL, Chromium, Prometheus, Slurm)",
    "benchmarks": "the regression suites (`suites/*.toml`) and their baselines "
                  "(`baselines/*.json`) for `make bench`; the measurement scripts every "
                  "figure in these pages comes from",
    "docs": "this documentation; `mkdocs.yml` builds it into `site/` (git-ignored)",
    "examples": "training scripts of a team's own, swept as command trials: a nanoGPT-style "
                "CSV logger, a loop on the run API, a Hugging Face Trainer",
    "models": "model presets (TOML): `gpt-tiny`, `gpt-small`, `gpt-125m`",
    "monitoring": "the Grafana dashboard, the Prometheus alert rules and their promtool test",
    "reports": "generated reports (git-ignored, except `reports/example-default/`: the "
               "report of one `make sweep` run, with the study files it reads)",
    "results": "what runs write: `results/runs/<run-id>/`, `results/<study>/` (git-ignored)",
    "spikebench": "the package (below)",
    "sweeps": "sweep files (TOML): `default.toml` is what `make sweep` runs; the others are "
              "the `make sweep-*` scenarios",
    "tests": "the tests, one folder per package",
}


def _first_sentence(doc: str | None) -> str:
    """A docstring's first sentence, in Markdown: reST roles and ``literals`` as code."""
    if not doc:
        return ""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    para = re.sub(r":[a-z]+:`(~?)([^`]+)`",  # ~ shows the last name only, as Sphinx does
                  lambda m: f"`{m.group(2).split('.')[-1] if m.group(1) else m.group(2)}`", para)
    para = para.replace("``", "`")
    m = re.match(r"(.+?(?<!e\.g)(?<!i\.e)\.)(\s|$)", para)
    text = (m.group(1) if m else para).rstrip(":;,")
    return (text if text.endswith(".") else text + ".").replace("|", "\\|")


def _docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


# --- the command-line help -----------------------------------------------------------------


@contextlib.contextmanager
def _fixed_terminal() -> Iterator[None]:
    """argparse wraps to $COLUMNS; colour off (Python 3.14 colours help on a terminal)."""
    saved = {k: os.environ.get(k) for k in ("COLUMNS", "NO_COLOR", "PYTHON_COLORS")}
    os.environ.update(COLUMNS=str(HELP_WIDTH + 2), NO_COLOR="1", PYTHON_COLORS="0")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def parsers() -> dict[str, argparse.ArgumentParser]:
    """``{"spikebench": the top-level parser, "spikebench train": its subparser, ...}``."""
    from spikebench.cli import build_parser

    top = build_parser()
    out = {"spikebench": top}
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[f"spikebench {name}"] = sub
    return out


def command_help(command: str) -> str:
    """What ``COMMAND --help`` prints, wrapped to :data:`HELP_WIDTH` columns."""
    with _fixed_terminal():
        return parsers()[command].format_help()


def with_help(text: str) -> str:
    """``text`` with every embedded help block rewritten from the parser."""
    known = parsers()

    def fill(m: re.Match) -> str:
        cmd = m.group("cmd")
        if cmd not in known:
            raise SystemExit(f"help block for unknown command {cmd!r}")
        return m.group(1) + f"```text\n{command_help(cmd).rstrip()}\n```\n" + m.group(4)

    return _HELP_BLOCK.sub(fill, text)


def help_blocks(text: str) -> list[tuple[str, str]]:
    """The (command, body) of each embedded help block in ``text``."""
    return [(m.group("cmd"), m.group("body")) for m in _HELP_BLOCK.finditer(text)]


# --- the public API --------------------------------------------------------------------------


def packages() -> list[str]:
    """``spikebench`` and each of its packages (a folder with ``__init__.py``), sorted."""
    found = sorted(".".join(p.parent.relative_to(ROOT).parts)
                   for p in PACKAGE.rglob("__init__.py"))
    return [name for name in found if "__pycache__" not in name]


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "function"
    if inspect.ismodule(obj):
        return "module"
    return f"constant ({type(obj).__name__})"


def _what(obj: object, doc: str | None) -> str:
    """A name's line on the API page: its docstring's first sentence; a configuration
    section, its table; a constant, its value where it is short."""
    from spikebench.config.schema import Config

    sections = {cls: name for name, cls in typing.get_type_hints(Config).items()}
    if obj is Config:
        return ("A run's whole configuration, one dataclass per table "
                "([Configuration reference](configuration.md)).")
    if isinstance(obj, type) and obj in sections:
        name = sections[obj]
        return f"The `[{name}]` table ([Configuration reference](configuration.md#{name}))."
    if doc:
        return _first_sentence(doc)
    if _kind(obj).startswith("constant"):
        shown = ", ".join(map(str, obj)) if isinstance(obj, dict) else repr(obj)
        if len(shown) <= 90 and not isinstance(obj, Path):
            return ("Keys: " if isinstance(obj, dict) else "") + f"`{shown}`".replace("|", "\\|")
    return "(no docstring)"


def api_page() -> str:
    """The public API page, as Markdown."""
    parts = [f"""\
# Public API

What `spikebench` and each of its packages export: the names in each package's
`__all__`. Everything else (a module's own names, any name starting with `_`) is internal
and may change without notice; `tests/test_layers.py` checks that no package imports
another's `_private` names, and which package may import which.

> **Generated** from the packages' `__all__` and docstrings by `{GENERATOR}`,
> which `make docs` runs; do not edit it by hand. `tests/test_docs.py` fails when it differs
> from what the code writes.
"""]
    for name in packages():
        mod = importlib.import_module(name)
        parts.append(f"\n## `{name}`\n\n{_first_sentence(mod.__doc__)}\n\n")
        exported = getattr(mod, "__all__", None)
        if not exported:  # its modules: on the layout, which lists them from the tree
            parts.append("No `__all__`: the package itself exports nothing; its modules are "
                         "listed on [Development](development.md#layout) and named in its "
                         "docstring.\n")
            continue
        parts.append("| name | kind | what it is |\n|---|---|---|\n")
        for attr in sorted(exported, key=str.lower):
            obj = getattr(mod, attr)
            doc = inspect.getdoc(obj) if _kind(obj) in ("class", "function", "module") else ""
            if doc and doc.startswith(f"{obj.__name__}("):  # a dataclass's generated doc
                doc = ""
            parts.append(f"| `{attr}` | {_kind(obj)} | {_what(obj, doc)} |\n")
    return "".join(parts)


# --- the layout ------------------------------------------------------------------------------


def _tracked_top() -> set[str]:
    """The repository's top-level folders that git tracks (on disk, where git cannot say)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True, timeout=60).stdout
        return {line.split("/")[0] for line in out.splitlines() if "/" in line}
    except (OSError, subprocess.SubprocessError):
        return {p.name for p in ROOT.iterdir() if p.is_dir() and p.name in FOLDERS}


def layout_tables() -> str:
    """The two layout tables of ``docs/development.md``: folders, then the package."""
    top = _tracked_top()
    if set(FOLDERS) != top:
        raise SystemExit("spikebench.doc_pages.FOLDERS and the repository's folders differ: "
                         f"undescribed {sorted(top - set(FOLDERS))}, gone "
                         f"{sorted(set(FOLDERS) - top)}")
    tests = sorted(p.name for p in (ROOT / "tests").iterdir()
                   if p.is_dir() and not p.name.startswith(("_", ".")))
    rows = ["| path | what it holds |\n|---|---|\n"]
    for name in sorted(FOLDERS, key=lambda n: n.lstrip(".")):
        text = FOLDERS[name]
        if name == "tests":
            text += ": " + ", ".join(f"`tests/{t}/`" for t in tests)
        rows.append(f"| `{name}/` | {text} |\n")
    rows.append("\nThe package, `spikebench/`: each module and package with the first sentence "
                "of its docstring.\n\n| module | what it holds |\n|---|---|\n")
    for path in sorted(PACKAGE.iterdir()):
        if path.suffix == ".py":
            rows.append(f"| `{path.name}` | {_first_sentence(_docstring(path))} |\n")
        elif (path / "__init__.py").is_file():
            inner = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir()
                           if (p.suffix == ".py" and p.name != "__init__.py")
                           or (p / "__init__.py").is_file())
            rows.append(f"| `{path.name}/` | {_first_sentence(_docstring(path / '__init__.py'))}"
                        f" Modules: {', '.join(f'`{m}`' for m in inner)} |\n")
    return "".join(rows)


def with_layout(text: str) -> str:
    return _LAYOUT_BLOCK.sub(lambda m: m.group(1) + layout_tables() + m.group(3), text)


# --- writing ---------------------------------------------------------------------------------


def expected_pages(docs: Path = DOCS) -> dict[Path, str]:
    """Every generated page, or page with generated parts, as the code writes it now."""
    out = {docs / CONFIG_PAGE: config_reference(), docs / API_PAGE: api_page()}
    for page in sorted(docs.glob("*.md")):
        if page.name in (CONFIG_PAGE, API_PAGE):
            continue
        text = page.read_text(encoding="utf-8")
        new = with_layout(with_help(text)) if page.name == LAYOUT_PAGE else with_help(text)
        if new != text or help_blocks(text):
            out[page] = new
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=GENERATOR, description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a page differs from what the code writes")
    ap.add_argument("--docs", type=Path, default=DOCS, help="docs folder (default: docs/)")
    args = ap.parse_args(argv)
    stale = []
    for page, text in expected_pages(args.docs).items():
        old = page.read_text(encoding="utf-8") if page.exists() else None
        if old == text:
            continue
        stale.append(page)
        if not args.check:
            page.write_text(text, encoding="utf-8")
            print(f"wrote {page}")
    if args.check and stale:
        print("out of date: " + ", ".join(str(p) for p in stale)
              + f"; run `{GENERATOR}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
