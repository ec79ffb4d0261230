"""A hypervisor cannot choose what another one defines (issue 22): a source domain that carries a
device Berth did not put there - a host directory, a host PCI device, a serial port writing to a
file of the hypervisor, QEMU's own arguments - is refused by every move (cold, live, a drain, a
resize onto another host), naming it, and nothing changes; the same instance without it moves,
and the destination's definition read back through libvirt is the one Berth renders."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from conftest import failed_messages, rows, task_result
from test_fleet_report import run_module

pytestmark = pytest.mark.integration

TINY = {"vcpus": 1, "memory_mb": 128, "root_gb": 1}
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
HOSTILE = {
    "filesystem": ("<filesystem type='mount' accessmode='passthrough'><source dir='/'/><target dir='hostroot'/>"
                   "</filesystem>", "filesystem type=mount (dir=/)"),
    "hostdev": ("<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' bus='0x00' "
                "slot='0x1f' function='0x3'/></source></hostdev>", "hostdev type=pci"),
    "serial-file": ("<serial type='file'><source path='/etc/berth-serial-probe'/><target port='1'/></serial>",
                    "serial type=file (path=/etc/berth-serial-probe)"),
    "qemu-commandline": (None, f"commandline of namespace {QEMU_NS}"),
}
MOVES = ("cold", "live", "drain", "resize")


@pytest.fixture(scope="module")
def moving(lab, tmp_path_factory):
    """One running instance on a ledger of its own."""
    directory = tmp_path_factory.mktemp("trust")
    url = f"sqlite:///{directory}/ledger.sqlite3"
    inventory = lab.inventory_copy(directory, url)

    def playbook(name: str, extra: dict, **kwargs) -> dict:
        return lab.finish(lab.start_playbook(name, "-e", json.dumps(extra), inventory=inventory, **kwargs))

    assert lab.finish(lab.start_playbook("gather.yml", inventory=inventory))["rc"] == 0
    launched = playbook("launch.yml", {"server_name": "trust", "flavor": TINY})
    assert launched["rc"] == 0, failed_messages(launched)
    try:
        yield {"lab": lab, "url": url, "inventory": inventory, "playbook": playbook}
    finally:
        playbook("delete.yml", {"server_name": "trust"})


def placed(moving) -> dict:
    [row] = [row for row in rows(moving["url"], "instances") if row["name"] == "trust-1"]
    return row


def with_device(xml: str, kind: str) -> str:
    device, _named = HOSTILE[kind]
    if device is not None:
        return xml.replace("</devices>", device + "</devices>")
    root = ET.fromstring(xml)
    ET.register_namespace("qemu", QEMU_NS)
    commandline = ET.SubElement(root, f"{{{QEMU_NS}}}commandline")
    ET.SubElement(commandline, f"{{{QEMU_NS}}}arg", value="-no-reboot")
    return ET.tostring(root, encoding="unicode")


def run_move(moving, how: str, host: str) -> dict:
    play = moving["playbook"]
    if how == "drain":
        return play("drain.yml", {"drain_host": host})
    if how == "resize":
        # Its own host disabled: the resize goes elsewhere, through the move.
        run_module(moving["lab"], moving["inventory"], "berth.fleet.hypervisor",
                   {"host": host, "state": "disabled", "reason": "resize elsewhere"})
        try:
            return play("resize.yml", {"server_name": "trust-1", "flavor": {**TINY, "name": "wider", "vcpus": 2}})
        finally:
            run_module(moving["lab"], moving["inventory"], "berth.fleet.hypervisor", {"host": host, "state": "enabled"})
    return play("migrate.yml", {"instance": "trust-1", "mode": how})


@pytest.mark.parametrize("how", MOVES)
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_source_domain_with_a_device_berth_did_not_put_there_is_refused_naming_it(moving, kind, how):
    lab = moving["lab"]
    before = placed(moving)
    host, uuid = before["host"], before["uuid"]
    original = lab.virsh(host, "dumpxml", "--inactive", uuid)
    definition = moving["lab"].dir + f"/hostile-{kind}.xml"
    with open(definition, "w", encoding="utf-8") as handle:
        handle.write(with_device(original, kind))
    lab.virsh(host, "define", definition)
    try:
        output = run_move(moving, how, host)
    finally:
        with open(definition, "w", encoding="utf-8") as handle:
            handle.write(original)
        lab.virsh(host, "define", definition)
    assert output["rc"] != 0
    said = json.dumps(output)
    assert "has what Berth did not define there" in said and HOSTILE[kind][1] in said, failed_messages(output)
    assert "carry_definition=true" in said
    # Nothing changed: same host, one claim there, running, nowhere else.
    after = placed(moving)
    assert (after["host"], after["state"], after["vcpus"]) == (host, "ACTIVE", before["vcpus"])
    assert [claim["instance_uuid"] for claim in rows(moving["url"], "claims")] == [uuid]
    assert lab.virsh(host, "domstate", uuid).strip() == "running"
    for other in lab.hosts:
        if other != host:
            assert uuid not in lab.virsh(other, "list", "--all", "--uuid")


@pytest.mark.parametrize("mode", ["live", "cold"])
def test_the_destination_defines_what_berth_renders_not_what_the_source_has(moving, mode):
    lab = moving["lab"]
    before = placed(moving)
    source_xml = ET.fromstring(lab.virsh(before["host"], "dumpxml", "--inactive", before["uuid"]))
    output = moving["playbook"]("migrate.yml", {"instance": "trust-1", "mode": mode})
    assert output["rc"] == 0, failed_messages(output)
    moved = task_result(output, "Migrate the instance")
    assert moved["mode"] == mode
    after = placed(moving)
    assert after["host"] != before["host"]
    arrived = ET.fromstring(lab.virsh(after["host"], "dumpxml", "--inactive", after["uuid"]))
    # The definition Berth renders, in the destination's pool: same devices, same MAC, its disks there.
    assert [d.find("target").get("dev") for d in arrived.findall("devices/disk")] == [
        d.find("target").get("dev") for d in source_xml.findall("devices/disk")]
    assert [mac.get("address") for mac in arrived.findall("devices/interface/mac")] == [
        mac.get("address") for mac in source_xml.findall("devices/interface/mac")]
    pool = lab.virsh(after["host"], "pool-dumpxml", "default").split("<path>")[1].split("</path>")[0]
    assert {disk.find("source").get("file").rsplit("/", 1)[0] for disk in arrived.findall("devices/disk")} == {pool}
    assert not [child for child in arrived if child.tag.startswith("{")]
    assert not arrived.findall("devices/filesystem") and not arrived.findall("devices/hostdev")
