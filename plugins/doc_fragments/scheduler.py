# The scheduler's operator settings (Nova's [filter_scheduler] options and their kin), for the
# modules that schedule: berth.fleet.schedule, berth.fleet.server, berth.fleet.capacity and the
# moves, berth.fleet.migrate and berth.fleet.resize, which decide with the moving run's settings.
# plugin_utils/settings.py lists them (SCHEDULER_SETTINGS); the documented defaults are the
# engine's RequestSpec's (a unit test compares them).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  enabled_filters:
    description:
      - Filters to run, in order (Nova's names), each with the options and host facts it reads.
      - C(ComputeFilter) - the host answered its last sync, no operator disabled it, and the
        sync is younger than O(service_down_time).
      - C(AvailabilityZoneFilter) - the host is in O(berth.fleet.schedule#module:availability_zone) - its own
        C(availability_zone), else its aggregates' C(availability_zone) metadata, else
        O(default_availability_zone); a value C(az1,az2) puts it in both zones, as in Nova.
      - C(RamFilter), C(CoreFilter), C(DiskFilter) - Nova's Newton formulas - limit = total x
        the host's C(ram_allocation_ratio) / C(cpu_allocation_ratio) / C(disk_allocation_ratio),
        pass if limit - used >= requested, and never larger than the host's total. Disk asks
        for root + ephemeral GiB + swap. C(CoreFilter) passes a host that reports no CPUs.
      - C(AggregateRamFilter), C(AggregateCoreFilter), C(AggregateDiskFilter) - the same with
        the ratio from the aggregates' metadata of the same name (the smallest where they
        disagree; one value that is not a number - the host's own ratio, as Nova).
      - C(ComputeCapabilitiesFilter) - the flavor's C(extra_specs) scoped C(capabilities:)
        (C(capabilities:cpu_info:vendor)) or unscoped and naming a host fact Nova's host state
        has too (C(hypervisor_type)) must match that fact with Nova's operators (C(=) at least,
        C(==), C(s==), C(<in>), C(<all-in>), C(<or>) ...). An unscoped key that names no such
        fact (C(ssd), C(availability_zone)) is left to C(AggregateInstanceExtraSpecsFilter), as
        in Nova.
      - C(ImagePropertiesFilter) - O(berth.fleet.schedule#module:image_properties) C(hw_architecture), C(img_hv_type)
        and C(hw_vm_mode) (canonical, see there) must be offered by one of the host's
        C(supported_instances), and C(img_hv_requested_version) met by C(hypervisor_version).
      - C(ServerGroupAntiAffinityFilter), C(ServerGroupAffinityFilter) - O(berth.fleet.schedule#module:server_group) with a
        hard C(anti-affinity) (at most C(max_server_per_host) members a host) or C(affinity)
        policy.
      - C(AggregateInstanceExtraSpecsFilter) - the flavor's extra specs unscoped or scoped
        C(aggregate_instance_extra_specs:) must each match a value of that metadata key in one
        of the host's aggregates (values split at commas).
      - C(SameHostFilter), C(DifferentHostFilter) - O(berth.fleet.schedule#module:scheduler_hints) C(same_host) /
        C(different_host) against the host's C(instances). Not defaults, as in Nova; a launch
        that gives the hint without its filter is refused.
      - C(JsonFilter) - O(berth.fleet.schedule#module:scheduler_hints) C(query); an empty query passes every host. Not a
        default; a launch that gives a query without it is refused.
      - C(NumInstancesFilter), C(AggregateNumInstancesFilter) - fewer than
        O(max_instances_per_host) instances (the aggregate variant reads the aggregates'
        metadata of the same name, an integer).
      - C(IoOpsFilter), C(AggregateIoOpsFilter) - fewer than O(max_io_ops_per_host) instances
        building or migrating (likewise).
      - C(AggregateTypeAffinityFilter) - a host whose aggregates set C(instance_type)
        (C(m1.small,m1.large)) takes only the flavors one of them lists.
      - C(IsolatedHostsFilter) - O(isolated_images) (by O(berth.fleet.schedule#module:image_id)) only on
        O(isolated_hosts); with O(restrict_isolated_hosts_to_isolated_images) those hosts take
        only those images.
      - C(AggregateImagePropertiesIsolation) - for each metadata key of the host's aggregates
        that O(berth.fleet.schedule#module:image_properties) also sets, the image's value must be one of the aggregate's
        (comma-separated); only keys under O(aggregate_image_properties_isolation_namespace)
        and O(aggregate_image_properties_isolation_separator) when a namespace is set. Any
        image property counts (Nova since Liberty reads only its standard ones).
      - C(AggregateMultiTenancyIsolation) - a host whose aggregates set C(filter_tenant_id)
        (or any key that starts with it; comma-separated projects) takes only instances of
        those projects (O(berth.fleet.schedule#module:project_id)).
      - C(MetricsFilter) - the host has every metric O(metrics_weight_setting) weighs, so that
        C(MetricsWeigher) never meets one without.
      - C(SimpleCIDRAffinityFilter) - O(berth.fleet.schedule#module:scheduler_hints) C(build_near_host_ip) and C(cidr)
        (default C(/24)) - the host's C(host_ip) must be in that network; a host whose address
        is unknown is passed over. Not a default; a launch that gives the hints without it is
        refused.
      - C(RetryFilter) - not a host and node of O(berth.fleet.schedule#module:retry_hosts).
      - C(AllHostsFilter) - passes every host.
      - C(PoolImageFilter) (Berth's own) - the host's storage pool holds the image volume
        O(berth.fleet.schedule#module:image_volume).
      - C(NetworkFilter) (Berth's own) - the host defines every network of O(berth.fleet.schedule#module:requested_networks).
      - C(PciPassthroughFilter) - the host has free the PCI devices the flavor's
        C(pci_passthrough:alias) asks for (by O(pci_alias); a PF while none of its VFs is held, a
        VF while its PF is not) and C(resources:VGPU) mediated devices of O(enabled_mdev_types)
        on one device; turned down as C(missing) when the host lacks them even with none held,
        as C(in use) otherwise, naming the short pool. NUMA affinity is the NUMA fitting's to
        check. Not in the default list, as in Nova - enable it for flavors that ask for devices.
      - C(NUMATopologyFilter) - the flavor's C(hw:) extra specs and the image's C(hw_)
        properties (C(hw:cpu_policy), C(hw:cpu_thread_policy), C(hw:mem_page_size),
        C(hw:numa_nodes), C(hw:numa_cpus.N), C(hw:numa_mem.N), C(hw:cpu_dedicated_mask),
        C(hw:emulator_threads_policy), with Nova's meanings and conflict rules; a bad or
        contradictory combination is refused before anything is decided, naming the spec) must
        fit onto the host's C(numa_topology) cells beside what its C(assignments) hold -
        dedicated CPUs from C(cpu_dedicated_set), shared ones over C(cpu_shared_set), pages of
        the asked size (total - reserved - used), per cell; the rejection says which cell was
        short. Not a default, as in Nova - enable it where flavors ask for NUMA placement. A
        request that asks nothing of the kind passes every host.
      - C(HostRuleFilter) (Berth's own) - the operator's hard host rules (C(must), C(must_not), written with
        M(berth.fleet.host_rule)) that select the instances - by their names, their server group or the
        O(berth.fleet.schedule#module:labels) given at launch - must hold on the host - in the rule's aggregate for
        C(must), outside it for C(must_not); the rejection names the rule. The claim re-checks them. Without such a
        rule it passes every host.
      - Filters Nova runs once per request (host up, zone, capabilities, image properties,
        aggregate extra specs, type, image isolation and tenants, isolated hosts, hints,
        CIDR) check the first instance only; so do Berth's image, network and host rule filters.
      - Default C(ComputeFilter), C(AvailabilityZoneFilter), C(RamFilter), C(CoreFilter),
        C(DiskFilter), C(ComputeCapabilitiesFilter), C(ImagePropertiesFilter),
        C(ServerGroupAntiAffinityFilter), C(ServerGroupAffinityFilter), C(PoolImageFilter),
        C(NetworkFilter), C(HostRuleFilter) (the last three do nothing unless the launch names an image volume or
        networks, or the operator writes a hard host rule).
    type: list
    elements: str
  weighers:
    description:
      - Weighers to apply (Nova's names), each with its multiplier option. Available, and
        the default, all of them -
      - C(RAMWeigher) - C(free_ram_mb); O(ram_weight_multiplier).
      - C(CPUWeigher) - free vCPUs, C(vcpus_total) x C(cpu_allocation_ratio) - C(vcpus_used);
        O(cpu_weight_multiplier).
      - C(DiskWeigher) - C(free_disk_mb); O(disk_weight_multiplier).
      - C(IoOpsWeigher) - C(num_io_ops); O(io_ops_weight_multiplier).
      - C(NumInstancesWeigher) - C(num_instances); O(num_instances_weight_multiplier).
      - C(ServerGroupSoftAffinityWeigher), C(ServerGroupSoftAntiAffinityWeigher) - the
        O(berth.fleet.schedule#module:server_group)'s members on the host (minus them for anti-affinity) for a
        C(soft-affinity) / C(soft-anti-affinity) group; O(soft_affinity_weight_multiplier),
        O(soft_anti_affinity_weight_multiplier).
      - C(MetricsWeigher) - O(metrics_weight_setting), O(metrics_required),
        O(metrics_weight_of_unavailable); O(metrics_weight_multiplier).
      - C(BuildFailureWeigher) - C(failed_builds), weighed with the multiplier negated, as
        Nova; O(build_failure_weight_multiplier).
      - C(HypervisorVersionWeigher) - C(hypervisor_version); O(hypervisor_version_weight_multiplier).
      - C(ImagePropertiesWeigher) - how many of the host's instances were built from images
        sharing O(berth.fleet.schedule#module:image_properties) (the host's C(instance_image_properties)),
        O(image_props_weight_setting); O(image_props_weight_multiplier), off by default.
      - C(PCIWeigher) - fewer free PCI devices weigh more (100 - the host's free devices whose ids
        an alias of O(pci_alias) matches, at most 99 counted, as Nova), so that instances without
        devices keep off the hosts with them; O(pci_weight_multiplier). Without aliases it
        weighs nothing.
      - C(HostRuleWeigher) (Berth's own) - the operator's soft host rules (C(should), C(should_not), written with
        M(berth.fleet.host_rule)) that select the instances - the sum of the weights of those the host satisfies
        (in a C(should) rule's aggregate, outside a C(should_not) rule's) less those it breaks;
        O(host_rule_weight_multiplier). Without such a rule it weighs nothing.
      - Not provided - Nova's C(CrossCellWeigher) (it weighs Nova's cells, which Berth has no
        counterpart of).
      - Each weigher's values are normalised to 0..1 over the candidates (RAM, CPU, disk and
        io-ops from a fixed lower bound 0, the others min-max), multiplied by its multiplier
        (per host - an aggregate's metadata of the multiplier's name overrides the option for
        its hosts, the smallest where aggregates disagree) and summed; ties keep the hosts'
        order.
    type: list
    elements: str
  ram_weight_multiplier:
    description: Nova's option; positive spreads instances over hosts, negative stacks them.
      Default 1.0. Like every multiplier, an aggregate's metadata of the same name overrides it
      for its hosts (the minimum where aggregates disagree).
    type: float
  cpu_weight_multiplier:
    description: Multiplier of free vCPUs (total x ratio - used). Default 1.0.
    type: float
  disk_weight_multiplier:
    description: Multiplier of free disk. Default 1.0.
    type: float
  io_ops_weight_multiplier:
    description: Multiplier of C(num_io_ops). Default -1.0 (busy hosts weigh less).
    type: float
  num_instances_weight_multiplier:
    description: Multiplier of C(num_instances), normalised min-max over the candidates. Default
      0.0 (not weighed); negative prefers emptier hosts.
    type: float
  soft_affinity_weight_multiplier:
    description: Multiplier of the group's members on the host for a C(soft-affinity) group. Default 1.0.
    type: float
  soft_anti_affinity_weight_multiplier:
    description: Multiplier of minus the group's members on the host for a C(soft-anti-affinity) group. Default 1.0.
    type: float
  metrics_weight_multiplier:
    description: Multiplier of the metrics weight (see O(metrics_weight_setting)). Default 1.0.
    type: float
  build_failure_weight_multiplier:
    description: Multiplier of C(failed_builds), negated as Nova does (hosts with recent failed
      builds weigh less). Default 1000000.0.
    type: float
  hypervisor_version_weight_multiplier:
    description: Multiplier of C(hypervisor_version). Default 1.0 (newer weighs more).
    type: float
  image_props_weight_multiplier:
    description:
      - Multiplier of C(ImagePropertiesWeigher). Default 0.0, which turns the weigher off (an
        aggregate's value does not turn it on, as in Nova); positive packs instances with
        the same image properties together, negative spreads them.
    type: float
  pci_weight_multiplier:
    description: Multiplier of C(PCIWeigher). Default 1.0; 0.0 turns it off.
    type: float
  host_rule_weight_multiplier:
    description: Multiplier of C(HostRuleWeigher) (the soft host rules). Default 1.0, as the soft affinity
      weighers; raise it for a soft rule to outweigh the free RAM and CPU weighers.
    type: float
  image_props_weight_setting:
    description:
      - Nova's C([filter_scheduler] image_props_weight_setting) - C(name=ratio) items. Each
        requested image property's matches count times its ratio, and a property not listed
        counts 0; empty, every property counts 1.
    type: list
    elements: str
    default: []
  metrics_weight_setting:
    description:
      - Nova's C([metrics] weight_setting) - C(name=ratio) items; the metrics weight is the sum
        of the host's C(metrics[name]) x ratio. C(MetricsFilter) passes only hosts that have
        all these metrics (a value that is not a number counts as missing).
    type: list
    elements: str
    default: []
  metrics_required:
    description:
      - Nova's C([metrics] required). True, a candidate without a weighed metric fails the
        request with an error that names the host and the metric (enable C(MetricsFilter) to
        pass over such hosts); false, such a host weighs O(metrics_weight_of_unavailable).
    type: bool
    default: true
  metrics_weight_of_unavailable:
    description: Metrics weight of a host missing a weighed metric, with O(metrics_required=false)
      (unless that metric's ratio times the host's multiplier is 0, when it is skipped).
    type: float
    default: -10000.0
  host_subset_size:
    description: Pick at random among this many best hosts (1 is deterministic).
    type: int
    default: 1
  seed:
    description: Seed for the random pick (and for O(driver=chance)), so a decision can be replayed.
    type: int
  driver:
    description: C(filter_scheduler) filters and weighs; C(chance) picks at random among the hosts
      that pass the filters, as Nova's ChanceScheduler did.
    type: str
    default: filter_scheduler
    choices: [filter_scheduler, chance]
  default_availability_zone:
    description: The zone of hosts that are in none (Nova's C(default_availability_zone)).
    type: str
    default: nova
  aggregate_image_properties_isolation_namespace:
    description: Nova's option - with it, C(AggregateImagePropertiesIsolation) reads only the
      aggregate metadata keys that start with this namespace and
      O(aggregate_image_properties_isolation_separator).
    type: str
  aggregate_image_properties_isolation_separator:
    description: Nova's option - what separates the namespace from the property name.
    type: str
    default: "."
  max_instances_per_host:
    description: C(NumInstancesFilter) limit (aggregate metadata of the same name overrides it for
      C(AggregateNumInstancesFilter)).
    type: int
    default: 50
  max_io_ops_per_host:
    description: C(IoOpsFilter) limit (aggregate metadata overrides it for C(AggregateIoOpsFilter)).
    type: int
    default: 8
  isolated_hosts:
    description: Hosts reserved for O(isolated_images) (C(IsolatedHostsFilter)).
    type: list
    elements: str
    default: []
  isolated_images:
    description: Images that run only on O(isolated_hosts).
    type: list
    elements: str
    default: []
  restrict_isolated_hosts_to_isolated_images:
    description: Whether isolated hosts take only isolated images.
    type: bool
    default: true
  explain:
    description:
      - How much of the decision's explanation to return. C(full) lists every rejected host with
        its first rejecting filter and numbers; C(compact) returns the counts per reason and the
        closest misses only (small at 100,000 hosts); C(auto) is C(full) up to 100 hosts.
    type: str
    default: auto
    choices: [auto, full, compact]
  engine:
    description: The engine's implementation - C(plain) (per host, as Nova), C(vectorized) (NumPy
      arrays, the same decisions faster on large fleets), C(auto) (vectorized from 200 hosts).
    type: str
    default: auto
    choices: [auto, plain, vectorized]
notes:
  - The scheduler's options above are the operator's settings - set them once as C(berth_<option>)
    (C(berth_enabled_filters), C(berth_weighers), C(berth_ram_weight_multiplier)...) in the
    controller's inventory or a job template; a task takes them from there where it does not set
    them, and a launch's extra variables of the bare names (C(-e enabled_filters=...)) are
    ignored, with a warning.
"""
