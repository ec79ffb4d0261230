"""Every placement filter's and weigher's name, each declared once, and each weigher's multiplier
option beside its name (as kube-scheduler declares its plugins' names in one file).

It sits at the bottom of the engine's layers and imports nothing, so that everything may take
the names from here: the request (request_spec.py, below the filters) checks the names it is
given against them, each class takes its ``name`` (and a weigher its ``multiplier_option``),
and registry.py maps each name to its class. A new filter is its file, one line here and one
in the registry; tests/unit/plugins/module_utils/scheduler/test_registry.py fails when the
three disagree.
"""
from __future__ import annotations

_filters: list[str] = []
_multiplier_options: dict[str, str] = {}


def _filter(name: str) -> str:
    """Declare a filter's name; the order of the declarations is the registry's."""
    _filters.append(name)
    return name


def _weigher(name: str, multiplier_option: str) -> tuple[str, str]:
    """Declare a weigher's name and its multiplier option: the key of weight_multipliers, of
    the module's options and of aggregate metadata that scales it."""
    _multiplier_options[name] = multiplier_option
    return name, multiplier_option


COMPUTE_FILTER = _filter("ComputeFilter")
AVAILABILITY_ZONE_FILTER = _filter("AvailabilityZoneFilter")
RAM_FILTER = _filter("RamFilter")
CORE_FILTER = _filter("CoreFilter")
DISK_FILTER = _filter("DiskFilter")
AGGREGATE_RAM_FILTER = _filter("AggregateRamFilter")
AGGREGATE_CORE_FILTER = _filter("AggregateCoreFilter")
AGGREGATE_DISK_FILTER = _filter("AggregateDiskFilter")
COMPUTE_CAPABILITIES_FILTER = _filter("ComputeCapabilitiesFilter")
IMAGE_PROPERTIES_FILTER = _filter("ImagePropertiesFilter")
SERVER_GROUP_ANTI_AFFINITY_FILTER = _filter("ServerGroupAntiAffinityFilter")
SERVER_GROUP_AFFINITY_FILTER = _filter("ServerGroupAffinityFilter")
AGGREGATE_INSTANCE_EXTRA_SPECS_FILTER = _filter("AggregateInstanceExtraSpecsFilter")
SAME_HOST_FILTER = _filter("SameHostFilter")
DIFFERENT_HOST_FILTER = _filter("DifferentHostFilter")
JSON_FILTER = _filter("JsonFilter")
NUM_INSTANCES_FILTER = _filter("NumInstancesFilter")
AGGREGATE_NUM_INSTANCES_FILTER = _filter("AggregateNumInstancesFilter")
IO_OPS_FILTER = _filter("IoOpsFilter")
AGGREGATE_IO_OPS_FILTER = _filter("AggregateIoOpsFilter")
AGGREGATE_TYPE_AFFINITY_FILTER = _filter("AggregateTypeAffinityFilter")
ISOLATED_HOSTS_FILTER = _filter("IsolatedHostsFilter")
RETRY_FILTER = _filter("RetryFilter")
ALL_HOSTS_FILTER = _filter("AllHostsFilter")
POOL_IMAGE_FILTER = _filter("PoolImageFilter")
NETWORK_FILTER = _filter("NetworkFilter")
AGGREGATE_IMAGE_PROPERTIES_ISOLATION = _filter("AggregateImagePropertiesIsolation")
AGGREGATE_MULTITENANCY_ISOLATION = _filter("AggregateMultiTenancyIsolation")
METRICS_FILTER = _filter("MetricsFilter")
SIMPLE_CIDR_AFFINITY_FILTER = _filter("SimpleCIDRAffinityFilter")
NUMA_TOPOLOGY_FILTER = _filter("NUMATopologyFilter")
PCI_PASSTHROUGH_FILTER = _filter("PciPassthroughFilter")
HOST_RULE_FILTER = _filter("HostRuleFilter")

RAM_WEIGHER, RAM_WEIGHT_MULTIPLIER = _weigher("RAMWeigher", "ram_weight_multiplier")
CPU_WEIGHER, CPU_WEIGHT_MULTIPLIER = _weigher("CPUWeigher", "cpu_weight_multiplier")
DISK_WEIGHER, DISK_WEIGHT_MULTIPLIER = _weigher("DiskWeigher", "disk_weight_multiplier")
IO_OPS_WEIGHER, IO_OPS_WEIGHT_MULTIPLIER = _weigher("IoOpsWeigher", "io_ops_weight_multiplier")
NUM_INSTANCES_WEIGHER, NUM_INSTANCES_WEIGHT_MULTIPLIER = _weigher(
    "NumInstancesWeigher", "num_instances_weight_multiplier")
SOFT_AFFINITY_WEIGHER, SOFT_AFFINITY_WEIGHT_MULTIPLIER = _weigher(
    "ServerGroupSoftAffinityWeigher", "soft_affinity_weight_multiplier")
SOFT_ANTI_AFFINITY_WEIGHER, SOFT_ANTI_AFFINITY_WEIGHT_MULTIPLIER = _weigher(
    "ServerGroupSoftAntiAffinityWeigher", "soft_anti_affinity_weight_multiplier")
METRICS_WEIGHER, METRICS_WEIGHT_MULTIPLIER = _weigher("MetricsWeigher", "metrics_weight_multiplier")
BUILD_FAILURE_WEIGHER, BUILD_FAILURE_WEIGHT_MULTIPLIER = _weigher(
    "BuildFailureWeigher", "build_failure_weight_multiplier")
HYPERVISOR_VERSION_WEIGHER, HYPERVISOR_VERSION_WEIGHT_MULTIPLIER = _weigher(
    "HypervisorVersionWeigher", "hypervisor_version_weight_multiplier")
IMAGE_PROPERTIES_WEIGHER, IMAGE_PROPS_WEIGHT_MULTIPLIER = _weigher(
    "ImagePropertiesWeigher", "image_props_weight_multiplier")
PCI_WEIGHER, PCI_WEIGHT_MULTIPLIER = _weigher("PCIWeigher", "pci_weight_multiplier")
HOST_RULE_WEIGHER, HOST_RULE_WEIGHT_MULTIPLIER = _weigher("HostRuleWeigher", "host_rule_weight_multiplier")

# Every filter a request may name, in the order of their declarations above (error messages
# list them so); every weigher with its multiplier option, likewise.
FILTER_NAMES = tuple(_filters)
WEIGHER_MULTIPLIER_OPTIONS = dict(_multiplier_options)
