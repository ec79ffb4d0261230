# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: instances
short_description: Berth's instances, from the ledger, as inventory hosts with their addresses
version_added: 0.2.0
description:
  - Reads a YAML inventory source whose file name ends in C(berth_instances.yml) or
    C(berth_instances.yaml) (for example C(fleet.berth_instances.yml)); other files are left to
    other plugins.
  - Each instance of the ledger in one of O(states) becomes a host named as the instance
    (C(web-1)), so that the play after a launch can configure the guests Berth launched.
  - "Groups, each name made of a prefix and the value with every character other than letters,
    digits and C(_) replaced by C(_): C(berth_instances) (all of them),
    C(hypervisor_<host>) (where it runs), C(flavor_<flavor>) (C(flavor_m1_tiny)),
    C(server_group_<group>), C(state_<state>) (lower case: C(state_active)) and
    C(project_<project_id>). O(keyed_groups) and O(groups) make more."
  - "C(berth_instance) holds the instance's ledger row: C(uuid), C(name), C(host) (its
    hypervisor's inventory name), C(hypervisor_uuid), C(hypervisor_status) (C(up), C(down) or
    C(missing) at the hypervisor's last sync), C(state), C(flavor), C(vcpus), C(memory_mb),
    C(root_gb), C(ephemeral_gb), C(swap), C(image), C(image_properties), C(project_id),
    C(server_group) (C({name, policy}) or null), C(failure_reason), C(missing_since),
    C(created_at), C(updated_at), and C(metadata): the launch's C(metadata) items, which live in
    the domain's Berth metadata, not in the ledger, so they are read from the hypervisor (null
    where it was not contacted)."
  - With O(contact_hypervisors=true) (the default) each hypervisor with instances is asked,
    in parallel, for its guests' domain state, interfaces and addresses. C(berth_domain) holds
    C(state) (running, shutoff...) and C(interfaces) (C({type, source, mac}) each);
    C(berth_addresses) every address found (C({interface, mac, type, address, prefix})); and
    C(ansible_host) the first IPv4 address (else IPv6) of the first interface that has one.
  - "Where the address comes from, in the order of O(address_sources) except that C(lease) (the
    hypervisor's own) is always asked before C(agent) and C(arp) (what the guest reports), the
    first that gives a usable address winning: C(lease), the DHCP leases of libvirt's own virtual networks (interfaces of type
    C(network) on a network with C(<dhcp>): NAT, routed, open or isolated), read by libvirt from
    its dnsmasq; C(agent), the QEMU guest agent (any interface type, when the domain has the
    agent's channel and the guest runs qemu-guest-agent); C(arp), the hypervisor's ARP table
    (C(network) and C(bridge) interfaces, once the guest has sent traffic the host sees).
    User-mode networking (interface type C(user)) is QEMU's own NAT: no address of the guest is
    visible to libvirt, so such a guest has no C(ansible_host). A source that fails (libvirt 9.0
    cannot read the ARP table of some kernels) gives nothing and the next is asked; only a
    timeout or a lost connection makes the hypervisor unreachable."
  - "A guest's answer is data, never an instruction: only a value that parses as an IP address
    (Python's C(ipaddress)) is kept, in its canonical form; an address from C(agent) or C(arp)
    is kept only when it falls in an IP network of the libvirt network its interface is attached
    to (the network an interface of type C(network) names, or the one that owns the bridge of an
    interface of type C(bridge)); any other is refused, and a source whose every address was
    refused counts as having none (C(berth_address_reason) quotes why)."
  - C(berth_address_source) says which source gave C(ansible_host) (C(lease), C(agent),
    C(arp)), C(none) when the hypervisor was asked and no source had an address, or C(unknown)
    when it was not asked (O(contact_hypervisors=false), the hypervisor did not answer, the
    instance is on none); C(berth_address_reason) says why in the last two cases.
  - An instance named as a host the inventory has already (made by a source read before this one,
    such as a hypervisor of a C(berth.fleet.hypervisors) source, or C(localhost)) is not listed,
    and a warning names it. This source never adds to a host it did not make, so an instance's
    address never becomes another host's C(ansible_host); list the hypervisors' source before
    this one. A launch refuses the names of the fleet's hypervisors and C(localhost).
  - One hypervisor that does not answer never fails the inventory; its instances are listed
    without addresses, and a warning names it. Every libvirt call has O(timeout) seconds.
  - Every value is marked unsafe, so it is never templated. Credentials are never put in host
    variables or the cache.
  - O(contact_hypervisors=false) lists the instances from the ledger alone, without connecting
    to any hypervisor (one query, whatever the size of the fleet).
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
  - berth.fleet.ledger
  - berth.fleet.libvirt_auth
  - berth.fleet.uri_policy
options:
  plugin:
    description: The name of this plugin; makes the file an inventory source for it.
    required: true
    choices: [berth.fleet.instances]
    type: str
  states:
    description:
      - The instance states to list (Nova's vm_state names, as the ledger records them).
      - V(STOPPED) and V(PAUSED) instances (M(berth.fleet.power)) keep their claim; their guests do not answer.
    type: list
    elements: str
    choices: [ACTIVE, BUILDING, ERROR, STOPPED, PAUSED]
    default: [ACTIVE]
  contact_hypervisors:
    description:
      - Ask each hypervisor with instances for their domain state, interfaces, Berth metadata
        and addresses (C(ansible_host)).
      - V(false) lists the ledger's view only, without connecting anywhere, for speed.
    type: bool
    default: true
  address_sources:
    description:
      - Where to look for each guest's addresses, in order (C(lease) before the others
        whatever its place); the first that gives a usable address wins. See the description for
        which applies to which network type, and which addresses a guest may report.
    type: list
    elements: str
    choices: [lease, agent, arp]
    default: [lease, agent, arp]
  wait_for_addresses:
    description:
      - Seconds to wait for guests that have no address yet but may get one soon, asking their
        hypervisors again every 2 seconds; 0 (the default) does not wait.
      - Only a running guest counts, with a source that could answer (an interface on a libvirt
        network that has no lease yet, a guest agent that does not answer yet); a user-mode or
        stopped guest is never waited for.
      - For a source read right after a launch (by C(ansible.builtin.meta) C(refresh_inventory) in
        the launching playbook), while the new guests boot and ask for their DHCP lease.
    type: float
    default: 0
  timeout:
    description:
      - Seconds each libvirt call to a hypervisor may take; one that takes longer (or does not
        connect) counts as unreachable, and its instances are listed without addresses.
    type: float
    default: 10
"""

EXAMPLES = r"""
# fleet.berth_instances.yml: every ACTIVE instance, with its address
plugin: berth.fleet.instances
# The ledger: $BERTH_LEDGER_URL (keep a password out of the source file), or ledger_url here.

# A play after a launch (ansible-playbook -i fleet.berth_instances.yml ...):
#   - hosts: flavor_m1_small:&project_team_a
#   - hosts: web-1
# or in the launching playbook itself, after the launch:
#   - ansible.builtin.meta: refresh_inventory

---
# ERROR instances too, from the ledger only (no hypervisor contacted), cached for 5 minutes
plugin: berth.fleet.instances
states: [ACTIVE, ERROR]
contact_hypervisors: false
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/berth-instances
cache_timeout: 300

---
# Constructed: groups from the launch's metadata and the image, SSH as the image's user
plugin: berth.fleet.instances
address_sources: [lease, arp]   # no guest agent in these images
timeout: 5
keyed_groups:
  - key: berth_instance.metadata.role | default('none')
    prefix: role
  - key: berth_instance.image_properties.os_distro | default('unknown')
    prefix: os
groups:
  unaddressed: berth_address_source != 'lease'
compose:
  ansible_user: "'debian'"
"""

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible import constants as C
from ansible.errors import AnsibleError, AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import failure_reason
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils._inventory_cache import fetch_cached

ALL_GROUP = "berth_instances"
# Each grouping: the group name's prefix and how the value is read from berth_instance.
GROUPINGS = (
    ("hypervisor", lambda row: row["host"]),
    ("flavor", lambda row: row["flavor"]),
    ("server_group", lambda row: (row["server_group"] or {}).get("name")),
    ("state", lambda row: row["state"].lower()),
    ("project", lambda row: row["project_id"]),
)
_NOT_IN_GROUP_NAMES = re.compile(r"[^A-Za-z0-9_]")
# Ledger fields that are not the instance's to show: how Berth reaches its hypervisor.
_LEDGER_ONLY = ("uri",)
# How often wait_for_addresses asks again.
ADDRESS_POLL_S = 2.0


def group_name(prefix: str, value: Any) -> str:
    """``<prefix>_<value>`` with every character Ansible would warn about in a group name as ``_``."""
    return _NOT_IN_GROUP_NAMES.sub("_", f"{prefix}_{value}")


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "berth.fleet.instances"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(("berth_instances.yml", "berth_instances.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            self._check_options()
            fetched = self._fetch_cached(path, cache)
        except InputError as exc:
            raise AnsibleParserError(f"{path}: {exc}") from exc
        except BerthError as exc:
            raise AnsibleError(f"{path}: {exc}") from exc
        self._populate(fetched)

    def _check_options(self):
        if not self.get_option("states"):
            raise InputError("states", "states must name at least one state (ACTIVE, BUILDING, ERROR, STOPPED, PAUSED)")
        timeout = self.get_option("timeout")
        if not timeout or timeout <= 0:
            raise InputError("timeout", f"timeout must be a positive number of seconds, got {timeout!r}")
        wait = self.get_option("wait_for_addresses")
        if wait is None or wait < 0:
            raise InputError("wait_for_addresses", f"wait_for_addresses must be 0 or more seconds, got {wait!r}")

    # ---- fetch: the only I/O ------------------------------------------------------------------

    def _fetch_cached(self, path, cache):
        """The ledger's instances and their guests' addresses, from the cache when it was made
        for the same ledger (its URL without a password), states and lookups."""
        # The ledger (SQLAlchemy) and libvirt are imported by a source of this plugin only:
        # Ansible loads every enabled inventory plugin in every run, and a run that reads no
        # instances source neither pays for them nor fails for their sake (a MissingLibraryError
        # is a BerthError, which parse reports naming the source).
        from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import default_url, safe_url

        ledger_url = self.get_option("ledger_url")
        # The ledger's URIs are not the operator's: each passes the source's policy before it is
        # opened, and the credentials go only to the hosts the policy names.
        self._uri_policy = UriPolicy.from_settings(self.get_option("uri_policy"),
                                                   ssh_keyfile=os.environ.get("BERTH_SSH_KEYFILE"),
                                                   known_hosts=os.environ.get("BERTH_SSH_KNOWN_HOSTS"))
        key = {"ledger": safe_url(ledger_url or default_url()), "states": list(self.get_option("states")),
               "contact_hypervisors": self.get_option("contact_hypervisors"),
               "address_sources": list(self.get_option("address_sources")),
               "wait_for_addresses": self.get_option("wait_for_addresses"),
               "uri_policy": self._uri_policy.to_settings()}
        return fetch_cached(self, path, cache, key, lambda: self._fetch(ledger_url))

    def _fetch(self, ledger_url):
        """{instances: ledger rows, guests: {uuid: what its hypervisor said}, unreachable: {host: why}}."""
        from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

        ledger = Ledger(ledger_url).open()
        try:
            rows = ledger.inventory_instances(self.get_option("states"))
        finally:
            ledger.close()
        fetched = {"instances": rows, "guests": {}, "unreachable": {}}
        if not self.get_option("contact_hypervisors"):
            return fetched
        placed = [row for row in rows if row["host"]]
        deadline = time.monotonic() + self.get_option("wait_for_addresses")
        while placed:
            self._ask_hypervisors(placed, fetched)
            if time.monotonic() + ADDRESS_POLL_S > deadline:
                break
            placed = [row for row in placed if row["host"] not in fetched["unreachable"]
                      and awaits_address(fetched["guests"].get(row["uuid"]))]
            if placed:
                time.sleep(ADDRESS_POLL_S)
        return fetched

    def _ask_hypervisors(self, rows, fetched):
        """Ask the hypervisors of ``rows`` about their guests, all at once; into ``fetched``."""
        by_host: dict[str, dict[str, Any]] = {}
        for row in rows:
            by_host.setdefault(row["host"], {"uri": row["uri"], "uuids": []})["uuids"].append(row["uuid"])
        # A bounded pool, as the tracker sync reads hypervisors: a slow or dead one holds one
        # thread for its own timeouts, and a ledger naming thousands of hosts starts no more.
        with ThreadPoolExecutor(max_workers=min(limits.HYPERVISORS_AT_ONCE, len(by_host))) as pool:
            outcomes = pool.map(lambda item: self._ask_hypervisor(item[0], **item[1]), by_host.items())
            for host, (guests, reason) in zip(by_host, outcomes):
                fetched["guests"].update(guests)
                # A host that answered before and not on a later look (waiting for addresses)
                # keeps what it said.
                if reason is not None and not any(uuid in fetched["guests"] for uuid in by_host[host]["uuids"]):
                    fetched["unreachable"][host] = reason

    def _ask_hypervisor(self, host, uri, uuids):
        """({uuid: interface_addresses(uuid) or None}, None), or ({}, why the host did not answer).
        Whatever asking it raises - a libvirt error, or an answer about a guest that does not
        read (a hypervisor is not trusted) - is that host's: its instances are listed without
        addresses, with why, and the others' are not held up."""
        if not uri:
            return {}, "the ledger has no URI for it: run playbooks/gather.yml to record one"
        from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor

        sources = self.get_option("address_sources")
        connection = Hypervisor(host, uri, float(self.get_option("timeout")), username=self.get_option("username"),
                                password=self.get_option("password"), uri_policy=self._uri_policy)
        try:
            with connection as hv:
                return {uuid: hv.interface_addresses(uuid, sources) for uuid in uuids}, None
        except Exception as exc:  # this host's, whatever it is (see the docstring)
            return {}, failure_reason(host, exc).removeprefix(f"{host}: ")

    # ---- populate: pure -----------------------------------------------------------------------

    def _populate(self, fetched):
        """Hosts, groups and variables from what was fetched; no I/O."""
        strict = self.get_option("strict")
        self.inventory.add_group(ALL_GROUP)
        for host, reason in sorted(fetched["unreachable"].items()):
            self.display.warning(f"berth.fleet.instances: hypervisor {host} did not answer; its instances "
                                 f"are listed without addresses: {reason}")
        # The hosts other sources made (the hypervisors...), and Ansible's own localhost: an
        # instance of one of their names is never added to them (its address would become theirs).
        others = set(self.inventory.hosts) | set(C.LOCALHOST)
        for row in fetched["instances"]:
            name = row["name"]
            if name in others:
                whose = "the controller itself" if name in C.LOCALHOST else "from another source, such as a hypervisor"
                self.display.warning(f"berth.fleet.instances: instance {name} is not listed: the inventory has a host "
                                     f"of that name already ({whose}), and this source never adds to a host it "
                                     f"did not make")
                continue
            self.inventory.add_host(name, group=ALL_GROUP)
            for prefix, value_of in GROUPINGS:
                value = value_of(row)
                if value:
                    group = self.inventory.add_group(group_name(prefix, value))
                    self.inventory.add_host(name, group=group)
            for key, value in host_variables(row, fetched).items():
                self.inventory.set_variable(name, key, wrap_var(value))
            hostvars = self.inventory.get_host(name).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)


def host_variables(row: dict[str, Any], fetched: dict[str, Any]) -> dict[str, Any]:
    """An instance's host variables: its ledger row, its domain, its addresses and where they
    come from (see DOCUMENTATION)."""
    instance = {key: value for key, value in row.items() if key not in _LEDGER_ONLY}
    instance["metadata"] = None
    found = {"berth_instance": instance, "berth_domain": None, "berth_addresses": [],
             "berth_address_source": "unknown", "berth_address_reason": None}
    host = row["host"]
    if not host:
        found["berth_address_reason"] = "the instance is on no hypervisor"
    elif host in fetched["unreachable"]:
        found["berth_address_reason"] = f"hypervisor {host} did not answer: {fetched['unreachable'][host]}"
    elif row["uuid"] not in fetched["guests"]:
        found["berth_address_reason"] = "addresses not looked up (contact_hypervisors is false)"
    elif fetched["guests"][row["uuid"]] is None:
        found["berth_address_source"] = "none"
        found["berth_address_reason"] = f"no domain with the instance's UUID on {host}"
    else:
        guest = fetched["guests"][row["uuid"]]
        instance["metadata"] = guest["metadata"]
        found["berth_domain"] = {"state": guest["state"], "interfaces": guest["interfaces"]}
        found["berth_addresses"] = guest["addresses"]
        address = preferred_address(guest["interfaces"], guest["addresses"])
        if address is None:
            found["berth_address_source"] = "none"
            found["berth_address_reason"] = "; ".join(f"{source}: {why}" for source, why in guest["skipped"].items()) \
                or "no address source to ask (address_sources is empty)"
        else:
            found["berth_address_source"] = guest["source"]
            found["ansible_host"] = address
    return found


def awaits_address(guest: dict[str, Any] | None) -> bool:
    """A running guest without an address that a source was asked about: it may still get one
    (its DHCP lease, its agent starting)."""
    return bool(guest and guest["state"] == "running" and not guest["addresses"] and guest["asked"])


def preferred_address(interfaces: list[dict[str, Any]], addresses: list[dict[str, Any]]) -> str | None:
    """The address to reach the guest at: the first interface's (in the domain's order) that has
    one, its IPv4 address before an IPv6 one; link-local IPv6 addresses never (they need a zone)."""
    order = {interface["mac"]: index for index, interface in enumerate(interfaces)}
    usable = [address for address in addresses
              if address["type"] == "ipv4" or (address["type"] == "ipv6" and not address["address"].lower().startswith("fe80:"))]
    usable.sort(key=lambda address: (order.get(address["mac"], len(order)), address["type"] != "ipv4"))
    return usable[0]["address"] if usable else None
