from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Union

Number = Union[int, float]

# Why a host was turned down. Kept as data so that callers can count, group and test them;
# the words come last (Rejection.message, explain.py).
REASON_HOST_DOWN = "host_down"
REASON_HOST_DISABLED = "host_disabled"
# The host's last tracker sync is older than service_down_time: as good as down.
REASON_HOST_STALE = "host_stale"
REASON_INSUFFICIENT_RAM = "insufficient_ram"
REASON_INSUFFICIENT_VCPUS = "insufficient_vcpus"
REASON_INSUFFICIENT_DISK = "insufficient_disk"
# "Never" rather than "not now": the instance is larger than the host's whole capacity.
REASON_LARGER_THAN_HOST = "larger_than_host"
REASON_IGNORED = "ignored"
REASON_NOT_FORCED = "not_forced"
REASON_WRONG_ZONE = "wrong_availability_zone"
REASON_AGGREGATE_EXTRA_SPECS = "aggregate_extra_specs"
REASON_CAPABILITIES = "capabilities"
REASON_IMAGE_PROPERTIES = "image_properties"
REASON_AFFINITY = "affinity"
REASON_ANTI_AFFINITY = "anti_affinity"
REASON_SAME_HOST = "same_host"
REASON_DIFFERENT_HOST = "different_host"
REASON_QUERY = "query"
REASON_TOO_MANY_INSTANCES = "too_many_instances"
REASON_TOO_MANY_IO_OPS = "too_many_io_ops"
REASON_AGGREGATE_TYPE = "aggregate_instance_type"
REASON_ISOLATED = "isolated"
REASON_RETRIED = "retried"
REASON_IMAGE_MISSING = "image_missing"
REASON_IMAGE_REFUSED = "image_refused"
REASON_NETWORK_MISSING = "network_missing"
REASON_AGGREGATE_IMAGE_PROPERTIES = "aggregate_image_properties"
REASON_AGGREGATE_TENANT = "aggregate_tenant"
REASON_METRICS_MISSING = "metrics_missing"
REASON_NOT_NEAR = "not_near"
# The host's devices that match the request are held by other instances (not now), or it has too
# few such devices even with none held (never): PciPassthroughFilter, detail says which pool.
REASON_PCI_IN_USE = "pci_devices_in_use"
REASON_PCI_MISSING = "pci_devices_missing"
# No NUMA cell (or set of cells) has the CPUs, pages or memory the instance asks: the detail
# says which cell was short of what.
REASON_NUMA = "numa"
# The host breaks one of the operator's hard host rules (HostRuleFilter): the detail names it.
REASON_HOST_RULE = "host_rule"

# "Not now" (kube's Unschedulable): the host would do once usage goes down. Every other reason
# is "never" (UnschedulableAndUnresolvable): only a change of the request or the fleet's
# configuration makes the host eligible.
KIND_NOT_NOW = "not_now"
KIND_NEVER = "never"
NOT_NOW_REASONS = frozenset({
    REASON_INSUFFICIENT_RAM, REASON_INSUFFICIENT_VCPUS, REASON_INSUFFICIENT_DISK,
    REASON_TOO_MANY_INSTANCES, REASON_TOO_MANY_IO_OPS, REASON_ANTI_AFFINITY, REASON_HOST_DOWN,
    # Like a host down, a metric missing is a gap in the facts the next sync may fill.
    REASON_HOST_STALE, REASON_METRICS_MISSING, REASON_PCI_IN_USE,
    # Mostly CPUs or pages other instances hold; a page size the host never offers says so in
    # its detail.
    REASON_NUMA,
})
# The reasons that come from what the instance asked for (its zone, group, hints, flavor's extra
# specs, image, project, networks), not from the host's room or state: what a move's
# explanation names as the constraints its launch recorded.
REQUEST_REASONS = frozenset({
    REASON_WRONG_ZONE, REASON_AFFINITY, REASON_ANTI_AFFINITY, REASON_SAME_HOST, REASON_DIFFERENT_HOST,
    REASON_QUERY, REASON_NOT_NEAR, REASON_CAPABILITIES, REASON_AGGREGATE_EXTRA_SPECS, REASON_IMAGE_PROPERTIES,
    REASON_AGGREGATE_TYPE, REASON_AGGREGATE_IMAGE_PROPERTIES, REASON_AGGREGATE_TENANT, REASON_NETWORK_MISSING,
    REASON_ISOLATED, REASON_PCI_MISSING,
})
# Resource shortfalls, the ones a "closest miss" is measured on.
SHORTFALL_REASONS = frozenset({
    REASON_INSUFFICIENT_RAM, REASON_INSUFFICIENT_VCPUS, REASON_INSUFFICIENT_DISK,
})


