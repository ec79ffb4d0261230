"""An instance keeps the request it was launched with through every move (issue 33), on the real lab
fleet: launched with guest options none of which is the default - a custom CPU model the
operator's inventory gives, an e1000 NIC, disks on SATA, an ephemeral and a swap disk, an SSH key
and a static address on its seed - then cold-migrated, live-migrated and resized. After each
step libvirt's definition of it on its new host is what it was, less what is the host's own or
the new flavor's; the ledger's record of its request is the same typed request throughout."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from conftest import failed_messages, task_result

pytestmark = pytest.mark.integration

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMHAHKTOP2ZweYwdkDpx84WRcq9TQF+EoJE7iTdXnww7 kept@example"
FLAVOR = {"name": "kept.small", "vcpus": 1, "memory_mb": 256, "root_gb": 1, "ephemeral_gb": 1, "swap": 64}
BIGGER = {**FLAVOR, "name": "kept.big", "vcpus": 2, "memory_mb": 384}
# The operator's CPU for the fleet's guests: a named model every lab host can run under QEMU.
CPU = {"cpu_mode": "custom", "cpu_models": ["qemu64"]}
REQUEST = {
    "name": "kept", "flavor": FLAVOR, "nic_model": "e1000", "disk_bus": "sata", "cdrom_bus": "ide",
    "ssh_authorized_keys": [KEY], "metadata": {"team": "blue"},
    "networks": [{"type": "network", "name": "berth-lab", "addresses": ["10.250.7.20/24"], "gateway": "10.250.7.1"},
                 {"type": "user"}],
}
NS = {"berth": "urn:berth:instance:1"}


def definition(lab, host: str, name: str) -> ET.Element:
    return ET.fromstring(lab.virsh(host, "dumpxml", "--inactive", name))


def guest_part(domain: ET.Element, resized: bool = False) -> list[str]:
    """The definition less what is its host's own (nothing of a lab host's shows, but the guest's
    live migration leaves libvirt's runtime ids out of an inactive definition either way) and,
    for ``resized``, less what the flavor sizes: memory, vCPUs, the CPU topology, the flavor's
    name in Berth's metadata."""
    domain = ET.fromstring(ET.tostring(domain))
    for tag in ("memory", "currentMemory", "vcpu"):
        element = domain.find(tag)
        if resized and element is not None:
            domain.remove(element)
    if resized:
        cpu = domain.find("cpu")
        cpu.remove(cpu.find("topology"))
        instance = domain.find("metadata/berth:instance", NS)
        instance.remove(instance.find("berth:flavor", NS))
    devices = domain.find("devices")
    controllers = devices.findall("controller")
    if controllers:
        # libvirt lists the controllers it adds in its own order, which a live migration's
        # destination may choose differently: their order is no part of the guest (the disks' is).
        at = list(devices).index(controllers[0])
        for controller in controllers:
            devices.remove(controller)
        for offset, controller in enumerate(sorted(controllers, key=lambda item: (item.get("type"), item.get("index")))):
            devices.insert(at + offset, controller)
    for element in domain.iter():
        # libvirt indents what it keeps of the metadata as it likes: the layout is no part of it.
        element.tail = None
        if element.text is not None and not element.text.strip():
            element.text = None
    ET.indent(domain)
    return ET.tostring(domain, encoding="unicode").splitlines()


def where(lab, ledger: str, name: str) -> dict:
    rows = [row for row in lab.ledger_rows("instances", ledger) if row["name"] == name]
    assert len(rows) == 1
    return rows[0]


@pytest.fixture
def kept_lab(lab, tmp_path):
    """The lab with its own ledger and the operator's CPU model in its inventory source."""
    ledger = tmp_path / "ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, f"sqlite:///{ledger}", settings={host: CPU for host in lab.hosts},
                                   guest_os=False)
    gathered = lab.finish(lab.start_playbook("gather.yml", inventory=inventory))
    assert gathered["rc"] == 0, failed_messages(gathered)
    return inventory, str(ledger)


