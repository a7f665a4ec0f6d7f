"""The documentation stays true to the code: README.md and docs/.

- Every ``spikebench ...`` command line in a fenced code block parses with the real parser
  (so a renamed or removed flag fails here, not in a reader's terminal), ``--help`` of it
  exits 0, and a block that shows ``--dry-run`` runs it; every ``make TARGET`` is a target.
- The generated pages (the configuration reference, each command's embedded ``--help``,
  the public API, the layout) equal what ``python -m spikebench.doc_pages`` writes now.
- Every repository path written in the docs (``spikebench/...``, ``tests/...``, ...) exists.
- README.md is at most 200 lines; every docs page is in mkdocs.yml's nav; every relative
  link and image points to a file (and a heading, for an anchor); ``mkdocs build
  --strict`` succeeds where MkDocs is installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from spikebench import cli, doc_pages
from spikebench.config import reference
from spikebench.config.schema import Config

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
DOC_FILES = [ROOT / "README.md", *PAGES]

FENCE = re.compile(r"^\s*(```|~~~)")
ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
COMMAND = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*"
                     r"(?:spikebench|torchrun|python3? -m spikebench|make)(?:\s|$)")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def code_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each fenced code block."""
    blocks, current, start, fence = [], None, 0, ""
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if current is None:
            if m:
                current, start, fence = [], n + 1, m.group(1)
        elif m and line.strip() == fence:
            blocks.append((start, current))
            current = None
        else:
            current.append(line)
    return blocks


def command_lines(path: Path) -> list[tuple[str, str]]:
    """(where, command line) of every command shown in a code block of ``path``: in a block
    with ``$ `` prompts only the prompted lines (the rest is output), else every line;
    backslash continuations joined."""
    out = []
    for start, lines in code_blocks(path.read_text(encoding="utf-8")):
        joined: list[tuple[int, str]] = []
        for i, line in enumerate(lines):
            if joined and joined[-1][1].endswith("\\"):
                joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
            else:
                joined.append((start + i, line.strip()))
        prompted = any(text.startswith("$ ") for _, text in joined)
        for n, text in joined:
            if prompted:
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            if COMMAND.match(text):
                out.append((f"{_rel(path)}:{n}", text))
    return out


def spikebench_argv(line: str) -> list[str] | None:
    """The arguments after ``spikebench`` in a command line, or None for another command."""
    words = shlex.split(line, comments=True)
    while words and ENV.match(words[0]):
        words.pop(0)
    if words[:1] == ["spikebench"]:
        return words[1:]
    if words[:1] in (["torchrun"], ["python"], ["python3"]) and "-m" in words:
        i = words.index("-m")
        if words[i + 1:i + 2] == ["spikebench"]:
            return words[i + 2:]
    return None


ALL_COMMANDS = [c for f in DOC_FILES for c in command_lines(f)]
SPIKEBENCH = [(where, line) for where, line in ALL_COMMANDS if spikebench_argv(line) is not None]
MAKE = [(where, line) for where, line in ALL_COMMANDS if line.startswith("make")]


def test_the_docs_show_commands():
    """The extraction finds what the pages show (a broken fence parser would pass all)."""
    assert len(SPIKEBENCH) >= 30 and len(MAKE) >= 5
    shown = {spikebench_argv(line)[0] for _, line in SPIKEBENCH if spikebench_argv(line)}
    assert shown >= {"train", "sweep", "worker", "spikes", "report", "bench"}


@pytest.mark.parametrize("where,line", SPIKEBENCH, ids=[w for w, _ in SPIKEBENCH])
def test_command_line_parses(where, line, capsys):
    argv = spikebench_argv(line)
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{where}: `{line}` does not parse (exit {e.code}): "
                    f"{capsys.readouterr().err.strip()}")
    assert cli.main([*argv, "--help"]) == 0, f"{where}: `{line} --help` failed"


