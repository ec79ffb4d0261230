"""A decision's rejections in words: counted per reason and turned into text last, as
kube-scheduler answers ("0/3 hosts are available for instance 2 of 3: 2 insufficient RAM
(needs 4096 MB, most free 3500 MB), 1 down"), with the hosts that came closest to fitting."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
    RequestSpec,
    affinity_network,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_AFFINITY,
    REASON_AGGREGATE_EXTRA_SPECS,
    REASON_AGGREGATE_IMAGE_PROPERTIES,
    REASON_AGGREGATE_TENANT,
    REASON_AGGREGATE_TYPE,
    REASON_ANTI_AFFINITY,
    REASON_CAPABILITIES,
    REASON_DIFFERENT_HOST,
    REASON_HOST_DISABLED,
    REASON_HOST_DOWN,
    REASON_HOST_RULE,
    REASON_HOST_STALE,
    REASON_IGNORED,
    REASON_IMAGE_MISSING,
    REASON_IMAGE_PROPERTIES,
    REASON_IMAGE_REFUSED,
    REASON_INSUFFICIENT_DISK,
    REASON_INSUFFICIENT_RAM,
    REASON_INSUFFICIENT_VCPUS,
    REASON_ISOLATED,
    REASON_LARGER_THAN_HOST,
    REASON_METRICS_MISSING,
    REASON_NETWORK_MISSING,
    REASON_NOT_FORCED,
    REASON_NOT_NEAR,
    REASON_PCI_IN_USE,
    REASON_PCI_MISSING,
    REASON_NUMA,
    REASON_QUERY,
    REASON_RETRIED,
    REASON_SAME_HOST,
    REASON_TOO_MANY_INSTANCES,
    REASON_TOO_MANY_IO_OPS,
    REASON_WRONG_ZONE,
    RESOURCE_DISK,
    RESOURCE_LABELS,
    Number,
    Rejection,
    format_number,
    reason_kind,
)

# How many rejected hosts a compact explanation names: those that came closest to fitting.
CLOSEST_MISSES_SHOWN = 5

# Phrases that only count hosts; {zone}, {group}, {flavor}... come from the request.
_PLAIN_PHRASES = {
    REASON_HOST_DOWN: "down",
    REASON_HOST_DISABLED: "disabled",
    REASON_HOST_STALE: "stale (not synced for over {service_down_time} s)",
    REASON_IMAGE_MISSING: "without image {image} in the storage pool",
    REASON_IMAGE_REFUSED: "refusing image {image} (it could lead out of the pool)",
    REASON_NETWORK_MISSING: "without network {networks}",
    REASON_IGNORED: "ignored",
    REASON_NOT_FORCED: "not forced",
    REASON_WRONG_ZONE: "not in availability zone {zone}",
    REASON_AGGREGATE_EXTRA_SPECS: "aggregate metadata not matching the flavor's extra specs",
    REASON_CAPABILITIES: "capabilities not matching the flavor's extra specs",
    REASON_IMAGE_PROPERTIES: "not supporting the image's architecture/hypervisor/vm mode",
    REASON_AFFINITY: "affinity group {group}",
    REASON_ANTI_AFFINITY: "anti-affinity group {group}",
    REASON_SAME_HOST: "without the same_host instances",
    REASON_DIFFERENT_HOST: "with different_host instances",
    REASON_QUERY: "not matching the query hint",
    REASON_TOO_MANY_INSTANCES: "too many instances",
    REASON_TOO_MANY_IO_OPS: "too many io ops",
    REASON_AGGREGATE_TYPE: "in aggregates not taking flavor {flavor}",
    REASON_ISOLATED: "isolated",
    REASON_RETRIED: "already tried",
    REASON_AGGREGATE_IMAGE_PROPERTIES: "in aggregates isolating other image properties",
    REASON_AGGREGATE_TENANT: "in aggregates reserved for other projects than {project}",
    REASON_METRICS_MISSING: "without the weighed metrics",
    REASON_NOT_NEAR: "not in {near}",
    REASON_PCI_IN_USE: "with the requested devices in use ({devices})",
    REASON_PCI_MISSING: "without the requested devices ({devices})",
    REASON_NUMA: "without NUMA cells that fit (CPUs, pages or memory)",
    REASON_HOST_RULE: "against host rule {rules}",
}

_INSUFFICIENT_PHRASES = {
    REASON_INSUFFICIENT_RAM: "insufficient RAM (needs {needs} MB, most free {free} MB)",
    REASON_INSUFFICIENT_VCPUS: "insufficient vCPUs (needs {needs}, most free {free})",
    REASON_INSUFFICIENT_DISK: "insufficient disk (needs {needs} MB, most free {free} MB)",
}


@dataclass
class ReasonCount:
    """The hosts turned down for one reason: how many, and the numbers the summary prints."""

    reason: str
    resource: str | None
    count: int
    requested: Number | None
    most_free: Number | None
    first_position: int  # ties between equal counts keep the order hosts were given in

    def phrase(self, spec: RequestSpec) -> str:
        if self.reason in _INSUFFICIENT_PHRASES:
            return _INSUFFICIENT_PHRASES[self.reason].format(
                needs=format_number(self.requested) if self.requested is not None else "unknown",
                free=format_number(self.most_free) if self.most_free is not None else "unknown",
            )
        if self.reason == REASON_LARGER_THAN_HOST:
            label = RESOURCE_LABELS.get(self.resource or "", self.resource or "resources")
            if self.resource == RESOURCE_DISK and spec.volume_disk_mb:
                # A launch's volumes are asked for beside the flavor's disks (DiskFilter).
                return f"smaller than the flavor's {label} and the volumes"
            return f"smaller than the flavor's {label}"
        if self.reason in _PLAIN_PHRASES:
            group = spec.server_group.name if spec.server_group is not None else ""
            return _PLAIN_PHRASES[self.reason].format(
                zone=spec.availability_zone, group=group, flavor=spec.flavor.name,
                service_down_time=spec.service_down_time, image=spec.image_volume,
                networks=", ".join(spec.requested_networks), project=spec.project_id,
                near=affinity_network(spec.scheduler_hints),
                devices=spec.pci.describe() if spec.pci is not None else "",
                rules=", ".join(rule.name for rule in spec.host_rules if rule.hard))
        return self.reason.replace("_", " ")

    def to_dict(self, spec: RequestSpec) -> dict[str, Any]:
        return {"reason": self.reason, "resource": self.resource, "kind": reason_kind(self.reason),
                "count": self.count, "requested": self.requested, "most_free": self.most_free,
                "phrase": self.phrase(spec)}


def success_summary(hosts: Sequence[str]) -> str:
    noun = "instance" if len(hosts) == 1 else "instances"
    return f"placed {len(hosts)} {noun} on {', '.join(hosts)}"


def failure_summary(counts: Sequence[ReasonCount], hosts_total: int, failed_index: int,
                    count: int, spec: RequestSpec) -> str:
    """kube-scheduler style: '0/3 hosts are available for instance 2 of 3: 2 insufficient RAM
    (needs 4096 MB, most free 3500 MB), 1 down'; most common reason first."""
    head = f"0/{hosts_total} hosts are available for instance {failed_index + 1} of {count}"
    if not counts:
        return head
    parts = [f"{item.count} {item.phrase(spec)}" for item in counts]
    return f"{head}: {', '.join(parts)}"


