from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import CORE_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler import rules
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import HostNumber
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.resource import (
    ResourceFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_INSUFFICIENT_VCPUS,
    RESOURCE_VCPUS,
    UNIT_VCPUS,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class CoreFilter(ResourceFilter):
    """Nova's Newton CoreFilter: vCPUs may be overcommitted by cpu_allocation_ratio."""

    name = CORE_FILTER
    resource = RESOURCE_VCPUS
    unit = UNIT_VCPUS
    short_reason = REASON_INSUFFICIENT_VCPUS
    limit_name = "vcpu"
    host_numbers = {"allocation_ratio": HostNumber(field="cpu_allocation_ratio")}

    def fit(self, values: Any, allocation_ratio: Any, spec: RequestSpec) -> rules.Fit:
        return rules.vcpu_fit(values.vcpus_total, values.vcpus_used, allocation_ratio,
                              spec.flavor.vcpus)
