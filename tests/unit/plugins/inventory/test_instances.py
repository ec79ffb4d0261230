"""berth.fleet.instances: sources it takes, and populate (pure) on fetch results made by hand:
groups, host variables, addresses, unreachable hypervisors, unsafe values, constructed options,
the cache."""

from __future__ import annotations

import copy
import os
import tempfile

import pytest
import yaml
from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.berth.fleet.plugins.inventory import instances as plugin_module
from ansible_collections.berth.fleet.plugins.inventory.instances import InventoryModule, awaits_address, preferred_address
from ansible_collections.berth.fleet.plugins.plugin_utils import ledger as ledger_package

# What the fragments default to: ansible.builtin.constructed and inventory_cache, berth.fleet.ledger,
# libvirt_auth and uri_policy.
FRAGMENT_DEFAULTS = {"strict": False, "compose": {}, "groups": {}, "keyed_groups": [], "use_extra_vars": False,
                     "leading_separator": True, "cache": False, "ledger_url": None, "username": None, "password": None,
                     "uri_policy": None}


def row(name, host="hv1", state="ACTIVE", flavor="m1.tiny", server_group=None, project_id="default", **extra):
    """An instance as Ledger.inventory_instances gives it."""
    return {
        "uuid": f"uuid-{name}", "name": name, "flavor": flavor, "vcpus": 1, "memory_mb": 512, "root_gb": 1,
        "ephemeral_gb": 0, "swap": 0, "image": None, "hypervisor_uuid": f"hv-uuid-{host}" if host else None,
        "host": host, "state": state, "failure_reason": None, "missing_since": None,
        "created_at": "2026-01-01T00:00:00", "updated_at": "2026-01-01T00:00:00", "project_id": project_id,
        "image_properties": {}, "server_group": server_group,
        "uri": f"qemu+ssh://root@{host}.example/system?keyfile=/secret/key" if host else None,
        "hypervisor_status": "up" if host else None, **extra,
    }


def guest(mac="52:54:00:00:00:01", source="lease", addresses=None, interface_type="network", skipped=None,
          metadata=None, state="running"):
    """What Hypervisor.interface_addresses says of one domain."""
    if addresses is None:
        addresses = [{"interface": "vnet0", "mac": mac, "type": "ipv4", "address": "192.168.122.10", "prefix": 24}]
    return {"state": state, "interfaces": [{"type": interface_type, "source": "default", "mac": mac}],
            "metadata": metadata or {}, "source": source if addresses else None, "addresses": addresses,
            "asked": [] if interface_type == "user" else [source], "skipped": skipped or {}}


class Display:
    def __init__(self):
        self.warnings = []

    def warning(self, text, *args, **kwargs):
        self.warnings.append(text)


def make_plugin(source=None, **options):
    """The plugin with its documented defaults, ``options``, and what the YAML text ``source``
    sets: read as Ansible reads a source file (its expressions trusted as templates, as only a
    source file's are)."""
    documented = yaml.safe_load(plugin_module.DOCUMENTATION)["options"]
    defaults = {name: spec.get("default") for name, spec in documented.items()}
    plugin = InventoryModule()
    plugin._options = {**FRAGMENT_DEFAULTS, **defaults, "plugin": "berth.fleet.instances", **options}
    if source is not None:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "fleet.berth_instances.yml")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(source)
            plugin._options.update(DataLoader().load_from_file(path, cache="none", trusted_as_template=True))
    plugin.inventory = InventoryData()
    plugin.templar = Templar(loader=DataLoader())
    plugin.display = Display()
    plugin._cache = {}
    return plugin


def populated(fetched, source=None, **options):
    plugin = make_plugin(source, **options)
    plugin._populate(copy.deepcopy(fetched))
    return plugin


def members(plugin):
    """{group: sorted host names} of every group that has hosts."""
    return {name: sorted(host.name for host in group.get_hosts())
            for name, group in plugin.inventory.groups.items() if group.get_hosts()}


def host_vars(plugin, name):
    return plugin.inventory.get_host(name).get_vars()


FLEET = {
    "instances": [
        row("web-1", server_group={"name": "web pool", "policy": "anti-affinity"}, project_id="team-a"),
        row("web-2", host="hv2", server_group={"name": "web pool", "policy": "anti-affinity"}, project_id="team-a"),
        row("db-1", host="hv2", state="BUILDING", flavor="m1.small"),
        row("lost-1", host=None, state="ERROR", failure_reason="build failed on 3 host(s)"),
    ],
    "guests": {"uuid-web-1": guest(), "uuid-web-2": guest(mac="52:54:00:00:00:02", addresses=[
        {"interface": "vnet3", "mac": "52:54:00:00:00:02", "type": "ipv4", "address": "192.168.122.11", "prefix": 24}]),
        "uuid-db-1": guest(mac="52:54:00:00:00:03", addresses=[])},
    "unreachable": {},
}