def test_a_renamed_flag_fails_the_parse(capsys):
    """What the test above relies on: an unknown flag is a parse error, not ignored."""
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["sweep", "sweeps/default.toml", "--jobz", "1"])
    assert "--jobz" in capsys.readouterr().err


def _once(commands: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each command line once (the first place it is shown)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for where, line in commands:
        key = tuple(spikebench_argv(line))
        if key not in seen:
            seen.add(key)
            out.append((where, line))
    return out


DRY_RUNS = _once([(w, line) for w, line in SPIKEBENCH if "--dry-run" in spikebench_argv(line)])


@pytest.mark.parametrize("where,line", DRY_RUNS, ids=[w for w, _ in DRY_RUNS])
def test_dry_run_shown_runs(where, line, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the paths the pages show are relative to the repository
    code = cli.main(spikebench_argv(line))
    assert code == 0, f"{where}: `{line}` exited {code}: {capsys.readouterr().err.strip()}"


def test_dry_runs_are_shown():
    assert {spikebench_argv(line)[0] for _, line in DRY_RUNS} >= {"train", "sweep"}


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.MULTILINE))


@pytest.mark.parametrize("where,line", MAKE, ids=[w for w, _ in MAKE])
def test_make_target_exists(where, line):
    words = shlex.split(line, comments=True)
    targets = [w for w in words[1:] if not ENV.match(w) and not w.startswith("-")]
    assert targets, f"{where}: `{line}` names no target"
    missing = set(targets) - _make_targets()
    assert not missing, f"{where}: `{line}`: no Makefile target {sorted(missing)}"


# --- generated pages -------------------------------------------------------------------------


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_generated_pages_are_current():
    """The configuration reference exactly; a page with embedded help up to whitespace, as
    argparse's wrapping may differ between Python versions."""
    stale = []
    for page, text in doc_pages.expected_pages(DOCS).items():
        now = page.read_text(encoding="utf-8") if page.exists() else ""
        exact = page.name in (reference.CONFIG_PAGE, doc_pages.API_PAGE)
        same = now == text if exact else _squash(now) == _squash(text)
        if not same:
            stale.append(_rel(page))
    assert not stale, (f"{', '.join(stale)} differ from what the code writes; run "
                       f"`{reference.GENERATOR}` (or `make docs`) and commit the result")


def test_layout_and_api_are_generated_from_the_tree():
    """The layout block is there and names every package; the API page every package."""
    layout = (DOCS / doc_pages.LAYOUT_PAGE).read_text(encoding="utf-8")
    block = layout[layout.index("<!-- layout -->"):layout.index("<!-- end layout -->")]
    api = (DOCS / doc_pages.API_PAGE).read_text(encoding="utf-8")
    for pkg in doc_pages.packages():
        if pkg.count(".") == 1:
            assert f"| `{pkg.split('.')[1]}/` |" in block, f"layout lacks {pkg}"
        assert f"## `{pkg}`" in api, f"{doc_pages.API_PAGE} lacks {pkg}"


def test_configuration_reference_has_every_key():
    page = (DOCS / reference.CONFIG_PAGE).read_text(encoding="utf-8")
    hints = typing.get_type_hints(Config)
    for section in dataclasses.fields(Config):
        for f in dataclasses.fields(hints[section.name]):
            assert f"| `{section.name}.{f.name}` |" in page


def test_notes_name_existing_keys():
    hints = typing.get_type_hints(Config)
    keys = {f"{s.name}.{f.name}" for s in dataclasses.fields(Config)
            for f in dataclasses.fields(hints[s.name])}
    assert set(reference.NOTES) <= keys, sorted(set(reference.NOTES) - keys)


def test_every_command_help_is_embedded():
    embedded = {cmd for page in PAGES
                for cmd, _ in doc_pages.help_blocks(page.read_text(encoding="utf-8"))}
    assert embedded == set(doc_pages.parsers())


