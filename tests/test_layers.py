"""The import layers of the package, checked over its source (import-linter's contracts,
written out over ``ast``).

Every module and package directly under ``spikebench/`` (a *unit*) sits in one layer of
:data:`LAYERS`, lowest first. A unit imports only units of lower layers: no arrow runs up,
units of one layer are independent, and so there is no circle. Every import counts, also
one inside a function (imported late for speed is still a dependency). ``from spikebench
import __version__`` is the version string, not the package's facade, and does not count.

No module imports another module's ``_private`` names: what one package offers another is
its public names, and what the package offers users is listed on ``docs/api.md``.

A known exception is listed with the work that removes it; the test fails once it is gone,
so the list cannot go stale.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spikebench"

# Lowest first. A unit may import the units of the layers before its own.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli_help", "errors", "metrics", "signals", "values"),
    ("config",),
    ("runio",),
    ("data", "emulation", "model", "spikes"),
    ("study",),  # a study's layout and records: every reader of run folders names them
    ("cli_args", "precision_auto", "runs", "scoring"),
    ("precision",),
    ("train",),
    ("precursors",),  # the early-warning rule and scorecard (issue 47)
    ("live", "responses"),
    ("api",),
    ("integrations", "sweep"),
    ("report",),
    ("bench", "compare"),
    ("cli_options",),  # the longer subcommands' options, for the parser
    ("cli",),
    ("__init__", "__main__", "doc_pages"),  # the facade, `python -m`, the docs generator
)

# (importer, imported): why it is still there. Each must still occur (else remove it here).
KNOWN_UPWARD: dict[tuple[str, str], str] = {}
# (importing file, module, name): why it is still there. Each must still occur.
KNOWN_PRIVATE: dict[tuple[str, str, str], str] = {}


def _units() -> set[str]:
    return {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" or (p / "__init__.py").is_file()) and p.name != "__pycache__"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit_of(module: str, units: set[str]) -> str | None:
    """The unit a module name belongs to; None outside spikebench."""
    parts = module.split(".")
    if parts[0] != "spikebench":
        return None
    if len(parts) == 1:
        return "__init__"
    return parts[1] if parts[1] in units else "__init__"  # a name of the facade


def imports() -> list[tuple[Path, str, str]]:
    """(file, imported module, imported name or "") of every import in the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out += [(path, alias.name, "") for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                for alias in node.names:
                    submodule = ((PACKAGE / alias.name / "__init__.py").is_file()
                                 or (PACKAGE / f"{alias.name}.py").is_file())
                    if base == "spikebench" and submodule:  # from spikebench import config
                        out.append((path, f"spikebench.{alias.name}", ""))
                    else:
                        out.append((path, base, alias.name))
    return out


IMPORTS = imports()
UNITS = _units()


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importer unit, imported unit): the files where it happens."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path, module, name in IMPORTS:
        if module == "spikebench" and name == "__version__":
            continue
        src = _unit_of(_module_name(path), UNITS)
        dst = _unit_of(module, UNITS)
        if dst is not None and dst != src:
            edges[(src, dst)].append(str(path.relative_to(ROOT)))
    return edges


def test_every_unit_has_a_layer():
    layered = [u for layer in LAYERS for u in layer]
    assert len(layered) == len(set(layered)), "a unit is in two layers"
    assert UNITS - set(layered) == set(), (
        f"not in tests/test_layers.py's LAYERS: {sorted(UNITS - set(layered))}; put each "
        "new module or package in the layer of what it imports")
    assert set(layered) - UNITS == set(), f"gone, still in LAYERS: {set(layered) - UNITS}"


def test_the_walk_sees_the_imports():
    """What the next test relies on: late imports and relative imports are found."""
    edges = _edges()
    assert ("cli", "sweep") in edges  # imported inside cmd_sweep
    assert ("train", "precision") in edges and ("__main__", "cli") in edges


def test_no_arrow_runs_up_or_across():
    rank = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    bad = [f"{src} -> {dst} ({', '.join(sorted(set(files)))})"
           for (src, dst), files in sorted(_edges().items())
           if rank[dst] >= rank[src] and (src, dst) not in KNOWN_UPWARD]
    assert not bad, "imports against the layers (tests/test_layers.py):\n" + "\n".join(bad)


def test_known_upward_imports_still_exist():
    gone = set(KNOWN_UPWARD) - set(_edges())
    assert not gone, f"no longer imported, remove from KNOWN_UPWARD: {sorted(gone)}"


def _private_imports() -> set[tuple[str, str, str]]:
    out = set()
    for path, module, name in IMPORTS:
        if (module.startswith("spikebench") and name.startswith("_")
                and not name.startswith("__") and module != _module_name(path)):
            out.add((str(path.relative_to(ROOT)), module, name))
    return out


def test_no_private_names_of_another_module():
    bad = sorted(_private_imports() - set(KNOWN_PRIVATE))
    assert not bad, ("imports of another module's _private names (make the name public, or "
                     "keep the code where it is used):\n"
                     + "\n".join(f"{f}: from {m} import {n}" for f, m, n in bad))


def test_known_private_imports_still_exist():
    gone = set(KNOWN_PRIVATE) - _private_imports()
    assert not gone, f"no longer imported, remove from KNOWN_PRIVATE: {sorted(gone)}"
