"""Nova's extra_specs_ops: how a flavor extra spec ("<op> value") matches a host's value."""
from __future__ import annotations

import operator
from typing import Any, Callable


def _numeric(compare: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    def method(value: Any, wanted: Any) -> bool:
        # Nova raises on a value that is not a number; a host that cannot be compared simply
        # does not match, rather than failing the whole request.
        try:
            return compare(float(value), float(wanted))
        except (TypeError, ValueError):
            return False
    return method


_OP_METHODS: dict[str, Callable[[Any, Any], bool]] = {
    # "=" means "at least", Nova's choice for capacities such as memory_mb.
    "=": _numeric(operator.ge),
    "<in>": lambda value, wanted: wanted in value,
    "<all-in>": lambda value, wanted: all(item in value for item in wanted),
    "==": _numeric(operator.eq),
    "!=": _numeric(operator.ne),
    ">=": _numeric(operator.ge),
    "<=": _numeric(operator.le),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}

OPERATORS = tuple(_OP_METHODS) + ("<or>",)


def match(value: Any, req: str) -> bool:
    """Nova's extra_specs_ops.match: a leading operator word, else plain string equality."""
    words = req.split()
    op = method = None
    if words:
        op = words.pop(0)
        method = _OP_METHODS.get(op)
    if op != "<or>" and not method:
        return value == req
    if value is None:
        return False
    if op == "<or>":  # "<or> v1 <or> v2 <or> v3"
        while words:
            if words.pop(0) == value:
                return True
            if not words:
                break
            words.pop(0)  # the next "<or>"
        return False
    if words:
        if op == "<all-in>":
            return method(value, words)  # type: ignore[misc]
        return method(value, words[0])  # type: ignore[misc]
    return False
