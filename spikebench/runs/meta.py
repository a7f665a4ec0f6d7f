"""Metadata files beside a run's log (config.json, hparams.yaml, MLflow's meta.yaml): read
whole, each problem one line naming the file.

YAML is read by PyYAML (Optuna's dependency, so always here) with the safe loader, plus
one allowance: the Python tags Lightning's ``hparams.yaml`` may hold (``!!python/tuple``,
``!!python/object:argparse.Namespace`` where hyperparameters were an object) are read as
the plain lists, tables or text they are made of, never constructed as objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.runs.text import check_file
from spikebench.spikes.logs import parse_json

MAX_BYTES = 64 << 20  # a metadata file past this is not metadata


def _text(path: Path) -> str:
    check_file(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise UserError(f"{path}: over {MAX_BYTES >> 20} MiB, not a metadata file")
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror or type(e).__name__}") from None


def read_json(path: Path) -> Any:
    try:
        return parse_json(_text(path))
    except UserError:
        raise
    except ValueError as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None


def _loader():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def plain(loader, suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    Loader.add_multi_constructor("", plain)  # every tag the safe loader does not know
    return Loader


def read_yaml(path: Path) -> Any:
    import yaml

    text = _text(path)
    try:
        return yaml.load(text, Loader=_loader())  # a safe loader (see above)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: not valid YAML ({why})") from None


def table(path: Path, value: Any) -> dict:
    """``value`` if it is a table (a JSON object, a YAML mapping); an empty file is none."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{path}: expected a table of settings, got {type(value).__name__}")
    return value
