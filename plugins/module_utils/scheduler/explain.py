from __future__ import annotations

from collections.abc import Sequence

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_HOST_DISABLED,
    REASON_HOST_DOWN,
    REASON_IGNORED,
    REASON_INSUFFICIENT_DISK,
    REASON_INSUFFICIENT_RAM,
    REASON_INSUFFICIENT_VCPUS,
    REASON_LARGER_THAN_HOST,
    REASON_NOT_FORCED,
    RESOURCE_LABELS,
    Rejection,
    format_number,
)

# The resource reasons put numbers in their phrase; these only count hosts.
_PLAIN_PHRASES = {
    REASON_HOST_DOWN: "down",
    REASON_HOST_DISABLED: "disabled",
    REASON_IGNORED: "ignored",
    REASON_NOT_FORCED: "not forced",
}

_INSUFFICIENT_PHRASES = {
    REASON_INSUFFICIENT_RAM: "insufficient RAM (needs {needs} MB, most free {free} MB)",
    REASON_INSUFFICIENT_VCPUS: "insufficient vCPUs (needs {needs}, most free {free})",
    REASON_INSUFFICIENT_DISK: "insufficient disk (needs {needs} MB, most free {free} MB)",
}


def success_summary(hosts: Sequence[str]) -> str:
    noun = "instance" if len(hosts) == 1 else "instances"
    return f"placed {len(hosts)} {noun} on {', '.join(hosts)}"


def failure_summary(
    rejections: Sequence[Rejection], hosts_total: int, failed_index: int, count: int
) -> str:
    """kube-scheduler style: '0/3 hosts are available for instance 2 of 3: 2 insufficient RAM
    (needs 4096 MB, most free 3500 MB), 1 down'; most common reason first."""
    head = f"0/{hosts_total} hosts are available for instance {failed_index + 1} of {count}"
    groups = group_rejections(rejections)
    if not groups:
        return head
    parts = [f"{len(members)} {_phrase(members)}" for members in groups]
    return f"{head}: {', '.join(parts)}"


def group_rejections(rejections: Sequence[Rejection]) -> list[list[Rejection]]:
    """Rejections grouped by reason and resource, largest group first, ties in first-seen order."""
    groups: dict[tuple[str, str | None], list[Rejection]] = {}
    for rejection in rejections:
        groups.setdefault((rejection.reason, rejection.resource), []).append(rejection)
    return sorted(groups.values(), key=len, reverse=True)


def _phrase(members: Sequence[Rejection]) -> str:
    first = members[0]
    if first.reason in _PLAIN_PHRASES:
        return _PLAIN_PHRASES[first.reason]
    if first.reason in _INSUFFICIENT_PHRASES:
        free_values = [member.free for member in members if member.free is not None]
        return _INSUFFICIENT_PHRASES[first.reason].format(
            needs=format_number(first.requested) if first.requested is not None else "unknown",
            free=format_number(max(free_values)) if free_values else "unknown",
        )
    if first.reason == REASON_LARGER_THAN_HOST:
        label = RESOURCE_LABELS.get(first.resource or "", first.resource or "resources")
        return f"smaller than the flavor's {label}"
    return first.reason.replace("_", " ")
