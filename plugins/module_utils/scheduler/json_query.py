"""The query language of Nova's JsonFilter: ["op", arg, ...] over a host's facts, where
"$free_ram_mb" reads the host. The request checks a query with parse_query; JsonFilter
evaluates it.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


def _compare(args: list[Any], op: Any) -> bool:
    if len(args) < 2:
        return False
    if op is operator.contains:
        return args[0] in args[1:]
    try:
        return all(op(args[0], arg) for arg in args[1:])
    except TypeError:  # Nova compares whatever it got; mixed types simply do not match
        return False


COMMANDS = {
    "=": lambda args: _compare(args, operator.eq),
    "<": lambda args: _compare(args, operator.lt),
    ">": lambda args: _compare(args, operator.gt),
    "in": lambda args: _compare(args, operator.contains),
    "<=": lambda args: _compare(args, operator.le),
    ">=": lambda args: _compare(args, operator.ge),
    "not": lambda args: [not arg for arg in args],
    "or": any,
    "and": all,
}


QUERY_FIELD = "scheduler_hints.query"


def parse_query(query: Any) -> Any:
    """The query hint (a JSON string or the decoded list), checked: ["op", arg, ...]; None
    for an empty one ("", "[]", "null"), which passes every host, as in Nova."""
    if isinstance(query, str):
        query = limits.load_json(QUERY_FIELD, query) if query.strip() else None
    if not query:
        return None
    limits.check_nesting(QUERY_FIELD, query)
    _check(query)
    return query


def _check(query: Any) -> None:
    if isinstance(query, list) and not query:
        return  # an empty expression is true, at any depth (Nova's _process_filter)
    if not isinstance(query, list) or query[0] not in COMMANDS:
        raise SchedulerInputError(
            "scheduler_hints.query",
            f"scheduler_hints.query must be a list [operator, args...] with an operator among "
            f"{', '.join(COMMANDS)}, got {query!r}",
        )
    for arg in query[1:]:
        if isinstance(arg, list):
            _check(arg)


def _variable(text: str, host_state: HostState) -> Any:
    if not text:
        return None
    if not text.startswith("$"):
        return text
    return host_state.fact(text[1:].split("."))


def evaluate(query: list[Any], host_state: HostState) -> Any:
    """Nova's JsonFilter._process_filter: "$free_ram_mb" reads the host, nested lists nest,
    and an empty list is true."""
    if not query:
        return True
    args = []
    for arg in query[1:]:
        if isinstance(arg, list):
            arg = evaluate(arg, host_state)
        elif isinstance(arg, str):
            arg = _variable(arg, host_state)
        if arg is not None:
            args.append(arg)
    return COMMANDS[query[0]](args)
