"""berth.fleet.table: rows of dicts as an aligned text table, one string per line."""

from __future__ import annotations

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
    description: Pairs of C([heading, key]) in display order.
    type: list
    elements: list
    required: true
"""

EXAMPLES = r"""
- ansible.builtin.debug:
    msg: "{{ rows | berth.fleet.table([['instance', 'name'], ['hypervisor', 'host']]) }}"
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
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(item) for item in value) or "-"
    return str(value)


def table(rows, columns):
    headings = [str(heading) for heading, _key in columns]
    cells = [[_cell(row.get(key)) for _heading, key in columns] for row in rows]
    widths = [max([len(h)] + [len(line[i]) for line in cells]) for i, h in enumerate(headings)]

    def line(values):
        return "  ".join(value.ljust(width) for value, width in zip(values, widths)).rstrip()

    # No rule under the header: YAML output would quote a line of dashes.
    return [line(headings)] + [line(values) for values in cells]


class FilterModule:
    def filters(self):
        return {"table": table}
