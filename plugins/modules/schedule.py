#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done on the controller by the action plugin of the same name
# (plugins/action/schedule.py); this file carries the documentation.
from __future__ import annotations

DOCUMENTATION = r"""
module: schedule
short_description: Place instances on libvirt hypervisors as Nova's FilterScheduler does, and claim them
version_added: 0.1.0
description:
  - Decides, for each of O(count) instances named C(<name>-1) .. C(<name>-<count>), which
    hypervisor it goes to. Hosts are filtered (O(enabled_filters)), the survivors weighed, the best
    taken, and its resources consumed before the next instance is placed, as Nova's
    FilterScheduler does.
  - Instances of those names that the ledger already holds (ACTIVE or BUILDING) are left alone,
    so a second identical run changes nothing. Instances in ERROR are placed again.
  - By default (O(source=ledger)) the hosts are the ledger's hypervisors as the tracker sync
    (C(playbooks/gather.yml), M(berth.fleet.tracker_sync)) last recorded them, with the ledger's
    claims and unmanaged domains as their usage, as Nova's scheduler reads compute nodes from its
    database. One read of one table gives every host's capacity, usage and status, straight into
    the engine's columns; facts only some filters read (capabilities, metrics, images,
    networks) are read only when the request's filters need them. No inventory of the
    hypervisors is needed and none is contacted, at any fleet size. A hypervisor not synced for
    O(service_down_time) seconds is stale and never picked, and the decision says so.
  - O(source=inventory) decides on the live facts the P(berth.fleet.hypervisors#inventory)
    inventory plugin gathered at the start of the play (C(berth_host_state)), synced into the
    ledger first, with the ledger's usage - for labs and small fleets. O(hosts) decides for host
    states given by hand ("what if", replays).
  - With the ledger on, the chosen hosts are claimed in one transaction that re-checks each
    host's room from the ledger itself; a lost race decides again with fresh usage. Either every
    instance is placed and claimed, or none is.
  - When no host fits, the task fails before anything is claimed or defined, with a summary
    (C(0/3 hosts are available for instance 1 of 1 ...)) and each host's reason with numbers.
  - Runs on the controller; it needs no connection to the hypervisors.
options:
  name:
    description:
      - Base name of the instances; each is C(<name>-<index>) and must be a DNS label.
      - An instance named as a hypervisor of the fleet (the ledger's, or a host of the play's
        O(hypervisor_group)), in any case, is refused before anything is claimed, since
        C(berth.fleet.instances) lists instances as inventory hosts of their names.
    type: str
    required: true
  count:
    description: How many instances are wanted under O(name) (1 to 1000).
    type: int
    default: 1
  flavor:
    description:
      - A flavor name from O(flavors_file) (Nova's m1.tiny .. m1.xlarge are shipped), or an inline
        dict with C(vcpus), C(memory_mb) (MiB), C(root_gb), C(ephemeral_gb) (GiB) and C(swap) (MiB),
        and optionally C(name).
    type: raw
    required: true
  flavors_file:
    description: A YAML file with a mapping C(berth_flavors) of name to sizes; default the collection's C(playbooks/vars/flavors.yml).
    type: path
  source:
    description:
      - Where the host states come from when O(hosts) is not given.
      - V(ledger), the default - the tracker sync's last record of every hypervisor plus the
        ledger's claims. Needs O(ledger=true) and a ledger that C(playbooks/gather.yml) has synced.
        It scales to any fleet (one read; no hypervisor contacted) and is what several
        controllers share.
      - V(inventory) - the C(berth_host_state) of each host of O(hypervisor_group), gathered
        live by the inventory plugin (its source's C(gather_facts=true)), synced into the
        ledger before deciding (outside check mode), with the ledger's usage when O(ledger=true).
    type: str
    choices: [ledger, inventory]
    default: ledger
  service_down_time:
    description:
      - Nova's option - a hypervisor whose last tracker sync is older than this many seconds is
        stale - down for C(ComputeFilter), never picked, and reported as such
        (C(stale - last synced 412 s ago)). The default fits a gather.yml scheduled every few
        minutes. Live facts (O(source=inventory), O(hosts)) have no age.
    type: int
    default: 600
  image_volume:
    description:
      - The image volume a host's storage pool must hold (C(PoolImageFilter)), as
        M(berth.fleet.instance_request) returns it - the launch's image, unless it has a
        C(source) to upload it where it is missing. A host whose pool holds a volume of that
        name that the tracker sync refused (a link, a backing file outside the pool) is passed
        over with why.
    type: str
  requested_networks:
    description: The libvirt networks a host must define (C(NetworkFilter)).
    type: list
    elements: str
    default: []
  hosts:
    description:
      - Explicit host states to decide for instead of the ledger's or the inventory's ("what if",
        or replaying a recorded decision), in the schema of the inventory's C(berth_host_state);
        usually with O(ledger=false), which decides without claiming anything.
      - Required in each, Nova's HostState names and units - C(host) (name), C(vcpus_total),
        C(vcpus_used), C(total_usable_ram_mb), C(free_ram_mb) (total - reserved - used, may be
        negative), C(total_usable_disk_gb), C(free_disk_mb).
      - Optional - C(nodename) (libvirt hostname, default C(host)), C(uuid) (libvirt host UUID),
        C(service_up) (default true), C(disabled) (default false), C(disabled_reason),
        C(down_reason), C(num_instances), C(num_io_ops) (instances building or migrating),
        C(cpu_allocation_ratio) (default 4.0), C(ram_allocation_ratio) (1.0),
        C(disk_allocation_ratio) (1.0), C(reserved_host_memory_mb) (512, informational, already
        taken off C(free_ram_mb)), C(reserved_host_disk_mb) (0), C(hypervisor_type) (C(QEMU)),
        C(hypervisor_version) (libvirt integer, 9000000 for 9.0.0), C(supported_instances)
        (list of [arch, hypervisor type, vm mode], e.g. [x86_64, kvm, hvm]), C(cpu_info)
        (mapping - model, vendor, features, topology), C(aggregates) (list of C({name, metadata})
        - metadata keys read - C(availability_zone), C(ram_allocation_ratio),
        C(cpu_allocation_ratio), C(disk_allocation_ratio), C(max_instances_per_host),
        C(max_io_ops_per_host), C(instance_type), C(filter_tenant_id*), any
        C(*_weight_multiplier), any key the flavor's extra specs name, and any image property
        name for C(AggregateImagePropertiesIsolation)), C(availability_zone) (else the
        aggregates', else O(default_availability_zone)), C(metrics) (mapping name to number),
        C(instances) (uuids of the instances on the host, for the same/different host hints),
        C(instance_image_properties) (one mapping per instance on the host - its image's
        properties, for C(ImagePropertiesWeigher)), C(host_ip) (the host's IP address, for
        C(SimpleCIDRAffinityFilter)), C(failed_builds) (recent failed builds, for
        C(BuildFailureWeigher)), C(images) and C(refused_images) (C({name - why})),
        C(networks), C(sync_age_s) (seconds since its last sync), C(numa_topology) (its cells,
        CPU sets and C(reserved_pages), for C(NUMATopologyFilter)), C(pci_devices) (the host's PCI
        devices as the tracker sync records them, for C(PciPassthroughFilter) and C(PCIWeigher))
        and C(assignments) (what each instance on the host holds of its cells, CPUs, pages and
        devices - docs C(numa.rst)).
      - Other fields of C(berth_host_state) (domains, orphans, pools, hv_memory_*,
        pci_devices_skipped) are accepted and not used for placement.
    type: list
    elements: dict
  hypervisor_group:
    description: The inventory group whose hosts carry C(berth_host_state) (O(source=inventory)).
    type: str
    default: hypervisors
  max_attempts:
    description: Builds tried per instance; each placement comes with up to O(max_attempts) - 1 alternates.
      An operator setting (C(berth_max_attempts)), Nova's C([scheduler] max_attempts).
    type: int
    default: 3
  ignore_hosts:
    description: Hosts never to use.
    type: list
    elements: str
    default: []
  force_hosts:
    description: Use only these hosts and skip the filters (as Nova does); the claim still checks room.
      An operator setting (C(berth_force_hosts)) - an administrator's privilege in Nova.
    type: list
    elements: str
    default: []
  force_nodes:
    description: Like O(force_hosts), by libvirt hostname.
    type: list
    elements: str
    default: []
  availability_zone:
    description: Only hosts in this zone (C(AvailabilityZoneFilter)).
    type: str
  image_id:
    description: The image's id, for O(isolated_images).
    type: str
  image_properties:
    description:
      - The image's properties. C(ImagePropertiesFilter) reads C(hw_architecture) (or
        C(architecture)), C(img_hv_type) (or C(hypervisor_type)), C(hw_vm_mode) (or
        C(vm_mode)) and C(img_hv_requested_version) (e.g. C(>=6.0));
        C(AggregateImagePropertiesIsolation) and C(ImagePropertiesWeigher) read any property.
      - Architecture, hypervisor type and vm mode are made canonical first, as Nova does
        (C(x86_32), C(i486) to C(i686), C(amd64) to C(x86_64), C(xapi) to C(xen), C(hv) to
        C(hvm), C(pv) to C(xen)); a value Nova does not know is refused with the values
        allowed. The placed instances record these properties.
    type: dict
    default: {}
  labels:
    description:
      - Short names the operator's host rules (M(berth.fleet.host_rule)) select the instances by; with the ledger,
        the rules that select them (by these labels, the instances' names or O(server_group)) apply.
    type: list
    elements: str
    default: []
  scheduler_hints:
    description:
      - Nova's scheduler hints - C(same_host) and C(different_host) (instance uuids, for
        C(SameHostFilter) and C(DifferentHostFilter)), C(query) (a JSON expression for
        C(JsonFilter), e.g. C([">=", "$free_ram_mb", 1024])), C(group) (the server group's name;
        must match O(server_group)), C(build_near_host_ip) and C(cidr) (an IP address and a
        prefix such as C(/24), the default, for C(SimpleCIDRAffinityFilter)).
      - A hint whose filter O(enabled_filters) lacks (none of those four is a default, as in
        Nova), or a C(cidr) without C(build_near_host_ip), is refused before anything is decided
        or claimed, naming the hint and what it needs - C(scheduler_hints.different_host needs
        DifferentHostFilter, which enabled_filters lacks) - add the filter (the operator's
        C(berth_enabled_filters)) or drop the hint. Nova ignores such a hint without a word;
        Berth does not, because a requester who asks for C(different_host) (from an AWX survey,
        say) expects it to hold, and would otherwise get an instance beside the one to avoid and
        a decision that says no host was removed.
      - A move (migrate, drain, resize) schedules with the hints its instance recorded at launch
        and the moving run's O(enabled_filters); a hint that no enabled filter reads there does
        not stop the move - an instance that exists must stay movable - but the move warns,
        naming it, and its C(why) says the hint was not held.
    type: dict
    default: {}
  project_id:
    description:
      - The project the instances belong to (Nova's C(project_id)), recorded on each; for
        C(AggregateMultiTenancyIsolation). One team needs no other than the default.
      - An operator setting (C(berth_project_id)) - Nova takes the project from the caller's identity.
    type: str
    default: default
  retry_hosts:
    description:
      - What this instance was already tried on, for C(RetryFilter) - C([host, nodename])
        pairs, compared as pairs as Nova does, or a host name alone for all its nodes.
    type: list
    elements: raw
    default: []
  lease_seconds:
    description: How long a BUILDING claim is held for its run before a sync may release it.
    type: int
    default: 3600
  server_group:
    description:
      - The server group the instances join. A name is a group of the ledger (made with
        M(berth.fleet.server_group)); its members' hosts are read from the ledger, and the
        group is locked while the instances are claimed, so concurrent runs cannot break a hard
        C(affinity) or C(anti-affinity) policy.
      - A dict describes a group by hand for "what if" decisions; nothing is locked or written
        for it - C(name), C(policy) (C(affinity), C(anti-affinity), C(soft-affinity),
        C(soft-anti-affinity)), C(rules) (C({max_server_per_host}), anti-affinity only, default 1),
        C(hosts) (hosts that already hold members; each counts one member unless C(members) says
        otherwise), C(members) (mapping of host to its number of members).
      - Each placed instance joins the group on its host before the next one is placed.
    type: raw
  ha:
    description:
      - Mark the claimed instances HA - restarted on another hypervisor when their own fails,
        highest O(ha_priority) first (M(berth.fleet.ha_restart)); as M(berth.fleet.server)'s
        option of that name, for the roles' launch. M(berth.fleet.instance_ha) changes it later.
      - The operator's C(berth_failover_hosts) keeps room to restart them; a placement that would take that
        room is refused or warned (C(berth_failover_enforce)).
    type: bool
    default: false
  ha_priority:
    description: The instances' place in the HA restart order, from 0 to 1000, highest first.
    type: int
    default: 0
  ledger:
    description: Use the ledger (claims, identity). Off, the module only decides.
    type: bool
    default: true
  ledger_url:
    description:
      - SQLAlchemy URL of the ledger. Not given, the play's variable C(berth_ledger_url) (set once in an
        inventory), else C($BERTH_LEDGER_URL), else C(sqlite:///$XDG_STATE_HOME/berth/ledger.sqlite3)
        (C(~/.local/state/berth/ledger.sqlite3)).
      - Never printed; its password is hidden in every message.
    type: str
extends_documentation_fragment:
  - berth.fleet.scheduler
  - berth.fleet.devices
  - berth.fleet.uri_policy
  - berth.fleet.limits
  - berth.fleet.headroom
  - berth.fleet.packing
attributes:
  check_mode:
    support: full
    description: Decides and returns the plan; claims nothing.
  diff_mode:
    support: none
    description: Nothing to show.
author:
  - Berth developers (@berth)
"""

