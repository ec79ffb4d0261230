# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: hypervisors
short_description: libvirt hypervisors as inventory hosts, with Berth's host state
version_added: 0.1.0
description:
  - Reads a YAML inventory source whose file name ends in C(berth.yml) or C(berth.yaml)
    (for example C(fleet.berth.yml)); other files are left to other plugins.
  - Each hypervisor listed there becomes a host in the group C(hypervisors). Its libvirt facts
    are gathered in parallel, each libvirt call under O(timeout), and stored in the one hostvar
    C(berth_host_state) (the fields below); every value that comes
    from a hypervisor is marked unsafe, so it is never templated. C(berth_libvirt_uri) holds the
    URI the roles connect with (it never holds a password).
  - A hypervisor that does not answer is still listed, in the group C(down), with
    C(berth_host_state.service_up=false) and the reason in C(berth_host_state.down_reason); the
    rest of the inventory is whole. So is one whose answers do not read (XML that does not
    parse, a number that is none) or do not fit its settings (a O(cpu_dedicated_set) naming
    CPUs it does not report); a hypervisor is not trusted, and what one answers never fails the
    source. The reason is printable and at most 400 characters, whatever the host sent.
  - Each aggregate becomes a group of its member hosts; each member's C(berth_host_state)
    carries the aggregates it is in, each with its own metadata (group vars would be flattened
    by Ansible), and its availability zone.
  - Reading /proc directly when the hypervisor is this machine (a URI without a host, such as
    C(qemu:///system)); through libvirt's node statistics when it is remote.
  - "Fields of C(berth_host_state): C(host) (inventory name), C(nodename) (libvirt's hostname),
    C(uuid) (libvirt host UUID; for drivers that report none, such as the test driver, a UUID
    derived from the URI), C(service_up), C(down_reason), C(disabled), C(disabled_reason)
    (set by operators in the ledger; false here),
    C(vcpus_total) (node CPUs), C(vcpus_used) (vCPUs of every domain on the host),
    C(total_usable_ram_mb) (node memory from the node memory statistics over all NUMA cells,
    or /proc/meminfo locally; getInfo() only where the driver has no statistics),
    C(free_ram_mb) (total - reserved - memory of every domain; may be negative),
    C(total_usable_disk_gb) (capacity of O(storage_pool), whole GiB), C(free_disk_mb)
    (capacity - reserved - capacity of the domains' volumes in that pool; may be negative),
    C(num_instances) (domains on the host), C(num_io_ops) (0: builds in progress are known to
    the ledger, not to libvirt), C(cpu_allocation_ratio), C(ram_allocation_ratio),
    C(disk_allocation_ratio) (effective: the smallest value in the host's aggregates' metadata,
    else the host's setting, else Nova's default 4.0, 1.0, 1.0), C(reserved_host_memory_mb),
    C(reserved_host_disk_mb) (the host's setting, else 512 and 0),
    C(hypervisor_type) (libvirt's driver name, such as QEMU), C(hypervisor_version) and
    C(libvirt_version) (libvirt-style integers, 7002000 for 7.2.0),
    C(supported_instances) ([arch, domain type, OS type] triples from the capabilities' guests),
    C(cpu_info) (arch, model, vendor, features, topology {sockets, dies, clusters, cores,
    threads}, mhz; model and topology from getInfo() where the capabilities lack them; and
    C(guest): C(settings), the host's effective O(cpu_mode), O(cpu_models) and
    O(cpu_model_extra_flags), and C(domain_capabilities), per domain type (kvm, qemu) what
    libvirt's domain capabilities say of its guest CPUs: C(modes) {mode: supported},
    C(host_model) {model, vendor, features {name: policy}} and C(models) {name: usable}),
    C(numa_topology) (C(cells), empty where the driver reports none: each C({id, memory_mb, cpus,
    cpu_topology, pages}), C(cpus) the CPU ids, C(cpu_topology) per CPU C({id, socket_id, die_id,
    core_id, siblings}) (siblings, the ids of its thread siblings, itself included), C(pages) per
    page size C({size_kb, total, free}) (total from the capabilities, free from libvirt's free
    pages count, null where the driver cannot say); C(cpu_dedicated_set) and C(cpu_shared_set),
    the host's O(cpu_dedicated_set) and O(cpu_shared_set) as sorted CPU ids, null where unset;
    and C(reserved_pages), the host's O(reserved_huge_pages) as C({cell id: {size_kb: count}})
    with text keys, absent where none),
    C(pci_devices) (from libvirt's node devices: each C({name, address, vendor_id, product_id,
    numa_node, dev_type, mdev_types}), address as C(0000:3b:00.0), ids as four hex digits,
    numa_node null where the host does not say, dev_type C(type-PF) (with C(virtual_functions),
    their addresses), C(type-VF) (with C(parent_address), its physical function's) or
    C(type-PCI), mdev_types C([{type, name, device_api, available_instances}]) for devices that
    offer mediated devices; at most 4096 devices are read per host, in libvirt's name order),
    C(pci_devices_skipped) (C({beyond_limit, unreadable}): devices beyond that limit, and those
    whose XML did not read as a PCI device; both 0 normally),
    C(aggregates) ([{name, metadata}]), C(availability_zone) (from aggregate metadata, else
    O(default_availability_zone)), C(metrics) (load_1m, load_5m, load_15m from /proc/loadavg
    when local; cpu_user_ns, cpu_kernel_ns, cpu_idle_ns, cpu_iowait_ns from /proc/stat or the
    node CPU statistics), C(hv_memory_total_mb), C(hv_memory_free_mb), C(hv_memory_buffers_mb),
    C(hv_memory_cached_mb) (the /proc/meminfo view; null where the driver cannot say, rather
    than the test driver's 0), C(hv_memory_used_mb) (total - (free + buffers + cached)),
    C(hv_memory_source) (proc, libvirt or getInfo), C(domains) (each {name, uuid, state, vcpus,
    memory_mb, disks [{path, capacity_mb, pool}], berth ({instance_uuid, name, flavor} from the
    domain's Berth metadata, or null)}), C(instances) (Berth instance UUIDs found), C(orphans)
    (names of domains without Berth metadata; the tracker sync sorts them against the ledger),
    C(storage_pool), C(pools) (every storage pool {name, active, capacity_mb, allocation_mb,
    available_mb}), C(instance_volumes) (the volumes of the instance pool named as a build names
    its own, C(berth-<instance uuid>-...); the tracker sync tells whose they are), C(data_volumes) (those
    named as M(berth.fleet.volume) names data volumes, C(berth-volume-<name>.qcow2); the tracker sync
    reports those its ledger has no volume of), C(host_ip) (the host's address, see O(hypervisors); null when unknown),
    C(gathered_at) (Unix time of the gathering)."
  - The tracker view (usage from the ledger's claims) replaces the usage fields when the
    schedule action or the tracker sync reads these facts against the ledger.
  - With O(gather_facts=false) no hypervisor is contacted. Each is listed with
    C(berth_libvirt_uri) and C(berth_hypervisor) only, at any fleet size in the time Ansible
    takes to add the hosts. That is all C(playbooks/gather.yml) (which then gathers each
    hypervisor itself, many at once) and the ledger-backed launch need.
  - Each hypervisor's URI must pass O(uri_policy) (the source is refused, naming the host,
    where one does not). The source's policy, with its SSH settings and the hosts of its URIs,
    becomes the variable C(berth_uri_policy) of the group C(all), so that the tasks of a run
    with this source (a launch, a delete, C(playbooks/gather.yml)) apply it to the URIs they
    read from the ledger; where several sources set it, what any of them allows.
  - "C(berth_hypervisor), set in both modes: C(settings) (the source's allocation ratios and
    reserved amounts for the host), C(aggregates) ([{name, metadata}]), C(availability_zone),
    C(default_availability_zone), C(storage_pool), C(timeout), C(keepalive_interval) and
    C(keepalive_count): what gathering the host's state needs."
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
  - berth.fleet.libvirt_auth
  - berth.fleet.uri_policy
  - berth.fleet.guest_cpu
options:
  plugin:
    description: The name of this plugin; makes the file an inventory source for it.
    required: true
    choices: [berth.fleet.hypervisors]
    type: str
  hypervisors:
    description:
      - The hypervisors, by inventory name.
      - C(uri) is the libvirt URI the controller reaches the hypervisor with; without it,
        O(uri_template) is used. A URI holding a password is refused (it would be shown).
      - C(cpu_allocation_ratio) (default 4.0), C(ram_allocation_ratio) (1.0),
        C(disk_allocation_ratio) (1.0), C(reserved_host_memory_mb) (512) and
        C(reserved_host_disk_mb) (0) override Nova's defaults for that host.
      - C(cpu_mode), C(cpu_models) and C(cpu_model_extra_flags) give that host's guests their CPU
        (see O(cpu_mode)); set on the host, the three replace the source's.
      - C(cpu_dedicated_set) and C(cpu_shared_set) say which host CPUs instances may use (see
        O(cpu_dedicated_set)); set on the host (either), the two replace the source's.
      - C(reserved_huge_pages) keeps pages of the host's cells from instances (see
        O(reserved_huge_pages)); set on the host, it replaces the source's.
      - C(host_ip), an IP address, is the host's address for SimpleCIDRAffinityFilter (Nova's
        C(host_ip)); without it, the URI's host if it is an address, else that name as the
        controller resolves it when gathering, else unknown (a URI without a host).
    required: true
    type: dict
  cpu_dedicated_set:
    description:
      - The host CPUs that instances with dedicated (pinned) CPUs may use, as Nova's
        C([compute] cpu_dedicated_set), in its syntax, for example V(2-7,^4,10) (ids and ranges,
        C(^) taking one out); a hypervisor may set its own in O(hypervisors).
      - Recorded in C(numa_topology) of the host state at each gathering; the scheduler does not
        place on it yet. Refused, naming the setting, where it does not parse, shares a CPU with
        O(cpu_shared_set), or names a CPU the host does not have (its NUMA cells' CPUs, else 0 to
        its CPU count - 1); the tracker sync of C(playbooks/gather.yml) records such a host as
        down with that reason.
    type: str
  cpu_shared_set:
    description:
      - The host CPUs that instances with shared (floating) CPUs may use, as Nova's
        C([compute] cpu_shared_set), in the syntax of O(cpu_dedicated_set); a hypervisor may
        set its own in O(hypervisors). Not set (nor O(cpu_dedicated_set)), every host CPU is
        shared, as in Nova.
    type: str
  reserved_huge_pages:
    description:
      - The pages of each size and NUMA cell that instances may not use, as Nova's
        C(reserved_huge_pages), as a list of C({node, size, count}) (C(size) in KiB, or with a unit
        such as V(2MB) or V(1GB)) or of Nova's strings V(node:0,size:2048,count:64); a
        hypervisor may set its own in O(hypervisors), for example to give each of several
        hypervisors on one machine its share of that machine's huge pages.
      - Recorded in C(numa_topology.reserved_pages) of the host state at each gathering; a NUMA
        fit counts a cell's pages of a size as total - reserved - those of its instances.
        Refused, naming the setting, where an item does not parse, names a cell the host does
        not have or a page size that cell does not offer, or reserves more pages than it has.
    type: list
    elements: raw
  uri_template:
    description:
      - The URI of hypervisors listed without C(uri); C({name}) stands for the inventory name,
        for example C(qemu+ssh://{name}.example.com/system).
    type: str
    env:
      - name: BERTH_URI_TEMPLATE
  aggregates:
    description:
      - Host aggregates, by name (letters, digits and C(_)), each C({hosts, metadata}).
        Each becomes a group of its hosts.
      - Metadata values are strings or numbers. C(availability_zone) puts the hosts in that
        zone (a host can be in one zone only); C(cpu_allocation_ratio),
        C(ram_allocation_ratio) and C(disk_allocation_ratio) override the hosts' ratios (the
        smallest wins where aggregates disagree, as in Nova's Aggregate filters).
    type: dict
    default: {}
  default_availability_zone:
    description: The zone of hosts whose aggregates name none (Nova's default_availability_zone).
    type: str
    default: nova
  gather_facts:
    description:
      - Connect to every hypervisor while the inventory is built and put its facts in
        C(berth_host_state) (and the down ones in the group C(down)).
      - V(false) lists the hypervisors without connecting, for plays that need no live facts
        (the tracker sync of C(playbooks/gather.yml) gathers the hosts itself; a launch
        decides from the ledger). Constructable options that read C(berth_host_state) have
        nothing to read then.
    type: bool
    default: true
  storage_pool:
    description: The libvirt storage pool that holds instance disks; its capacity is the disk.
    type: str
    default: default
  timeout:
    description:
      - Seconds each libvirt call may take; a hypervisor whose connection and calls take more
        than twice this is reported down.
    type: float
    default: 10
  keepalive_interval:
    description: Seconds between libvirt keepalive messages on remote connections.
    type: int
    default: 5
  keepalive_count:
    description: Unanswered keepalives after which a remote connection counts as dead.
    type: int
    default: 3
  verify_host_keys:
    description:
      - Check the SSH host keys of C(qemu+ssh), C(qemu+libssh) and C(qemu+libssh2) URIs.
        Turning it off adds C(no_verify=1) (ssh) or C(known_hosts_verify=ignore) (libssh); a
        URI that turns it off by itself while this is true is refused.
    type: bool
    default: true
  known_hosts:
    description:
      - A known_hosts file for the libssh transports (C(qemu+libssh://)). The plain ssh
        transport checks the ssh client's own files (~/.ssh/known_hosts, /etc/ssh/ssh_known_hosts).
    type: path
    env:
      - name: BERTH_SSH_KNOWN_HOSTS
  ssh_user:
    description: The SSH user for SSH URIs that name none.
    type: str
    env:
      - name: BERTH_SSH_USER
  ssh_keyfile:
    description: The private key file for SSH URIs (libvirt's C(keyfile) parameter).
    type: path
    env:
      - name: BERTH_SSH_KEYFILE
"""

EXAMPLES = r"""
# fleet.berth.yml
plugin: berth.fleet.hypervisors
storage_pool: default
timeout: 10
hypervisors:
  kvm01:
    uri: qemu+ssh://root@kvm01.example.com/system
  kvm02:
    uri: qemu+ssh://root@kvm02.example.com/system
    ram_allocation_ratio: 1.5
    reserved_host_memory_mb: 2048
  kvm03: {}                          # takes uri_template
  kvm04:
    uri: qemu+ssh://root@kvm04.example.com/system
    # This host's guests: the first of these models it can run, with PCID added
    cpu_mode: custom
    cpu_models: [Cascadelake-Server-noTSX, Skylake-Server-noTSX-IBRS]
    cpu_model_extra_flags: [+pcid]
    # CPUs 0-1 for the host and floating guests, the rest for pinned guests
    cpu_shared_set: "0-1"
    cpu_dedicated_set: "2-31"
    # 1 GiB pages of cell 1 kept for the host's own DPDK switch
    reserved_huge_pages: [{node: 1, size: 1GB, count: 4}]
uri_template: qemu+ssh://{name}.example.com/system
# Every other host's guests (Nova's default for kvm and qemu guests)
cpu_mode: host-model
# Beyond the default: what these URIs may hold, and where the libvirt login may go besides them
uri_policy:
  allow_parameters: ["keyfile=/etc/berth/id_ed25519"]
  credential_hosts: [kvm-spare.example.com]
aggregates:
  rack1:
    hosts: [kvm01, kvm02]
    metadata: {availability_zone: az1, ssd: "true"}
  overcommit:
    hosts: [kvm03]
    metadata: {cpu_allocation_ratio: 8.0}
# Constructed: groups from the facts
keyed_groups:
  - key: berth_host_state.availability_zone
    prefix: az
  - key: berth_host_state.cpu_info.arch
    prefix: arch
groups:
  big_memory: berth_host_state.total_usable_ram_mb >= 262144
compose:
  berth_free_ram_mb: berth_host_state.free_ram_mb
# Cache the gathering for 5 minutes
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/berth-inventory
cache_timeout: 300
"""

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import CPU_SET_SETTINGS
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import CPU_SETTINGS
from ansible_collections.berth.fleet.plugins.module_utils.huge_pages import RESERVED_PAGES_SETTING
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import (
    connection_uri,
    host_aggregates,
    state_from_outcome,
    validate_aggregates,
    validate_hypervisors,
)
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import POLICY_VARIABLE, UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._inventory_cache import fetch_cached

HYPERVISOR_GROUP = "hypervisors"
DOWN_GROUP = "down"


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "berth.fleet.hypervisors"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(("berth.yml", "berth.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            hypervisors, aggregates, targets = self._source()
            outcomes = self._fetch_cached(path, targets, cache) if self.get_option("gather_facts") else None
            self._populate(hypervisors, aggregates, targets, outcomes)
        except InputError as exc:
            raise AnsibleParserError(f"{path}: {exc}") from exc
        except BerthError as exc:
            raise AnsibleError(f"{path}: {exc}") from exc

    def _source(self):
        """The checked source: hypervisors, aggregates and each host's connection URI."""
        hypervisors = validate_hypervisors(self.get_option("hypervisors"), self.get_option("uri_template"),
                                           {key: self.get_option(key)
                                            for key in (*CPU_SETTINGS, *CPU_SET_SETTINGS, RESERVED_PAGES_SETTING)})
        aggregates = validate_aggregates(self.get_option("aggregates"), hypervisors)
        targets = {
            name: connection_uri(
                f"hypervisors.{name}.uri", settings["uri"],
                ssh_user=self.get_option("ssh_user"), ssh_keyfile=self.get_option("ssh_keyfile"),
                known_hosts=self.get_option("known_hosts"),
                verify_host_keys=self.get_option("verify_host_keys"),
            )
            for name, settings in hypervisors.items()
        }
        self._uri_policy = UriPolicy.from_settings(
            self.get_option("uri_policy"), ssh_keyfile=self.get_option("ssh_keyfile"),
            known_hosts=self.get_option("known_hosts"), verify_host_keys=self.get_option("verify_host_keys"),
            named_uris=targets.values())
        for name, uri in targets.items():
            refusal = self._uri_policy.refusal(uri)
            if refusal:
                raise InputError(f"hypervisors.{name}.uri", f"hypervisors.{name}.uri is refused: {refusal}")
        return hypervisors, aggregates, targets

    def _fetch_cached(self, path, targets, cache):
        """The one I/O step: the hypervisors' raw facts, from the cache when it was made for the
        same hosts, URIs and pool; it holds facts, never a credential."""
        key = {"targets": [[name, uri] for name, uri in sorted(targets.items())],
               "storage_pool": self.get_option("storage_pool")}
        connect = {
            "username": self.get_option("username"),
            "password": self.get_option("password"),
            "keepalive_interval": self.get_option("keepalive_interval"),
            "keepalive_count": self.get_option("keepalive_count"),
            "uri_policy": self._uri_policy,
        }
        # libvirt is imported by a source that gathers facts only: Ansible loads every enabled
        # inventory plugin in every run.
        from ansible_collections.berth.fleet.plugins.module_utils.host_fetch import fetch

        return fetch_cached(self, path, cache, key, lambda: fetch(
            targets, self.get_option("storage_pool"), float(self.get_option("timeout")), connect))

    def _populate(self, hypervisors, aggregates, targets, outcomes):
        """Hosts, groups and variables from the fetched facts (None: not gathered); no I/O."""
        strict = self.get_option("strict")
        self.inventory.add_group(HYPERVISOR_GROUP)
        self.inventory.add_group(DOWN_GROUP)
        self._hand_on_uri_policy()
        for aggregate in aggregates:
            self.inventory.add_group(aggregate)
        default_zone = self.get_option("default_availability_zone")
        for name, settings in hypervisors.items():
            mine, zone = host_aggregates(name, aggregates, default_zone)
            self.inventory.add_host(name, group=HYPERVISOR_GROUP)
            for aggregate in mine:
                self.inventory.add_host(name, group=aggregate["name"])
            self.inventory.set_variable(name, "berth_libvirt_uri", wrap_var(targets[name]))
            self.inventory.set_variable(name, "berth_hypervisor", wrap_var({
                "settings": {key: value for key, value in settings.items() if key != "uri"},
                "aggregates": mine, "availability_zone": zone, "default_availability_zone": default_zone,
                "storage_pool": self.get_option("storage_pool"), "timeout": float(self.get_option("timeout")),
                "keepalive_interval": self.get_option("keepalive_interval"),
                "keepalive_count": self.get_option("keepalive_count"),
            }))
            if outcomes is not None:
                state = state_from_outcome(name, outcomes[name], settings, aggregates, default_zone)
                self.inventory.set_variable(name, "berth_host_state", wrap_var(state))
                if not state["service_up"]:
                    self.inventory.add_host(name, group=DOWN_GROUP)
                    self.display.warning(f"hypervisor {name} is down: {state['down_reason']}")
            hostvars = self.inventory.get_host(name).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)

    def _hand_on_uri_policy(self):
        """The source's URI policy as the variable berth_uri_policy of every host of the run (the
        tasks that open the ledger's URIs read it there); merged with another source's."""
        policy = self._uri_policy
        earlier = self.inventory.groups["all"].vars.get(POLICY_VARIABLE)
        if earlier:
            policy = policy.merged(UriPolicy.from_settings(earlier, POLICY_VARIABLE))
        self.inventory.set_variable("all", POLICY_VARIABLE, policy.to_settings())
