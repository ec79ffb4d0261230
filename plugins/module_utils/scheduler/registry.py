"""Every filter and weigher by name: the classes the driver runs for the names a request gives
(each name declared once, in names.py)."""
from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import BaseHostFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import BaseWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.compute import ComputeFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.availability_zone import AvailabilityZoneFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.ram import RamFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.core import CoreFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.disk import DiskFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_ram import AggregateRamFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_core import AggregateCoreFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_disk import AggregateDiskFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.compute_capabilities import ComputeCapabilitiesFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.image_properties import ImagePropertiesFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.server_group_anti_affinity import ServerGroupAntiAffinityFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.server_group_affinity import ServerGroupAffinityFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_instance_extra_specs import AggregateInstanceExtraSpecsFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.same_host import SameHostFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.different_host import DifferentHostFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.json_filter import JsonFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.num_instances import NumInstancesFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_num_instances import AggregateNumInstancesFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.io_ops import IoOpsFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_io_ops import AggregateIoOpsFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_type_affinity import AggregateTypeAffinityFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.isolated_hosts import IsolatedHostsFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.retry import RetryFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.all_hosts import AllHostsFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.pool_image import PoolImageFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.network import NetworkFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_image_properties_isolation import AggregateImagePropertiesIsolation
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_multitenancy_isolation import AggregateMultiTenancyIsolation
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.metrics import MetricsFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.simple_cidr_affinity import SimpleCIDRAffinityFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.pci_passthrough import PciPassthroughFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.host_rule import HostRuleFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.numa_topology import NUMATopologyFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.ram import RAMWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.cpu import CPUWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.disk import DiskWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.io_ops import IoOpsWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.num_instances import NumInstancesWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.soft_affinity import ServerGroupSoftAffinityWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.soft_anti_affinity import ServerGroupSoftAntiAffinityWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.metrics import MetricsWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.build_failure import BuildFailureWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.hypervisor_version import HypervisorVersionWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.image_properties import ImagePropertiesWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.pci import PCIWeigher
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.host_rule import HostRuleWeigher

# Listed by hand, not discovered: AnsiballZ ships module_utils by following static imports,
# so a directory scan would find nothing on a hypervisor. Each class carries its name from
# names.py, which the request, below the filters, checks its names against. A new filter or
# weigher is one file, its line in names.py and its line here (with its import), in the same
# order (test_registry.py holds the three together).
FILTERS: dict[str, type[BaseHostFilter]] = {host_filter.name: host_filter for host_filter in (
    ComputeFilter,
    AvailabilityZoneFilter,
    RamFilter,
    CoreFilter,
    DiskFilter,
    AggregateRamFilter,
    AggregateCoreFilter,
    AggregateDiskFilter,
    ComputeCapabilitiesFilter,
    ImagePropertiesFilter,
    ServerGroupAntiAffinityFilter,
    ServerGroupAffinityFilter,
    AggregateInstanceExtraSpecsFilter,
    SameHostFilter,
    DifferentHostFilter,
    JsonFilter,
    NumInstancesFilter,
    AggregateNumInstancesFilter,
    IoOpsFilter,
    AggregateIoOpsFilter,
    AggregateTypeAffinityFilter,
    IsolatedHostsFilter,
    RetryFilter,
    AllHostsFilter,
    PoolImageFilter,
    NetworkFilter,
    AggregateImagePropertiesIsolation,
    AggregateMultiTenancyIsolation,
    MetricsFilter,
    SimpleCIDRAffinityFilter,
    NUMATopologyFilter,
    PciPassthroughFilter,
    HostRuleFilter,
)}

WEIGHERS: dict[str, type[BaseWeigher]] = {weigher.name: weigher for weigher in (
    RAMWeigher,
    CPUWeigher,
    DiskWeigher,
    IoOpsWeigher,
    NumInstancesWeigher,
    ServerGroupSoftAffinityWeigher,
    ServerGroupSoftAntiAffinityWeigher,
    MetricsWeigher,
    BuildFailureWeigher,
    HypervisorVersionWeigher,
    ImagePropertiesWeigher,
    PCIWeigher,
    HostRuleWeigher,
)}
