"""The engine's formulas, each written once, on plain numbers or NumPy arrays alike.

A filter answers one host in ``host_passes`` (the plain path) and every candidate at once in
``vector_rejects`` (vector.py); ``capacity.py`` asks ``host_passes`` again on a host with n
instances consumed. All three reach the arithmetic through the functions below, called with a
host's numbers or with arrays of every candidate's numbers, so a change to a rule is one change
here, and both paths compute the same IEEE operations in the same order (which is what lets
them agree bit for bit).

To stay valid for both kinds of argument, the functions only use arithmetic, comparisons and
``&`` / ``|`` between comparisons: never ``and``, ``or``, ``not``, ``~`` or ``if`` on an
argument (``~True`` is -2, and an array has no single truth value).

The other two pieces of the shape: a filter's per-host inputs that are not plain HostState
fields (an allocation ratio that aggregates may override, a limit) are declared once as
filters.base.HostNumber, which gives one host's value and from which vector.py builds the
column; and filters.resource.ResourceFilter turns one Fit into either a Rejection with its
numbers (host_passes) or the masks of vector_rejects, so the RAM, vCPU and disk filters are a
name, a resource and the fit function each.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class Fit(NamedTuple):
    """How one request fits a host's resource (all numbers in the resource's unit).

    ``applies`` is False where the rule has nothing to say (CoreFilter on a host reporting no
    CPUs); ``larger_than_host`` means never (the request exceeds the host's whole total, which
    no allocation ratio raises); ``short`` means not now (limit − used < requested). Each is a
    bool, or a bool array over the hosts.
    """

    applies: Any
    larger_than_host: Any
    short: Any
    requested: Any
    total: Any
    limit: Any
    used: Any
    free: Any


def overcommit_fit(total: Any, free: Any, allocation_ratio: Any, requested: Any) -> Fit:
    """Nova's Newton RamFilter and DiskFilter: limit = total × ratio, used = total − free (so
    what the tracker reserved counts as used), free for the request = limit − used."""
    limit = total * allocation_ratio
    used = total - free
    usable = limit - used
    return Fit(True, total < requested, usable < requested, requested, total, limit, used, usable)


def ram_fit(total_usable_ram_mb: Any, free_ram_mb: Any, ram_allocation_ratio: Any,
            requested_ram_mb: int) -> Fit:
    return overcommit_fit(total_usable_ram_mb, free_ram_mb, ram_allocation_ratio, requested_ram_mb)


def disk_fit(total_usable_disk_gb: Any, free_disk_mb: Any, disk_allocation_ratio: Any,
             requested_disk_mb: int) -> Fit:
    return overcommit_fit(total_usable_disk_gb * 1024, free_disk_mb, disk_allocation_ratio,
                          requested_disk_mb)


def vcpus_free(vcpus_total: Any, vcpus_used: Any, cpu_allocation_ratio: Any) -> Any:
    """vCPUs left under the overcommit limit: what CoreFilter compares and CPUWeigher weighs."""
    return vcpus_total * cpu_allocation_ratio - vcpus_used


def vcpu_fit(vcpus_total: Any, vcpus_used: Any, cpu_allocation_ratio: Any,
             requested_vcpus: int) -> Fit:
    """Nova's Newton CoreFilter. It fails open on a host that reports no CPUs: broken CPU
    collection should not empty the fleet."""
    applies = vcpus_total != 0
    free = vcpus_free(vcpus_total, vcpus_used, cpu_allocation_ratio)
    return Fit(applies, applies & (requested_vcpus > vcpus_total),
               applies & (free < requested_vcpus), requested_vcpus, vcpus_total,
               vcpus_total * cpu_allocation_ratio, vcpus_used, free)


def at_limit(count: Any, maximum: Any) -> Any:
    """A count that may not grow: instances, io ops, a group's members on a host (each filter
    passes while count < maximum)."""
    return count >= maximum


def stale(sync_age_s: Any, service_down_time: Any) -> Any:
    """Nova's "service is down": the last heartbeat (here, tracker sync) is too old. An unknown
    age is NaN, which never compares greater."""
    return sync_age_s > service_down_time
