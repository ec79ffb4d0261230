from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.compute import (
    ComputeFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.core import CoreFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.disk import DiskFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.ram import RamFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import BaseWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.ram import RAMWeigher

# Listed by hand, not discovered: AnsiballZ ships module_utils by following static imports,
# so a directory scan would find nothing on a hypervisor.
FILTERS: dict[str, type[BaseHostFilter]] = {
    "ComputeFilter": ComputeFilter,
    "RamFilter": RamFilter,
    "CoreFilter": CoreFilter,
    "DiskFilter": DiskFilter,
}

WEIGHERS: dict[str, type[BaseWeigher]] = {
    "RAMWeigher": RAMWeigher,
}

DEFAULT_FILTERS = ["ComputeFilter", "RamFilter", "CoreFilter", "DiskFilter"]
DEFAULT_WEIGHERS = ["RAMWeigher"]
