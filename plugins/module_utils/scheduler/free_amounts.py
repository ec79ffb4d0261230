"""A host's free RAM and disk, written once: total - reserved - used, in MiB.

Two places compute them: the hypervisor's own account (host_facts.host_state, in Python, from
the domains it runs) and the ledger's tracker view (ledger.host_states.USAGE_COLUMNS, in SQL,
from the usage its sync summed). Both read this table and this arithmetic, which gives a
number from numbers and a SQL expression from SQLAlchemy columns alike. So reserved memory
counts as used, as in Nova, on either side. (vCPUs have no free amount: the host state carries
vcpus_used itself, and the filters apply the allocation ratio.)

Python 3.9: the hypervisor_facts module ships this file to hypervisors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping


@dataclass(frozen=True)
class FreeAmount:
    """One free amount: the host-state field and the names of its three terms."""

    field: str  # the host-state field it gives (free_ram_mb)
    total: str  # the capacity (total_usable_ram_mb), in units of mib_per_unit MiB
    mib_per_unit: int
    reserved: str  # the operator's reservation, in MiB (reserved_host_memory_mb)
    used: str  # the usage in MiB, named as the ledger's column (Nova's compute_nodes: memory_mb_used)

    def of(self, total: Any, reserved: Any, used: Any) -> Any:
        """total - reserved - used, in MiB: plain numbers give a number, columns an expression."""
        capacity = total if self.mib_per_unit == 1 else total * self.mib_per_unit
        return capacity - reserved - used


FREE_AMOUNTS = (
    FreeAmount("free_ram_mb", "total_usable_ram_mb", 1, "reserved_host_memory_mb", "memory_mb_used"),
    FreeAmount("free_disk_mb", "total_usable_disk_gb", 1024, "reserved_host_disk_mb", "disk_mb_used"),
)


def free_amounts(terms: Mapping[str, Any]) -> Dict[str, Any]:
    """Each free amount by its field, from ``terms``: a mapping (or a table's columns) that
    gives every FreeAmount's total, reserved and used by name."""
    return {amount.field: amount.of(terms[amount.total], terms[amount.reserved], terms[amount.used])
            for amount in FREE_AMOUNTS}
