"""The hosts of one scheduling pass, column by column.

A fleet read from the ledger arrives as columns (one per HostState field, one value per host),
never as one object per host: at 100,000 hypervisors building every HostState would cost more
than the whole decision. The engine reads columns where it works on every host (the vectorised
filters and weighers, names for ignore/force), and builds a host's HostState only where it
looks at that host alone: the chosen host, a rejection it explains, a filter or weigher
without a vectorised form (each built once, and validated as HostState.from_dict would).

Hosts given as HostStates (a "what if" list, live inventory facts) are wrapped as they are.

A column is a list, or (as the ledger's read gives the numbers) a NumPy array of numbers: the
vectorised engine takes an array as it is (``stored``), and everything else sees the same
values as Python numbers (``column``, a host's HostState), as a list would give them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Iterator

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState

_FIELDS = {f.name: f for f in dataclasses.fields(HostState)}


def _default(name: str) -> Any:
    """A HostState field's default, fresh for mutable ones."""
    field = _FIELDS[name]
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return field.default


class HostTable(Sequence[HostState]):
    """``columns`` maps HostState field names to equally long sequences; ``host`` is required.

    Fields without a column take HostState's default for every host. Nothing here changes a
    column: the engine copies what it consumes, so one table can be scheduled twice.
    """

    def __init__(self, columns: Mapping[str, Sequence[Any]]) -> None:
        unknown = sorted(set(columns) - set(_FIELDS) - {"limits"})
        if unknown:
            raise SchedulerInputError(f"hosts.{unknown[0]}", f"unknown host state column {unknown[0]!r}")
        if "host" not in columns:
            raise SchedulerInputError("hosts", "a host table needs the column 'host'")
        self._columns: dict[str, Sequence[Any]] = dict(columns)
        self._count = len(self._columns["host"])
        for name, values in self._columns.items():
            if len(values) != self._count:
                raise SchedulerInputError(f"hosts.{name}", f"column {name} has {len(values)} values "
                                                           f"for {self._count} hosts")
        self._states: list[HostState] | None = None
        self._built: dict[int, HostState] = {}
        # The columns held as NumPy arrays (told by their ``tolist``: this module never imports
        # NumPy), and each one's values as Python numbers, made on first use.
        self._arrays = {name for name, values in self._columns.items() if hasattr(values, "tolist")}
        self._listed: dict[str, list[Any]] = {}

    @classmethod
    def from_states(cls, states: Sequence[HostState]) -> HostTable:
        table = cls({"host": [state.host for state in states]})
        table._states = list(states)
        return table

    @classmethod
    def of(cls, hosts: Sequence[HostState] | HostTable) -> HostTable:
        """The engine's input as a table, whichever form it came in."""
        return hosts if isinstance(hosts, HostTable) else cls.from_states(hosts)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, position: int) -> HostState:  # type: ignore[override]
        if self._states is not None:
            return self._states[position]
        state = self._built.get(position)
        if state is None:
            values = {name: column.item(position) if name in self._arrays else column[position]
                      for name, column in self._columns.items()}
            state = self._built[position] = HostState.from_dict(values)
        return state

    def __iter__(self) -> Iterator[HostState]:
        return (self[position] for position in range(self._count))

    def column(self, name: str) -> Sequence[Any]:
        """The values of one HostState field, host by host, as Python values."""
        if name in self._arrays:
            if name not in self._listed:
                self._listed[name] = self._columns[name].tolist()  # type: ignore[attr-defined]
            return self._listed[name]
        return self.stored(name)

    def stored(self, name: str) -> Sequence[Any]:
        """The values of one HostState field as the table holds them: a list, or a NumPy array
        of numbers (which the vectorised engine takes without converting)."""
        values = self._columns.get(name)
        if values is None:
            if name not in _FIELDS:
                raise KeyError(name)
            if self._states is not None:
                values = [getattr(state, name) for state in self._states]
            else:
                default = _default(name)
                values = [default] * self._count
            self._columns[name] = values
        return values

    def has_column(self, name: str) -> bool:
        """Whether ``name`` holds values of the hosts' own (not only the field's default)."""
        return self._states is not None or name in self._columns
