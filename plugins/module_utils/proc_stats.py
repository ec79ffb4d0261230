"""The local machine's own account of its memory, load and CPU time, read from /proc.

Used when the hypervisor is the machine Berth runs on (a local libvirt URI, or the
hypervisor_facts module running on the hypervisor). Python 3.9: it runs on hypervisors.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

_KIB_PER_MIB = 1024
_NS_PER_S = 1_000_000_000
# /proc/stat's columns after "cpu", in order, with the names libvirt's node CPU stats use.
_STAT_COLUMNS = ("user", "nice", "kernel", "idle", "iowait", "irq", "softirq")


def meminfo(path: str = "/proc/meminfo") -> Dict[str, Optional[int]]:
    """total, free, buffers and cached in MiB, as getMemoryStats(ALL_CELLS) reports them."""
    values: Dict[str, int] = {}
    with open(path, encoding="ascii") as handle:
        for line in handle:
            key, _separator, rest = line.partition(":")
            fields = rest.split()
            if fields and fields[0].isdigit():
                values[key] = int(fields[0])
    return {
        "total_mb": values["MemTotal"] // _KIB_PER_MIB,
        "free_mb": values.get("MemFree", 0) // _KIB_PER_MIB,
        "buffers_mb": values.get("Buffers", 0) // _KIB_PER_MIB,
        "cached_mb": values.get("Cached", 0) // _KIB_PER_MIB,
    }


def loadavg(path: str = "/proc/loadavg") -> Dict[str, float]:
    with open(path, encoding="ascii") as handle:
        one, five, fifteen = handle.read().split()[:3]
    return {"load_1m": float(one), "load_5m": float(five), "load_15m": float(fifteen)}


def cpu_times(path: str = "/proc/stat") -> Dict[str, int]:
    """CPU time over all CPUs in nanoseconds, under the names of libvirt's node CPU stats."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    with open(path, encoding="ascii") as handle:
        for line in handle:
            fields = line.split()
            if fields and fields[0] == "cpu":
                ticks = dict(zip(_STAT_COLUMNS, (int(value) for value in fields[1:])))
                break
        else:
            return {}
    # libvirt folds nice into user and irq/softirq into kernel; do the same so both views agree.
    user = ticks.get("user", 0) + ticks.get("nice", 0)
    kernel = ticks.get("kernel", 0) + ticks.get("irq", 0) + ticks.get("softirq", 0)
    as_ns = {"user": user, "kernel": kernel, "idle": ticks.get("idle", 0), "iowait": ticks.get("iowait", 0)}
    return {f"cpu_{key}_ns": value * _NS_PER_S // ticks_per_s for key, value in sorted(as_ns.items())}
