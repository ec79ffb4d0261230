from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)

# bool is a subclass of int and 1.0 == 1, so both would slip through a plain isinstance or
# int() check; a YAML "true" or "1.0" where a size belongs is a mistake worth reporting.


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    if is_integer(value):
        return True
    return isinstance(value, float) and math.isfinite(value)


def check_integer(field: str, value: Any, minimum: int | None = None) -> None:
    if minimum == 1:
        wanted = "a positive integer"
    elif minimum == 0:
        wanted = "a non-negative integer"
    else:
        wanted = "an integer"
    if not is_integer(value) or (minimum is not None and value < minimum):
        raise SchedulerInputError(field, f"{field} must be {wanted}, got {value!r}")


def check_positive_number(field: str, value: Any) -> None:
    if not is_number(value) or value <= 0:
        raise SchedulerInputError(field, f"{field} must be a number greater than 0, got {value!r}")


def check_number(field: str, value: Any) -> None:
    if not is_number(value):
        raise SchedulerInputError(field, f"{field} must be a finite number, got {value!r}")


def check_bool(field: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise SchedulerInputError(field, f"{field} must be true or false, got {value!r}")


def check_optional_string(field: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise SchedulerInputError(field, f"{field} must be a string or null, got {value!r}")


def check_string_list(field: str, value: Any) -> list[str]:
    # A bare string is a sequence too; "hv1" would otherwise become ["h", "v", "1"].
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SchedulerInputError(field, f"{field} must be a list of strings, got {value!r}")
    for item in value:
        if not isinstance(item, str):
            raise SchedulerInputError(
                field, f"{field} must be a list of strings, got item {item!r}"
            )
    return list(value)


def check_names(field: str, value: Any, allowed: Sequence[str], kind: str) -> list[str]:
    names = check_string_list(field, value)
    for name in names:
        if name not in allowed:
            raise SchedulerInputError(
                field,
                f"{field} names an unknown {kind} {name!r}; allowed: {', '.join(sorted(allowed))}",
            )
    return names
