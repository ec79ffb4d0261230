"""Page sizes as Nova writes them ("2048", "2MB", "1GiB": KiB without a unit, oslo's IEC units
with one), and Nova's ``reserved_huge_pages`` option: the pages of each size an operator keeps
out of instances' reach, per NUMA cell. Parsed and checked against a host's cells; errors name
the field. Pure: no libvirt, no Ansible.

Python 3.9: modules ship this file to hypervisors with the rest of module_utils.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import whole_number
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

RESERVED_PAGES_SETTING = "reserved_huge_pages"
_SIZE = re.compile(r"^(\d+)\s*([KMGT])(i?)B$")
_UNIT_KIB = {"K": 1, "M": 1024, "G": 1024 ** 2, "T": 1024 ** 3}
_ENTRY_KEYS = ("node", "size", "count")


def page_size_kb(field: str, text: Any) -> int:
    """A page size in KiB: a number is KiB already, "2MB" and "2MiB" are both 2048 (oslo's IEC
    reading, as Nova's hw:mem_page_size and reserved_huge_pages take them)."""
    value = str(text).strip() if text is not None and not isinstance(text, bool) else ""
    size_kb = whole_number(value)
    if size_kb is None:
        match = _SIZE.match(value)
        if not match:
            raise InputError(field, f"{field} must be a page size in KiB (2048) or with a unit (2MB, 1GB), "
                                    f"got {text!r}")
        size_kb = int(match.group(1)) * _UNIT_KIB[match.group(2)]
    if size_kb <= 0:
        raise InputError(field, f"{field} must be a page size above 0, got {text!r}")
    return size_kb


def parse_reserved_huge_pages(field: str, value: Any) -> List[Dict[str, int]]:
    """``reserved_huge_pages`` as [{node, size_kb, count}]: each item a mapping {node, size,
    count} or Nova's "node:0,size:2048,count:64"; one size of one node given once."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InputError(field, f"{field} must be a list of {{node, size, count}} such as "
                                f"[{{node: 0, size: 2MB, count: 64}}] or \"node:0,size:2048,count:64\", got {value!r}")
    entries: List[Dict[str, int]] = []
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if isinstance(item, str):
            pairs = [part.partition(":") for part in item.split(",")]
            item = {key.strip(): text.strip() for key, _sep, text in pairs}
        if not isinstance(item, Mapping) or sorted(item) != sorted(_ENTRY_KEYS):
            raise InputError(where, f"{where} must have exactly node, size and count, got {item!r}")
        numbers = {}
        for key in ("node", "count"):
            number = whole_number(str(item[key])) if not isinstance(item[key], bool) else None
            if number is None:
                raise InputError(f"{where}.{key}", f"{where}.{key} must be a non-negative integer, got {item[key]!r}")
            numbers[key] = number
        entry = {"node": numbers["node"], "size_kb": page_size_kb(f"{where}.size", item["size"]),
                 "count": numbers["count"]}
        if any((other["node"], other["size_kb"]) == (entry["node"], entry["size_kb"]) for other in entries):
            raise InputError(where, f"{where} reserves {entry['size_kb']} KiB pages of node {entry['node']} again")
        entries.append(entry)
    return entries


def host_reserved_pages(field: str, entries: Sequence[Mapping[str, int]], cells: Sequence[Mapping[str, Any]],
                        host_name: str) -> Dict[str, Dict[str, int]]:
    """The reservations as the host state records them, ``{cell id: {size_kb: count}}`` with text
    keys (they stay the same through the ledger's JSON), checked against the host's cells: a cell
    it has, a page size that cell offers, no more pages than it has of that size."""
    by_id = {int(cell["id"]): cell for cell in cells}
    reserved: Dict[str, Dict[str, int]] = {}
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        cell = by_id.get(entry["node"])
        if cell is None:
            have = ", ".join(str(cell_id) for cell_id in sorted(by_id)) or "none reported"
            raise InputError(f"{where}.node", f"{where}.node: {host_name} has no NUMA cell {entry['node']} "
                                              f"(its cells: {have})")
        totals = {int(page["size_kb"]): int(page.get("total") or 0) for page in cell.get("pages") or []}
        if entry["size_kb"] not in totals:
            offered = ", ".join(str(size) for size in sorted(totals)) or "none"
            raise InputError(f"{where}.size", f"{where}.size: cell {entry['node']} of {host_name} has no "
                                              f"{entry['size_kb']} KiB pages (its sizes: {offered} KiB)")
        if entry["count"] > totals[entry["size_kb"]]:
            raise InputError(f"{where}.count", f"{where}.count: cell {entry['node']} of {host_name} has "
                                               f"{totals[entry['size_kb']]} pages of {entry['size_kb']} KiB, "
                                               f"not {entry['count']}")
        reserved.setdefault(str(entry["node"]), {})[str(entry["size_kb"])] = entry["count"]
    return reserved