def sort_counts(counts: Sequence[ReasonCount]) -> list[ReasonCount]:
    """Largest group first; equal groups in the order their first host was given."""
    return sorted(counts, key=lambda item: (-item.count, item.first_position))


def count_reasons(rejections: Sequence[tuple[int, Rejection]]) -> list[ReasonCount]:
    """Group (position, rejection) pairs by reason and resource, as the summary counts them."""
    counts: dict[tuple[str, str | None], ReasonCount] = {}
    for position, rejection in sorted(rejections, key=lambda pair: pair[0]):
        key = (rejection.reason, rejection.resource)
        item = counts.get(key)
        if item is None:
            counts[key] = ReasonCount(rejection.reason, rejection.resource, 1,
                                      rejection.requested, rejection.free, position)
            continue
        item.count += 1
        if rejection.free is not None and (item.most_free is None
                                           or rejection.free > item.most_free):
            item.most_free = rejection.free
    return sort_counts(list(counts.values()))


def closest_misses(rejections: Sequence[tuple[int, Rejection]]) -> list[tuple[int, Rejection]]:
    """The hosts that came closest to fitting: smallest resource shortfall as a fraction of
    the request, ties in host order."""
    scored = [(rejection.shortfall(), position, rejection) for position, rejection in rejections]
    ranked = sorted((item for item in scored if item[0] is not None),
                    key=lambda item: (item[0], item[1]))
    return [(position, rejection) for _rank, position, rejection in ranked[:CLOSEST_MISSES_SHOWN]]
