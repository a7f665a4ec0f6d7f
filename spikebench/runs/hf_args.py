"""The HF Trainer's ``training_args.bin`` (its ``TrainingArguments``, saved by ``torch.save``)
read as data, without transformers and without running the file.

``torch.load`` would unpickle it, which runs whatever the pickle names: a log someone sent
must not run code. Here the pickle is read by an unpickler whose every class or function
is an inert placeholder recording its arguments and state, so reading builds only
dicts, lists, numbers, text and placeholders: ``TrainingArguments(...)`` becomes its field
table, an enum such as ``SchedulerType("linear")`` its value. Anything unexpected (an
older format, a damaged file) gives None and the run keeps trainer_state's own fields.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

MAX_PICKLE = 16 << 20  # a TrainingArguments pickle is a few KB


class _Inert:
    """Stands in for any class or function the pickle names."""

    qualname = "?"

    def __new__(cls, *args, **kwargs):
        obj = object.__new__(cls)
        obj.args, obj.state = args, None
        return obj

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        self.state = state


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        return type(name, (_Inert,), {"qualname": f"{module}.{name}"})

    def persistent_load(self, pid):
        return None  # a tensor's storage: no value a parameter needs


def _plain(x: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """Placeholders as data; shared objects are converted once per reference, so a node
    budget bounds a pickle that shares one list many times over."""
    budget = budget if budget is not None else [100_000]
    budget[0] -= 1
    if depth > 20 or budget[0] < 0:
        return None
    if isinstance(x, type) and issubclass(x, _Inert):
        return x.qualname
    if isinstance(x, _Inert):
        if isinstance(x.state, dict):
            return {str(k): _plain(v, depth + 1, budget) for k, v in x.state.items()}
        if x.state is not None:
            return _plain(x.state, depth + 1, budget)
        if len(x.args) == 1:
            return _plain(x.args[0], depth + 1, budget)  # an enum member: its value
        return type(x).qualname
    if isinstance(x, dict):
        return {str(k): _plain(v, depth + 1, budget) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_plain(v, depth + 1, budget) for v in x]
    if isinstance(x, bytes | bytearray):
        return None
    return x


def read_training_args(path: Path) -> dict[str, Any] | None:
    """The fields of a ``training_args.bin``, or None where it cannot be read as one."""
    try:
        with zipfile.ZipFile(path) as z:
            member = next((n for n in z.namelist() if n.endswith("data.pkl")), None)
            if member is None or z.getinfo(member).file_size > MAX_PICKLE:
                return None
            data = z.read(member)
        top = _Unpickler(io.BytesIO(data)).load()
        fields = top.state if isinstance(top, _Inert) else top
        if not isinstance(fields, dict):
            return None
        # Each field on its own budget: a huge one cannot crowd out the seed beside it.
        return {str(k): _plain(v) for k, v in fields.items()}
    except Exception:  # a damaged or foreign file: the run keeps trainer_state's fields
        return None
