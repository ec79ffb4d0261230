"""Values from the database driver made into the engine's columns (a HostTable's), with as few
Python objects as the engine needs.

At 100,000 hypervisors the scheduler's read (host_states.read_table) is mostly the driver
making a Python object of every value, and a fresh worker process paying for every page of
memory those objects take. So a column is built by its kind:

- "int", "float": a NumPy array (int64, float64), which the vectorised engine takes as it is
  (HostTable.stored), when every value is a number of that kind; any other value (NULL, or a
  text another writer left in a SQLite column) keeps the column a list of the values as the
  driver gave them, as every column was before. Without NumPy (a read given none), every
  column is a list.
- "flag": booleans (the drivers give 0/1 or booleans), an array with NumPy.
- "shared": values that most hosts have alike (a zone, a node name, a digest), each kept once.
- "json": JSON texts, each distinct text parsed once and its value shared (the engine never
  changes a fact); text that does not parse, or nests past Python's stack, is None.
- "plain": the values as they are.

Columns come in batches of rows (ColumnBuilder), or whole, as one text of every host's values
that the database aggregated (integers, texts): moving one long text costs the driver a
fraction of making a Python object per value.
"""

from __future__ import annotations

import json
import warnings
from typing import Any, Iterable, Mapping, Sequence

# The NumPy array each number kind becomes ("i": int64, "f": float64).
_ARRAY_KINDS = {"int": "i", "float": "f"}


def numpy_or_none() -> Any:
    """NumPy, imported where a read needs it (the ledger's other users never do); None without
    it: NumPy is a controller dependency of the vectorised engine only."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


class ColumnBuilder:
    """Columns by name, built batch by batch, each by its kind (``kinds``: name -> kind), with
    ``numpy`` (the module, or None for lists only); a batch's own Python objects can go as soon
    as it is added."""

    def __init__(self, kinds: Mapping[str, str], numpy: Any) -> None:
        self.kinds = dict(kinds)
        self.numpy = numpy
        self.parts: dict[str, list[Any]] = {name: [] for name in self.kinds}
        # The number columns still held as arrays (a list once a value was not a number of the kind).
        self.arrays = {name for name, kind in self.kinds.items() if kind in _ARRAY_KINDS} if self.numpy else set()
        self.shared: dict[str, dict[Any, Any]] = {name: {} for name in self.kinds}

    def add(self, name: str, values: Sequence[Any]) -> None:
        """The next batch of column ``name``'s values."""
        kind, parts = self.kinds[name], self.parts[name]
        if name in self.arrays:
            array = self.numpy.array(values)
            if array.ndim == 1 and array.dtype.kind == _ARRAY_KINDS[kind] and array.dtype.itemsize == 8:
                parts.append(array)
                return
            self.arrays.discard(name)
            self.parts[name] = parts = [value for part in parts for value in part.tolist()]
            parts.extend(values)
        elif kind == "flag":
            if self.numpy is None:
                parts.extend(map(bool, values))
            else:
                parts.append(self.numpy.fromiter(map(bool, values), dtype=bool, count=len(values)))
        elif kind == "shared":
            shared = self.shared[name]
            parts.extend(map(shared.setdefault, values, values))
        elif kind == "json":
            parts.extend(parsed(values, self.shared[name]))
        else:
            parts.extend(values)

    def columns(self) -> dict[str, Any]:
        columns = {}
        for name, parts in self.parts.items():
            if name in self.arrays or (self.kinds[name] == "flag" and self.numpy is not None):
                dtype = bool if self.kinds[name] == "flag" else _ARRAY_KINDS[self.kinds[name]] + "8"
                columns[name] = self.numpy.concatenate(parts) if parts else self.numpy.zeros(0, dtype=dtype)
            else:
                columns[name] = parts
        return columns


def constant_column(numpy: Any, kind: str, value: Any, count: int, exceptions: Mapping[int, Any]) -> Any:
    """A column of ``count`` hosts that all have ``value`` but those of ``exceptions`` (position ->
    its value), built by its kind as ColumnBuilder would build it from every host's value."""
    builder = ColumnBuilder({"column": kind}, numpy)
    if not exceptions and numpy is not None and kind in _ARRAY_KINDS and _of_kind(value, kind):
        return numpy.full(count, value, dtype=_ARRAY_KINDS[kind] + "8")
    if not exceptions and numpy is not None and kind == "flag":
        return numpy.full(count, bool(value), dtype=bool)
    values = [value] * count
    for position, own in exceptions.items():
        values[position] = own
    builder.add("column", values)
    return builder.columns()["column"]


def _of_kind(value: Any, kind: str) -> bool:
    """Whether the driver's ``value`` becomes a number of ``kind`` in an array as it is (an int
    within int64, a float)."""
    if kind == "int":
        return type(value) is int and -2 ** 63 <= value < 2 ** 63  # pylint: disable=unidiomatic-typecheck
    return type(value) is float  # pylint: disable=unidiomatic-typecheck


def parsed(texts: Iterable[str | None], cache: dict[str | None, Any]) -> list[Any]:
    """JSON texts parsed, each distinct text once through ``cache`` (text -> value), the hosts
    sharing the value."""
    texts = list(texts)
    for text in set(texts).difference(cache):
        cache[text] = loaded(text)
    return list(map(cache.__getitem__, texts))


def loaded(text: str | None) -> Any:
    """A JSON column's value; None, as for a fact never recorded, where another writer of the
    ledger stored text nested past what Python's json can decode (a RecursionError)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        return None


def split_integers(numpy: Any, text: str | None, count: int) -> Any:
    """``count`` integers the database joined with commas, as an int64 array; None where the
    text is anything else (a value that is no integer, a missing one)."""
    if count == 0:
        return numpy.zeros(0, dtype="i8")
    if not text:
        return None
    with warnings.catch_warnings():
        # NumPy says "could not be read to its end" of text that is not all integers.
        warnings.simplefilter("error")
        try:
            values = numpy.fromstring(text, dtype="i8", sep=",")
        except (ValueError, DeprecationWarning):
            return None
    # (Every integer either database gives fits int64: SQLite's are 64-bit and its arithmetic
    # turns to floating point past them, whose text is refused above.)
    return values if len(values) == count else None


def split_texts(text: str | None, count: int, separator: str) -> list[str] | None:
    """``count`` texts the database joined with ``separator``; None where a text holds the
    separator itself (there are more pieces than texts)."""
    if count == 0:
        return []
    if text is None:
        return None
    pieces = text.split(separator)
    return pieces if len(pieces) == count else None