EXAMPLES = r"""
- name: Place three m1.small instances named web
  berth.fleet.schedule:
    name: web
    count: 3
    flavor: m1.small
  register: plan

- name: Three web servers on three different hosts in zone az1, never on hv9
  berth.fleet.schedule:
    name: web
    count: 3
    flavor: m1.small
    availability_zone: az1
    ignore_hosts: [hv9]
    server_group: {name: web, policy: anti-affinity}

- name: What if — decide for hosts described by hand, claiming nothing
  berth.fleet.schedule:
    name: db
    flavor: {vcpus: 4, memory_mb: 8192, root_gb: 40}
    ledger: false
    hosts:
      - {host: a, nodename: a, uuid: "1", service_up: true, vcpus_total: 8, vcpus_used: 2,
         total_usable_ram_mb: 16384, free_ram_mb: 4000, total_usable_disk_gb: 500, free_disk_mb: 400000}
"""

RETURN = r"""
placements:
  description: The instances placed by this run, in order.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Instance name., type: str}
    uuid: {description: Instance UUID in the ledger (null in check mode or without the ledger)., type: str}
    host: {description: Inventory name of the chosen hypervisor., type: str}
    nodename: {description: Its libvirt hostname., type: str}
    hypervisor_uuid: {description: Its libvirt host UUID., type: str}
    uri: {description: "Its libvirt URI, as its last sync recorded it (O(source=ledger)) or from the inventory.", type: str}
    domain_types: {description: "The domain types its capabilities offer (kvm, qemu).", type: list, elements: str}
    cpu:
      description:
        - Its guests' CPU as its last sync recorded it (the host state's C(cpu_info.guest)), C(settings)
          and C(domain_capabilities); null where not recorded. The build makes each guest's CPU of it.
      type: dict
    cpu_shared_set:
      description:
        - Its C(cpu_shared_set) as its last sync recorded it (null where it has none), the host CPUs a
          guest without NUMA cells floats over there (the build's C(<vcpu cpuset>)).
      type: list
      elements: int
    alternates: {description: Next-best hosts for a retry., type: list, elements: str}
    targets:
      description:
        - The alternates, each with C(host), C(hypervisor_uuid), C(uri), C(domain_types), C(cpu) and
          C(cpu_shared_set), for the build's retries.
      type: list
      elements: dict
    generation: {description: The chosen hypervisor's generation the decision was made on., type: int}
    flavor: {description: The resolved flavor., type: dict}
    project_id: {description: "The instance's project, as the ledger records it.", type: str}
    image_properties:
      description: "The image's properties as the engine read them (canonical), as the ledger records them."
      type: dict
    assignment:
      description:
        - What the claim took of the host beyond vCPUs, memory and disk - guest NUMA cells on host cells,
          pinned CPUs, huge pages, PCI devices and mediated devices - as the ledger records it
          (docs/docsite/rst/numa.rst); null when the request asks for none of these. In check mode
          and without the ledger, what the decision would take (the claim fits it again). The build
          reads it from the ledger's claim, not from here.
      type: dict
existing:
  description: Ledger rows of the wanted instances that exist already and were left alone.
  returned: always
  type: list
  elements: dict
summary:
  description: One line saying what was decided, or why nothing fits (kube-scheduler style).
  returned: always
  type: str
timing:
  description: Seconds this task spent reading host states (C(read_s)), deciding (C(decide_s)),
    claiming (C(claim_s)), recording the decision (C(record_s)), and in all (C(total_s)).
  returned: when instances had to be placed
  type: dict
decision_id:
  description:
    - The id under which the ledger keeps this decision with its request and host states
      (see M(berth.fleet.ledger_info) with C(what=decisions)), so it can be replayed.
    - On fleets of up to 100 hosts every host state is kept; on larger ones, those of the hosts
      the decision names (placed, alternates, runners-up, closest misses), as every host of a
      100,000-host fleet would be megabytes per launch.
  returned: when the ledger is used, outside check mode
  type: int
decision:
  description:
    - The engine's whole decision - per placement the weights (each weigher's raw value,
      normalised value, multiplier and weighted part), limits, alternates and runners-up.
    - C(reasons) counts the rejected hosts per reason (with C(kind) C(not_now) for a lack of
      resources that may pass, C(never) for a mismatch only a change of request or configuration
      fixes); C(closest_misses) are the rejected hosts that came closest to fitting;
      C(rejections) lists every rejected host with its first rejecting filter and the numbers
      (requested, used, limit, free) when O(explain) asks for it, else null.
    - With O(placement=packing) and more than one instance, C(packing) says how they were placed -
      C(method) (V(packing) or V(greedy)), C(reason) (the solver's status, or why the greedy order was
      used), C(hosts_used), C(greedy_hosts_used) (the greedy order's, for comparison), C(best) and
      C(bound) (the solver's objective and its proven bound) and C(gap_percent) between them. Packed
      placements carry no weights, alternates or runners-up.
  returned: when instances had to be placed
  type: dict
"""
