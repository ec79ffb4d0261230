"""Small, explicit test data: a roomy host and a small flavor, changed per test."""
from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import FILTERS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec


def make_host(host: str = "hv1", **overrides: Any) -> HostState:
    values: dict[str, Any] = {
        "host": host,
        "uuid": f"uuid-{host}",
        "vcpus_total": 8,
        "vcpus_used": 0,
        "total_usable_ram_mb": 16384,
        "free_ram_mb": 16384 - 512,  # the default reserved memory, as the tracker reports it
        "total_usable_disk_gb": 100,
        "free_disk_mb": 100 * 1024,
    }
    values.update(overrides)
    return HostState(**values)


def make_flavor(**overrides: Any) -> Flavor:
    values: dict[str, Any] = {"name": "test", "vcpus": 1, "memory_mb": 2048, "root_gb": 20}
    values.update(overrides)
    return Flavor(**values)


def make_spec(flavor: Flavor | None = None, **overrides: Any) -> RequestSpec:
    """A request weighed by RAM only, unless told otherwise, so weights stay easy to check by
    hand; the tests of the defaults pass weighers=DEFAULT_WEIGHERS."""
    overrides.setdefault("weighers", ["RAMWeigher"])
    return RequestSpec(flavor=flavor or make_flavor(), **overrides)


def aggregate(name: str, **metadata: Any) -> dict[str, Any]:
    return {"name": name, "metadata": metadata}


def verdict(filter_name: str, host: HostState, spec: RequestSpec) -> tuple[str, Any] | None:
    """None when the host passes the filter, else (reason, detail) of the rejection."""
    rejection = FILTERS[filter_name]().host_passes(host, spec)
    return None if rejection is None else (rejection.reason, rejection.detail)
