"""Nova's CPU set syntax ("0-3,^2,8"), as its ``[compute] cpu_dedicated_set`` and
``cpu_shared_set`` take it: comma-separated CPU ids and inclusive ranges, a ``^`` taking one id or
range back out. Parsed into a sorted list of ids and checked against a host's CPUs; errors name
the field. Pure: no libvirt, no Ansible.

Python 3.9: modules ship this file to hypervisors with the rest of module_utils.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List, Mapping, Optional

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

CPU_SET_SETTINGS = ("cpu_dedicated_set", "cpu_shared_set")
# One id or range, optionally excluded: "3", "0-7", "^2", "^4-5".
_ITEM = re.compile(r"^(\^)?(\d{1,5})(?:-(\d{1,5}))?$")
# A bound on what a setting may spell out, so that "0-99999" cannot make a list of 100,000 ids:
# Linux's largest NR_CPUS (CONFIG_MAXSMP) is 8192.
MAX_CPU_ID = 8191


def parse_cpu_set(field: str, text: Any, empty: bool = False) -> List[int]:
    """The CPU ids ``text`` names, sorted; InputError naming ``field`` for anything else. The
    exclusions apply after every inclusion, wherever they stand (as Nova's parse_cpu_spec).
    ``empty``: a set of no CPU ("", "0,^0") is one too, as Nova reads a guest cell's vCPUs."""
    if empty and isinstance(text, str) and not text.strip():
        return []
    if not isinstance(text, str) or not text.strip():
        raise InputError(field, f"{field} must be a CPU set such as \"0-3,^2,8\", got {text!r}")
    included, excluded = set(), set()
    for item in text.split(","):
        match = _ITEM.match(item.strip())
        if not match:
            raise InputError(field, f"{field}: {item.strip()!r} is not a CPU id, a range such as 4-7, or either "
                                    f"with ^ before it (in {text!r})")
        first = int(match.group(2))
        last = int(match.group(3)) if match.group(3) is not None else first
        if last < first:
            raise InputError(field, f"{field}: the range {item.strip()!r} ends before it starts")
        if last > MAX_CPU_ID:
            raise InputError(field, f"{field}: CPU {last} is beyond the largest id Linux has, {MAX_CPU_ID}")
        (excluded if match.group(1) else included).update(range(first, last + 1))
    cpus = sorted(included - excluded)
    if not cpus and not empty:
        raise InputError(field, f"{field}: {text!r} leaves no CPU")
    return cpus


def format_cpu_set(cpus: Iterable[int]) -> str:
    """The shortest range text for ``cpus`` ("0-2,5"), for messages."""
    ordered = sorted(set(cpus))
    parts: List[str] = []
    start = previous = None
    for cpu in ordered + [None]:
        if start is not None and (cpu is None or cpu != previous + 1):
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if cpu is not None and start is None:
            start = cpu
        previous = cpu
    return ",".join(parts)


def shared_cpu_set(numa_topology: Any) -> Any:
    """The ``cpu_shared_set`` of a host's recorded ``numa_topology`` (the CPUs its guests without
    pinning float over), None where it has none; as recorded, checked where it is rendered."""
    return numa_topology.get("cpu_shared_set") if isinstance(numa_topology, Mapping) else None


def check_cpu_sets(field: str, settings: Mapping[str, Any]) -> dict:
    """``cpu_dedicated_set`` and ``cpu_shared_set`` of ``settings`` parsed ({name: ids or None});
    the two may not share a CPU (Nova's compute refuses to start so). ``field`` is the settings'
    own (``hypervisors.hv1``, or "" for the source's)."""
    prefix = f"{field}." if field else ""
    parsed = {name: (parse_cpu_set(prefix + name, settings[name]) if settings.get(name) is not None else None)
              for name in CPU_SET_SETTINGS}
    dedicated, shared = parsed["cpu_dedicated_set"], parsed["cpu_shared_set"]
    if dedicated and shared:
        both = sorted(set(dedicated) & set(shared))
        if both:
            raise InputError(f"{prefix}cpu_shared_set", f"{prefix}cpu_shared_set and {prefix}cpu_dedicated_set "
                                                        f"share CPUs {format_cpu_set(both)}: a CPU is either one")
    return parsed


def host_cpu_sets(field: str, settings: Mapping[str, Any], host_cpus: Iterable[int],
                  host_name: str) -> dict:
    """The host's ``cpu_dedicated_set`` and ``cpu_shared_set`` (sorted ids, or None where unset),
    checked against the CPUs the host has; InputError naming the setting for a CPU it lacks."""
    parsed = check_cpu_sets(field, settings)
    have = set(host_cpus)
    prefix = f"{field}." if field else ""
    for name, cpus in parsed.items():
        missing: Optional[List[int]] = sorted(set(cpus) - have) if cpus else None
        if missing:
            raise InputError(prefix + name, f"{prefix}{name}: {host_name} has no CPU {format_cpu_set(missing)} "
                                            f"(its CPUs: {format_cpu_set(have) or 'none reported'})")
    return parsed
