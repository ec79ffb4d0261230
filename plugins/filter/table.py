"""berth.fleet.table: rows of dicts as an aligned text table, one string per line."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: table
short_description: Format rows as an aligned text table
version_added: 0.1.0
description:
  - Turns a list of dicts into lines of text with aligned columns, for a readable summary at the
    end of a play (M(ansible.builtin.debug) prints a list one line per item).
positional: columns
options:
  _input:
    description: The rows.
    type: list
    elements: dict
    required: true
  columns:
    description:
      - C([heading, key]) in display order, or C([heading, key, format]).
      - A key may be a list of keys, shown as their values joined by C(/) (C([vcpus_used, vcpus_limit]) is
        C(3/16)).
      - Format V(duration) shows a number of seconds as the two largest units (C(45s), C(12m 5s), C(3h 20m),
        C(2d 4h)).
    type: list
    elements: list
    required: true
"""

EXAMPLES = r"""
- ansible.builtin.debug:
    msg: "{{ rows | berth.fleet.table([['instance', 'name'], ['hypervisor', 'host']]) }}"

- ansible.builtin.debug:
    msg: "{{ hosts | berth.fleet.table([['host', 'host'], ['vCPUs used/limit', ['vcpus_used', 'vcpus_limit']],
                                          ['age', 'age_s', 'duration']]) }}"
"""

RETURN = r"""
_value:
  description: The header line, then one line per row.
  type: list
  elements: str
"""


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        # Limits are totals times a ratio: 16 x 4.0 reads as 64, not 64.000.
        return str(int(value)) if value.is_integer() else f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(item) for item in value) or "-"
    return str(value)


_DURATION_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def _duration(seconds):
    """Seconds as a person reads an age: the two largest units that are not zero."""
    if seconds is None:
        return ""
    left = max(int(seconds), 0)
    parts = []
    for unit, size in _DURATION_UNITS:
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
        if len(parts) == 2 or (parts and not left):
            break
    return " ".join(parts)


_FORMATS = {"duration": _duration}


def _column_cell(row, key, format_name):
    if isinstance(key, (list, tuple)):
        return "/".join(_cell(row.get(part)) for part in key)
    if format_name is not None:
        return _FORMATS[format_name](row.get(key))
    return _cell(row.get(key))


def table(rows, columns):
    for column in columns:
        if len(column) not in (2, 3) or (len(column) == 3 and column[2] not in _FORMATS):
            raise AnsibleFilterError(f"berth.fleet.table: each column is [heading, key] or [heading, key, format] "
                                     f"with format one of {', '.join(_FORMATS)}, got {column!r}")
    headings = [str(column[0]) for column in columns]
    cells = [[_column_cell(row, column[1], column[2] if len(column) == 3 else None) for column in columns]
             for row in rows]
    widths = [max([len(h)] + [len(line[i]) for line in cells]) for i, h in enumerate(headings)]

    def line(values):
        return "  ".join(value.ljust(width) for value, width in zip(values, widths)).rstrip()

    # No rule under the header: YAML output would quote a line of dashes.
    return [line(headings)] + [line(values) for values in cells]


class FilterModule:
    def filters(self):
        return {"table": table}