def test_the_guest_definition_is_kept_through_cold_and_live_migration_and_resize(lab, kept_lab):
    inventory, ledger = kept_lab

    def play(playbook: str, *extra: str) -> dict:
        output = lab.finish(lab.start_playbook(playbook, *extra, inventory=inventory))
        assert output["rc"] == 0, failed_messages(output)
        return output

    play("launch.yml", "-e", json.dumps({**REQUEST, "berth_force_hosts": ["hv1"]}))
    row = where(lab, ledger, "kept-1")
    assert row["host"] == "hv1"
    launched = definition(lab, "hv1", "kept-1")
    recorded = json.loads(row["request"])
    # The definition has what was asked for; the record is the typed request's (schema 2).
    assert launched.find("cpu/model").text == "qemu64"
    assert {model.get("type") for model in launched.findall("devices/interface/model")} == {"e1000"}
    assert [target.get("bus") for target in launched.findall("devices/disk[@device='disk']/target")] == ["sata"] * 3
    assert launched.find("devices/disk[@device='cdrom']/target").get("bus") == "ide"
    assert recorded["version"] == 2 and recorded["guest"]["nic_model"] == "e1000"
    assert recorded["public_keys"] == [KEY] and recorded["networks"][0]["addresses"] == ["10.250.7.20/24"]
    assert recorded["build"]["cpu"]["model"] == "qemu64" and recorded["build"]["seed"] is True

    moved = play("migrate.yml", "-e", "instance=kept-1", "-e", "to_host=hv2", "-e", "mode=cold")
    assert task_result(moved, "Migrate the instance")["mode"] == "cold"
    assert where(lab, ledger, "kept-1")["host"] == "hv2"
    assert guest_part(definition(lab, "hv2", "kept-1")) == guest_part(launched)

    moved = play("migrate.yml", "-e", "instance=kept-1", "-e", "to_host=hv3", "-e", "mode=live")
    assert task_result(moved, "Migrate the instance")["mode"] == "live"
    assert guest_part(definition(lab, "hv3", "kept-1")) == guest_part(launched)

    play("resize.yml", "-e", "server_name=kept-1", "-e", json.dumps({"flavor": BIGGER}))
    row = where(lab, ledger, "kept-1")
    resized = definition(lab, row["host"], "kept-1")
    assert (resized.find("vcpu").text, resized.find("memory").text) == ("2", str(384 * 1024))
    assert guest_part(resized, resized=True) == guest_part(launched, resized=True)
    # The record is the launch's, with the new flavor only.
    after = json.loads(row["request"])
    assert after["flavor"]["name"] == "kept.big"
    assert {**after, "flavor": None} == {**recorded, "flavor": None}

    play("delete.yml", "-e", "server_name=kept")
    assert all("kept-1" not in lab.virsh(host, "list", "--all", "--name") for host in lab.hosts)


def test_a_request_recorded_by_the_previous_schema_moves_as_it_was_launched(lab, kept_lab):
    """An instance whose ledger row holds a schema 1 record (Berth before the typed request) is
    read through the upgrade: its cold move defines what it was defined with."""
    inventory, ledger = kept_lab
    launched = lab.finish(lab.start_playbook("launch.yml", "-e", json.dumps(
        {"name": "old", "flavor": FLAVOR, "nic_model": "rtl8139", "berth_force_hosts": ["hv1"]}), inventory=inventory))
    assert launched["rc"] == 0, failed_messages(launched)
    row = where(lab, ledger, "old-1")
    record = json.loads(row["request"])
    before = guest_part(definition(lab, "hv1", "old-1"))
    # Schema 1: no version; the guest's definition inside the build record, the image by its
    # properties only, the launch's scheduler settings beside the request.
    schema_1 = {"availability_zone": None, "scheduler_hints": {}, "project_id": "default", "image_properties": {},
                "enabled_filters": ["ComputeFilter", "RamFilter"], "requested_networks": [],
                "flavor": record["flavor"], "server_group": None,
                "build": {"metadata": {}, "networks": [], "boot": record["boot"], "guest": record["guest"],
                          "seed": record["build"]["seed"], "local_disks": True, "domain_type": record["domain_type"],
                          "cpu": {**record["build"]["cpu"], "image_properties": {}}}}
    lab.ledger_execute(ledger, "UPDATE instances SET request = ? WHERE name = 'old-1'", (json.dumps(schema_1),))
    moved = lab.finish(lab.start_playbook("migrate.yml", "-e", "instance=old-1", "-e", "to_host=hv2",
                                          "-e", "mode=cold", inventory=inventory))
    assert moved["rc"] == 0, failed_messages(moved)
    assert guest_part(definition(lab, "hv2", "old-1")) == before
    assert lab.finish(lab.start_playbook("delete.yml", "-e", "server_name=old", inventory=inventory))["rc"] == 0