@pytest.mark.parametrize(
    "name, taken",
    [("fleet.berth_instances.yml", True), ("berth_instances.yaml", True), ("lab.berth_instances.yaml", True),
     ("fleet.berth.yml", False), ("instances.yml", False), ("fleet.berth_instances.yml.bak", False)],
)
def test_source_file_names(tmp_path, name, taken):
    path = tmp_path / name
    path.write_text("plugin: berth.fleet.instances\n")
    assert InventoryModule().verify_file(str(path)) is taken


def test_groups_per_hypervisor_flavor_server_group_state_project_with_safe_names():
    plugin = populated(FLEET)
    assert members(plugin) == {
        "berth_instances": ["db-1", "lost-1", "web-1", "web-2"],
        "hypervisor_hv1": ["web-1"],
        "hypervisor_hv2": ["db-1", "web-2"],
        "flavor_m1_tiny": ["lost-1", "web-1", "web-2"],
        "flavor_m1_small": ["db-1"],
        "server_group_web_pool": ["web-1", "web-2"],
        "state_active": ["web-1", "web-2"],
        "state_building": ["db-1"],
        "state_error": ["lost-1"],
        "project_team_a": ["web-1", "web-2"],
        "project_default": ["db-1", "lost-1"],
    }


def test_host_variables_are_the_ledger_row_the_domain_and_the_address():
    variables = host_vars(populated(FLEET), "web-1")
    expected_row = {key: value for key, value in FLEET["instances"][0].items() if key != "uri"}
    assert variables["berth_instance"] == {**expected_row, "metadata": {}}
    # How Berth reaches the hypervisor (a key file path here) is not the guest's business.
    assert "uri" not in variables["berth_instance"]
    assert variables["berth_domain"] == {"state": "running", "interfaces": [
        {"type": "network", "source": "default", "mac": "52:54:00:00:00:01"}]}
    assert variables["ansible_host"] == "192.168.122.10"
    assert variables["berth_address_source"] == "lease"
    assert variables["berth_address_reason"] is None
    assert [address["address"] for address in variables["berth_addresses"]] == ["192.168.122.10"]


@pytest.mark.parametrize(
    "fetched_guest, source, reason",
    [
        pytest.param(guest(interface_type="user", addresses=[], skipped={
            "lease": "user-mode networking only: QEMU's own NAT, whose addresses libvirt cannot see",
            "agent": "user-mode networking only: QEMU's own NAT, whose addresses libvirt cannot see",
            "arp": "user-mode networking only: QEMU's own NAT, whose addresses libvirt cannot see"}),
            "none", "lease: user-mode networking only", id="user-mode"),
        pytest.param(guest(addresses=[], skipped={"lease": "no address", "agent": "the domain has no guest agent channel",
                                                  "arp": "no address"}),
                     "none", "lease: no address; agent: the domain has no guest agent channel; arp: no address",
                     id="no-lease-yet"),
        pytest.param(None, "none", "no domain with the instance's UUID on hv1", id="domain-gone"),
    ],
)
def test_a_guest_without_an_address_says_why_and_has_no_ansible_host(fetched_guest, source, reason):
    fetched = {"instances": [row("web-1")], "guests": {"uuid-web-1": fetched_guest}, "unreachable": {}}
    variables = host_vars(populated(fetched), "web-1")
    assert "ansible_host" not in variables
    assert variables["berth_address_source"] == source
    assert variables["berth_address_reason"].startswith(reason)


def test_an_unreachable_hypervisor_is_named_in_a_warning_and_its_instances_stay_listed():
    fetched = {"instances": [row("web-1"), row("web-2", host="hv2")], "guests": {"uuid-web-1": guest()},
               "unreachable": {"hv2": "libvirt did not answer openAuth within 1 s"}}
    plugin = populated(fetched)
    assert plugin.display.warnings == [
        "berth.fleet.instances: hypervisor hv2 did not answer; its instances are listed without addresses: "
        "libvirt did not answer openAuth within 1 s"]
    assert members(plugin)["berth_instances"] == ["web-1", "web-2"]
    other = host_vars(plugin, "web-2")
    assert "ansible_host" not in other
    assert other["berth_address_source"] == "unknown"
    assert other["berth_address_reason"] == "hypervisor hv2 did not answer: libvirt did not answer openAuth within 1 s"
    assert other["berth_instance"]["state"] == "ACTIVE"
    assert host_vars(plugin, "web-1")["ansible_host"] == "192.168.122.10"