def reason_kind(reason: str) -> str:
    return KIND_NOT_NOW if reason in NOT_NOW_REASONS else KIND_NEVER


RESOURCE_RAM = "ram"
RESOURCE_VCPUS = "vcpus"
RESOURCE_DISK = "disk"

UNIT_MB = "MB"
UNIT_VCPUS = "vCPUs"

RESOURCE_LABELS = {RESOURCE_RAM: "RAM", RESOURCE_VCPUS: "vCPUs", RESOURCE_DISK: "disk"}


def format_number(value: Number) -> str:
    """Whole numbers without a fraction (limits are floats: total × ratio), others to 0.1."""
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return f"{value:.1f}"
    return str(value)


@dataclass
class Rejection:
    """Why one host cannot take the instance.

    For the resource filters: used and limit as the filter computed them (limit = total ×
    allocation ratio) and free = limit − used. For REASON_LARGER_THAN_HOST, limit is the
    host's total, which no ratio raises, and used/free are None. `detail` carries free text
    from the host, such as why it is down or disabled.
    """

    host: str
    filter: str
    reason: str
    requested: Number | None = None
    used: Number | None = None
    limit: Number | None = None
    free: Number | None = None
    unit: str | None = None
    resource: str | None = None
    detail: str | None = None

    def message(self) -> str:
        unit = self.unit or ""
        label = RESOURCE_LABELS.get(self.resource or "", self.resource or "")
        if self.reason in (REASON_INSUFFICIENT_RAM, REASON_INSUFFICIENT_VCPUS,
                           REASON_INSUFFICIENT_DISK):
            return (
                f"insufficient {label}: needs {_amount(self.requested, unit)}, "
                f"free {_amount(self.free, unit)} "
                f"(used {_amount(self.used)} of limit {_amount(self.limit, unit)})"
            )
        if self.reason == REASON_LARGER_THAN_HOST:
            # "needs 8 vCPUs" names its resource already; "needs 4096 MB" does not.
            needs = _amount(self.requested, unit)
            if unit != label:
                needs = f"{needs} {label}"
            has = _amount(self.limit) if unit == UNIT_VCPUS else _amount(self.limit, unit)
            return f"larger than the host: needs {needs}, host has {has}"
        if self.reason == REASON_HOST_DOWN:
            return _with_detail("host down", self.detail)
        if self.reason == REASON_HOST_DISABLED:
            return _with_detail("host disabled", self.detail)
        if self.reason == REASON_HOST_STALE:
            return (f"stale: last synced {_amount(self.used)} s ago "
                    f"(service_down_time {_amount(self.limit)} s)")
        if self.reason == REASON_IMAGE_REFUSED:
            return f"image refused: {self.detail}"
        if self.reason == REASON_IGNORED:
            return f"ignored: listed in {self.filter}"
        if self.reason == REASON_NOT_FORCED:
            return f"not forced: not listed in {self.filter}"
        if self.reason == REASON_ANTI_AFFINITY:
            return (f"anti-affinity {self.detail}: {_amount(self.used)} member(s) here, "
                    f"max_server_per_host {_amount(self.limit)}")
        if self.reason in (REASON_TOO_MANY_INSTANCES, REASON_TOO_MANY_IO_OPS):
            what = "instances" if self.reason == REASON_TOO_MANY_INSTANCES else "io ops"
            return f"too many {what}: {_amount(self.used)}, limit {_amount(self.limit)}"
        return _with_detail(self.reason.replace("_", " "), self.detail)

    @property
    def kind(self) -> str:
        return reason_kind(self.reason)

    def shortfall(self) -> float | None:
        """How far from fitting, as a fraction of the request; None unless a resource fell short."""
        if (self.reason not in SHORTFALL_REASONS or self.requested is None or self.free is None
                or not self.requested):
            return None
        return (self.requested - self.free) / self.requested

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["message"] = self.message()
        data["kind"] = self.kind
        return data


@dataclass
class WeightDetail:
    """One weigher's part in a host's weight: weighted = normalized × multiplier."""

    name: str
    raw: Number
    normalized: float
    multiplier: float
    weighted: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _amount(value: Number | None, unit: str = "") -> str:
    text = "unknown" if value is None else format_number(value)
    return f"{text} {unit}" if unit else text


def _with_detail(text: str, detail: str | None) -> str:
    return f"{text}: {detail}" if detail else text