@pytest.mark.parametrize("command", sorted(doc_pages.parsers()))
def test_help_lists_every_option_on_one_line_with_examples(command):
    parser = doc_pages.parsers()[command]
    text = doc_pages.command_help(command)
    lines = text.splitlines()
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        assert action.help, f"{command}: {action.option_strings or action.dest} has no help"
        expanded = formatter._expand_help(action)
        assert any(expanded in line for line in lines), (
            f"{command} --help: the help of {action.option_strings or action.dest} does not "
            f"fit one line at {doc_pages.HELP_WIDTH} columns: {expanded!r}")
    assert "examples:" in text and re.search(r"^  spikebench", text, re.MULTILINE), (
        f"{command} --help shows no example")


# --- the pages themselves ----------------------------------------------------------------------


def test_readme_is_short_and_says_where_to_start():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200)"
    top = "\n".join(lines[:60])
    assert "make sweep" in top and "reports/default/report.md" in top


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", nav, re.MULTILINE)


def test_every_page_is_in_the_nav():
    nav = _nav_pages()
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    assert sorted(nav) == sorted(p.name for p in PAGES)


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs's toc both make it (for these headings)."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[-\s]+", "-", text).strip("-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    fenced = {n for start, lines in code_blocks(text) for n in range(start, start + len(lines))}
    return {_slug(m.group(1)) for n, line in enumerate(text.splitlines(), 1)
            if n not in fenced and (m := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line))}


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    fenced = {n for start, lines in code_blocks(text)
              for n in range(start - 1, start + len(lines) + 1)}
    body = "\n".join("" if n in fenced else re.sub(r"`[^`]*`", "", line)
                     for n, line in enumerate(text.splitlines(), 1))
    return LINK.findall(body)


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_relative_links_resolve(path):
    for target in _links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        assert dest.exists(), f"{_rel(path)}: link to {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{_rel(path)}: link to {target}: no such heading"


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()


# --- repository paths --------------------------------------------------------------------------

# A path written in a page that names a file the repository does not hold, on purpose.
NOT_IN_THE_REPOSITORY = {
    "benchmarks/baselines/gpu.json",  # the GPU suite's baseline, recorded on a GPU (none yet)
    "sweeps/mine.toml",  # an example of the user's own sweep file
}
_TOP = ("spikebench/", "tests/", "benchmarks/", "examples/", "sweeps/", "models/",
        "monitoring/", "docs/", ".ci/", "reports/example-default")
REPO_PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(map(re.escape, _TOP)) + r")[\w./\\-]*)")


def repo_paths(path: Path) -> list[tuple[int, str]]:
    """(line, path) of every repository path a page writes; placeholders (``<run-id>``,
    ``*``, ``{...}``) left out."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for m in REPO_PATH.finditer(line):
            text = m.group(1).replace("\\_", "_").rstrip(".,:;)")
            if not any(c in text for c in "<*{") and not line[m.end():].startswith(("<", "{", "*")):
                out.append((n, text.split("::")[0]))
    return out


def test_repo_paths_are_found():
    """The extraction finds what the pages show (a broken pattern would pass the next test)."""
    found = {p for f in DOC_FILES for _, p in repo_paths(f)}
    assert {"spikebench/scoring/run.py", "tests/test_docs.py", "sweeps/default.toml"} <= found


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_repository_paths_exist(path):
    missing = [f"{_rel(path)}:{n}: {p}" for n, p in repo_paths(path)
               if p not in NOT_IN_THE_REPOSITORY and not (ROOT / p).exists()]
    assert not missing, "paths the page names that are not in the repository: " + ", ".join(missing)


def test_paths_not_in_the_repository_are_still_named():
    """A stale entry above fails: each is still written somewhere, and still absent."""
    named = {p for f in DOC_FILES for _, p in repo_paths(f)}
    for p in NOT_IN_THE_REPOSITORY:
        assert p in named and not (ROOT / p).exists(), p