def test_an_instance_named_as_a_host_of_another_source_never_adds_to_it():
    """Beside a berth.fleet.hypervisors source (read first), an instance hv-1 in the ledger never
    gives the hypervisor hv-1 its guest's address or variables, and Ansible's localhost is never
    made an instance (issue 34, item 3); the others are listed as ever."""
    plugin = make_plugin()
    plugin.inventory.add_group("hypervisors")
    plugin.inventory.add_host("hv-1", group="hypervisors")
    plugin.inventory.set_variable("hv-1", "berth_libvirt_uri", "qemu+ssh://hv-1.example/system")
    hypervisor_vars = dict(host_vars(plugin, "hv-1"))
    fetched = copy.deepcopy(FLEET)
    fetched["instances"] += [row("hv-1", host="hv2"), row("localhost", host="hv2")]
    fetched["guests"].update({"uuid-hv-1": guest(mac="52:54:00:00:00:04"), "uuid-localhost": guest()})
    plugin._populate(fetched)
    assert host_vars(plugin, "hv-1") == hypervisor_vars and "ansible_host" not in hypervisor_vars
    assert "localhost" not in plugin.inventory.hosts
    grouped = members(plugin)
    assert grouped["berth_instances"] == ["db-1", "lost-1", "web-1", "web-2"]
    assert grouped["hypervisors"] == ["hv-1"] and "hv-1" not in grouped["hypervisor_hv2"]
    assert plugin.display.warnings == [
        "berth.fleet.instances: instance hv-1 is not listed: the inventory has a host of that name already (from "
        "another source, such as a hypervisor), and this source never adds to a host it did not make",
        "berth.fleet.instances: instance localhost is not listed: the inventory has a host of that name already "
        "(the controller itself), and this source never adds to a host it did not make",
    ]


def test_without_contacting_hypervisors_the_ledger_row_is_all_there_is():
    fetched = {"instances": [row("web-1")], "guests": {}, "unreachable": {}}
    variables = host_vars(populated(fetched, contact_hypervisors=False), "web-1")
    assert variables["berth_address_source"] == "unknown"
    assert variables["berth_address_reason"] == "addresses not looked up (contact_hypervisors is false)"
    assert variables["berth_instance"]["metadata"] is None and variables["berth_domain"] is None


@pytest.mark.parametrize(
    "interfaces, addresses, expected",
    [
        pytest.param(["m1"], [("m1", "ipv6", "2001:db8::5"), ("m1", "ipv4", "10.0.0.5")], "10.0.0.5", id="ipv4-first"),
        pytest.param(["m1", "m2"], [("m2", "ipv4", "10.0.1.5"), ("m1", "ipv4", "10.0.0.5")], "10.0.0.5",
                     id="first-interface-first"),
        pytest.param(["m1", "m2"], [("m1", "ipv6", "fe80::1"), ("m2", "ipv6", "2001:db8::7")], "2001:db8::7",
                     id="link-local-never"),
        pytest.param(["m1"], [("m1", "ipv6", "FE80::1")], None, id="only-link-local"),
        pytest.param(["m1"], [], None, id="nothing"),
    ],
)
def test_the_address_to_reach_a_guest(interfaces, addresses, expected):
    found = [{"interface": "vnet", "mac": mac, "type": kind, "address": address, "prefix": 24}
             for mac, kind, address in addresses]
    assert preferred_address([{"type": "network", "source": "n", "mac": mac} for mac in interfaces], found) == expected


HOSTILE = "{{ lookup('pipe', 'id') }}"


def test_every_value_is_unsafe_compose_and_templating_leave_it_as_text():
    fetched = {"instances": [row("web-1", failure_reason=HOSTILE, image_properties={"os_distro": HOSTILE})],
               "guests": {"uuid-web-1": guest(metadata={"motd": HOSTILE, "role": "front"})}, "unreachable": {}}
    plugin = populated(fetched, "compose: {motd: berth_instance.metadata.motd}\n"
                                "keyed_groups: [{key: berth_instance.metadata.role, prefix: role}]\n")
    variables = host_vars(plugin, "web-1")
    assert variables["motd"] == HOSTILE
    templar = Templar(loader=DataLoader(), variables=variables)
    for value in (variables["berth_instance"]["failure_reason"], variables["berth_instance"]["image_properties"]["os_distro"],
                  variables["berth_instance"]["metadata"]["motd"]):
        assert templar.template(value) == HOSTILE
    assert members(plugin)["role_front"] == ["web-1"]


def test_constructed_groups_and_keyed_groups_read_the_host_variables():
    plugin = populated(FLEET, "groups: {addressed: berth_address_source == 'lease', big: berth_instance.vcpus > 4}\n"
                              "keyed_groups: [{key: berth_instance.host, prefix: 'on'}]\n")
    found = members(plugin)
    assert found["addressed"] == ["web-1", "web-2"]
    assert "big" not in found
    assert found["on_hv1"] == ["web-1"] and found["on_hv2"] == ["db-1", "web-2"]


def test_strict_fails_on_a_compose_expression_that_does_not_evaluate():
    fetched = {"instances": [row("web-1")], "guests": {}, "unreachable": {}}
    loose = populated(fetched, "compose: {owner: berth_instance.no_such_field.owner}\n")
    assert "owner" not in host_vars(loose, "web-1")
    with pytest.raises(AnsibleError, match="no_such_field"):
        populated(fetched, "strict: true\ncompose: {owner: berth_instance.no_such_field.owner}\n")


@pytest.mark.parametrize("options, field", [({"states": []}, "states"), ({"timeout": 0}, "timeout"),
                                            ({"timeout": -1.5}, "timeout")], ids=["no-state", "zero", "negative"])
def test_bad_options_are_refused_naming_them(options, field):
    plugin = make_plugin(**options)
    with pytest.raises(plugin_module.InputError) as caught:
        plugin._check_options()
    assert caught.value.field == field


def test_the_cache_answers_for_the_same_ledger_and_options_only(monkeypatch):
    calls = []

    def fetch(self, ledger_url):
        calls.append(ledger_url)
        return {"instances": [row(f"web-{len(calls)}")], "guests": {}, "unreachable": {}}

    monkeypatch.setattr(InventoryModule, "_fetch", fetch)
    plugin = make_plugin(cache=True, ledger_url="postgresql+psycopg://berth:s3cret@db/berth")
    first = plugin._fetch_cached("/src/fleet.berth_instances.yml", cache=True)
    assert plugin._fetch_cached("/src/fleet.berth_instances.yml", cache=True) == first
    assert len(calls) == 1
    # Never the password in what is cached.
    assert "s3cret" not in repr(plugin._cache)
    plugin._options["states"] = ["ACTIVE", "ERROR"]
    assert plugin._fetch_cached("/src/fleet.berth_instances.yml", cache=True) != first
    # --flush-cache (cache=False) fetches again.
    plugin._fetch_cached("/src/fleet.berth_instances.yml", cache=False)
    assert len(calls) == 3


def test_a_bad_ledger_url_fails_the_source_naming_the_option(tmp_path):
    source = tmp_path / "fleet.berth_instances.yml"
    source.write_text("plugin: berth.fleet.instances\n")
    plugin = make_plugin(ledger_url="mysql://nobody@db/berth")
    plugin._read_config_data = lambda path: None
    with pytest.raises(AnsibleParserError, match="ledger_url must be a sqlite:/// or postgresql"):
        plugin.parse(InventoryData(), DataLoader(), str(source), cache=False)


class FakeLedger:
    def __init__(self, url):
        self.url = url

    def open(self):
        return self

    def close(self):
        pass

    def inventory_instances(self, states):
        return [row("web-1"), row("web-2", host="hv2"), row("user-1", host="hv2")]


def test_waiting_asks_again_only_for_guests_that_may_still_get_an_address(monkeypatch):
    """web-1 has its lease at once; web-2's comes on the third look; user-1 (user-mode) never
    gets one and is not waited for."""
    asked = []

    def ask(self, host, uri, uuids):
        asked.append(sorted(uuids))
        looks = sum("uuid-web-2" in uuids for uuids in asked)
        answers = {"uuid-web-1": guest(), "uuid-user-1": guest(interface_type="user", addresses=[]),
                   "uuid-web-2": guest(addresses=None if looks >= 3 else [])}
        return {uuid: answers[uuid] for uuid in uuids}, None

    # The plugin imports the ledger when a source of its reads it: the fake stands where it looks.
    monkeypatch.setattr(ledger_package, "Ledger", FakeLedger)
    monkeypatch.setattr(plugin_module, "ADDRESS_POLL_S", 0.01)
    monkeypatch.setattr(InventoryModule, "_ask_hypervisor", ask)
    fetched = make_plugin(wait_for_addresses=30)._fetch(None)
    assert sorted(asked) == [["uuid-user-1", "uuid-web-2"], ["uuid-web-1"], ["uuid-web-2"], ["uuid-web-2"]]
    assert fetched["guests"]["uuid-web-2"]["addresses"]

    asked.clear()
    make_plugin()._fetch(None)  # wait_for_addresses 0: one look at each
    assert sorted(asked) == [["uuid-user-1", "uuid-web-2"], ["uuid-web-1"]]


@pytest.mark.parametrize("fetched_guest, waits", [
    (guest(addresses=[]), True),
    (guest(), False),
    (guest(addresses=[], interface_type="user"), False),
    (guest(addresses=[], state="shutoff"), False),
    (None, False),
], ids=["no-lease-yet", "has-address", "user-mode", "stopped", "no-domain"])
def test_which_guests_are_waited_for(fetched_guest, waits):
    assert awaits_address(fetched_guest) is waits
