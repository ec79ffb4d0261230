"""Rescue and unrescue (operations/rescue.py) through a fake hypervisor (fake_hypervisor.py)
synced by the real tracker sync into a real ledger: the instance boots from a rescue disk made
from the rescue image, its own root disk as its second disk, its seed kept, its other disks and
volumes waiting; the unrescue defines it as before and removes the rescue disk. A host whose
image rules refuse the rescue image, and a domain with what Berth did not define, change nothing;
check mode changes nothing; a run killed at each step leaves the instance RESCUED with its claim
and nothing unknown to a sync, and running it again (or the unrescue) finishes it; bad input is
refused naming the field. The same through real libvirt and ansible-playbook:
tests/integration/test_rescue_lab.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from fake_hypervisor import connect_to
from test_evacuate_operation import sync
from test_rebuild_operation import ARGS, DieAt, Killed, app  # noqa: F401 pylint: disable=unused-import

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import (
    data_volume_name,
    rescue_volume_name,
    root_volume_name,
    seed_volume_name,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import (
    AFTER_RESCUE_DEFINE,
    AFTER_RESCUE_DISK,
    AFTER_UNRESCUE_DEFINE,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, RESCUED
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.rescue import Rescue, rescue_definition
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.volume import Volume
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

RESCUE_ARGS = {**ARGS, "shutdown_timeout": 0}


def rescue(ledger, hv, check_mode=False, hooks=None, **args):
    return Rescue({**RESCUE_ARGS, "name": "app-1", **args}, Settings(), ledger, {}, check_mode,
                  **({"hooks": hooks} if hooks else {}), connect=connect_to(hv)).run()


def disks(xml):
    """[(device, source file)] of the domain's disks (not CD-ROMs), in order."""
    return [(disk.find("target").get("dev"), disk.find("source").get("file"))
            for disk in ET.fromstring(xml).findall("devices/disk") if disk.get("device") == "disk"]


def test_rescue_boots_the_rescue_disk_with_the_own_root_disk_second_and_unrescue_puts_it_back(app):
    ledger, hv1, uuid = app
    own = hv1.domain_xml(uuid, inactive=True)
    path = hv1.pool_path("default")
    done = rescue(ledger, hv1, image="new.qcow2")
    assert (done["changed"], done["state"], done["image"]) == (True, RESCUED, "new.qcow2")
    assert disks(hv1.domain_xml(uuid)) == [("vda", f"{path}/{rescue_volume_name(uuid)}"),
                                           ("vdb", f"{path}/{root_volume_name(uuid)}")]
    assert seed_volume_name(uuid) in hv1.domain_xml(uuid)  # the config drive stays
    assert hv1.pools["default"]["volumes"][rescue_volume_name(uuid)]["backing"].endswith("/new.qcow2")
    assert hv1.domain_state(uuid) == "running"
    [row] = ledger.instances(["app-1"])
    assert (row["state"], row["failure_reason"]) == (RESCUED, "rescued with image new.qcow2: unrescue it to boot "
                                                              "from its own disk again")
    assert [claim["host"] for claim in ledger.claims(uuid)] == ["hv1"]
    # A second rescue changes nothing; a sync leaves a rescued instance alone.
    assert not rescue(ledger, hv1, image="old.qcow2")["changed"]
    synced = sync(ledger, hv1)
    assert ledger.instances(["app-1"])[0]["state"] == RESCUED
    assert not any(word in line for line in synced["drift"] for word in ("orphan", "missing", "left", "power")), \
        synced["drift"]

    back = rescue(ledger, hv1, state="unrescued")
    assert (back["changed"], back["state"]) == (True, ACTIVE)
    assert hv1.domain_xml(uuid, inactive=True) == own and hv1.domain_state(uuid) == "running"
    assert rescue_volume_name(uuid) not in hv1.volume_names_of()
    [row] = ledger.instances(["app-1"])
    assert (row["state"], row["failure_reason"]) == (ACTIVE, None)
    assert not rescue(ledger, hv1, state="unrescued")["changed"]


def test_the_default_rescue_image_is_the_one_it_was_launched_with(app):
    ledger, hv1, uuid = app
    assert rescue(ledger, hv1)["image"] == "old.qcow2"
    assert hv1.pools["default"]["volumes"][rescue_volume_name(uuid)]["backing"].endswith("/old.qcow2")


def test_data_volumes_wait_for_the_unrescue(app):
    ledger, hv1, uuid = app
    options = {"name": "data-1", "size_gb": 1, "host": "hv1", "instance": None, "timeout": 30}
    Volume({**options, "state": "present"}, Settings(), ledger, False, connect=connect_to(hv1)).run()
    Volume({**options, "state": "attached", "instance": "app-1"}, Settings(), ledger, False,
           connect=connect_to(hv1)).run()
    rescue(ledger, hv1, image="new.qcow2")
    assert data_volume_name("data-1") not in hv1.domain_xml(uuid)
    rescue(ledger, hv1, state="unrescued")
    assert data_volume_name("data-1") in hv1.domain_xml(uuid)


def test_a_host_whose_image_rules_refuse_the_rescue_image_changes_nothing(app):
    ledger, hv1, _uuid = app
    hv1.add_volume("arm.qcow2")
    snapshot = hv1.snapshot()
    with pytest.raises(InputError, match=r"app-1 cannot be rescued with image arm\.qcow2 on hv1: image properties: "
                                         r"aarch64/any/any not supported\. Nothing was changed"):
        rescue(ledger, hv1, image={"name": "arm.qcow2", "properties": {"hw_architecture": "aarch64"}})
    assert hv1.snapshot() == snapshot and ledger.instances(["app-1"])[0]["state"] == ACTIVE


def test_a_domain_with_what_berth_did_not_define_is_refused_before_anything_changes(app):
    ledger, hv1, uuid = app
    xml = ET.fromstring(hv1.domain_xml(uuid, inactive=True))
    ET.SubElement(xml.find("devices"), "filesystem", type="mount").append(ET.Element("source", dir="/etc"))
    hv1.define(ET.tostring(xml, encoding="unicode"))
    snapshot = hv1.snapshot()
    with pytest.raises(BerthError, match=r"has what Berth did not define there: .*filesystem.*nothing was changed"):
        rescue(ledger, hv1, image="new.qcow2")
    assert hv1.snapshot() == snapshot and ledger.instances(["app-1"])[0]["state"] == ACTIVE


def test_check_mode_says_what_it_would_do_and_changes_nothing(app):
    ledger, hv1, _uuid = app
    snapshot = hv1.snapshot()
    plan = rescue(ledger, hv1, check_mode=True, image="new.qcow2")
    assert plan["changed"] and plan["msg"] == ("would rescue app-1 on hv1 from image new.qcow2, its own root disk as "
                                               "its second disk")
    assert hv1.snapshot() == snapshot and ledger.instances(["app-1"])[0]["state"] == ACTIVE


@pytest.mark.parametrize("point", [AFTER_RESCUE_DISK, AFTER_RESCUE_DEFINE])
@pytest.mark.parametrize("then", ["rescued", "unrescued"])
def test_a_rescue_killed_at_each_step_is_finished_by_running_it_again_or_undone_by_the_unrescue(app, point, then):
    ledger, hv1, uuid = app
    own = hv1.domain_xml(uuid, inactive=True)
    with pytest.raises(Killed):
        rescue(ledger, hv1, hooks=DieAt(point), image="new.qcow2")
    [row] = ledger.instances(["app-1"])
    assert row["state"] == RESCUED and row["failure_reason"].startswith("rescuing with image new.qcow2 by ")
    assert [claim["host"] for claim in ledger.claims(uuid)] == ["hv1"]
    synced = sync(ledger, hv1)
    assert not any("orphan" in line for line in synced["drift"]), synced["drift"]
    assert rescue(ledger, hv1, state=then, image="new.qcow2")["changed"]
    [row] = ledger.instances(["app-1"])
    assert hv1.domain_state(uuid) == "running"
    if then == "rescued":
        assert row["state"] == RESCUED and disks(hv1.domain_xml(uuid))[0][1].endswith(rescue_volume_name(uuid))
    else:
        assert row["state"] == ACTIVE and hv1.domain_xml(uuid, inactive=True) == own
        assert rescue_volume_name(uuid) not in hv1.volume_names_of()


def test_an_unrescue_killed_after_its_definition_is_finished_by_running_it_again(app):
    ledger, hv1, uuid = app
    own = hv1.domain_xml(uuid, inactive=True)
    rescue(ledger, hv1, image="new.qcow2")
    with pytest.raises(Killed):
        rescue(ledger, hv1, hooks=DieAt(AFTER_UNRESCUE_DEFINE), state="unrescued")
    assert ledger.instances(["app-1"])[0]["state"] == RESCUED
    assert rescue(ledger, hv1, state="unrescued")["state"] == ACTIVE
    assert hv1.domain_xml(uuid, inactive=True) == own and rescue_volume_name(uuid) not in hv1.volume_names_of()


def test_a_rescue_that_fails_says_so_and_the_unrescue_boots_the_own_disk(app):
    ledger, hv1, uuid = app
    own = hv1.domain_xml(uuid, inactive=True)
    hv1.faults["define"] = HypervisorError("hv1", "internal error: injected")
    with pytest.raises(BerthError, match=r"app-1: rescue with image new\.qcow2 on hv1 failed \(RESCUED, its claim kept"):
        rescue(ledger, hv1, image="new.qcow2")
    [row] = ledger.instances(["app-1"])
    assert row["state"] == RESCUED and "internal error: injected" in row["failure_reason"]
    del hv1.faults["define"]
    assert rescue(ledger, hv1, state="unrescued")["state"] == ACTIVE
    assert hv1.domain_xml(uuid, inactive=True) == own and hv1.domain_state(uuid) == "running"


def test_deleting_an_instance_in_rescue_removes_its_rescue_disk(app):
    from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import remove_instance

    ledger, hv1, uuid = app
    rescue(ledger, hv1, image="new.qcow2")
    remove_instance(hv1, uuid, "default")
    assert not [name for name in hv1.volume_names_of() if uuid in name]


@pytest.mark.parametrize("args, field, message", [
    ({"name": "nope"}, "name", "no instance named nope"),
    ({"image": "../etc/passwd"}, "image", ""),
    ({"image": {"name": "x.qcow2", "source": "/etc/shadow"}}, "image", ""),
    ({"state": "sideways"}, "state", "state must be one of rescued, unrescued"),
])
def test_bad_input_is_refused_naming_the_field_and_nothing_changes(app, args, field, message):
    ledger, hv1, _uuid = app
    snapshot = hv1.snapshot()
    with pytest.raises(InputError) as raised:
        rescue(ledger, hv1, **args)
    assert raised.value.field.startswith(field) and message in str(raised.value)
    assert hv1.snapshot() == snapshot and ledger.instances(["app-1"])[0]["state"] == ACTIVE


def test_the_rescue_definition_moves_the_root_disk_to_the_next_device_and_drops_other_disks():
    xml = ("<domain><devices>"
           "<disk type='file' device='disk'><source file='/p/root'/><target dev='sda' bus='scsi'/>"
           "<address type='drive' unit='0'/></disk>"
           "<disk type='file' device='disk'><source file='/p/eph'/><target dev='sdb' bus='scsi'/></disk>"
           "<disk type='file' device='cdrom'><source file='/p/seed'/><target dev='hda' bus='ide'/></disk>"
           "</devices></domain>")
    rescued = ET.fromstring(rescue_definition(xml, "/p/rescue"))
    assert [(d.get("device"), d.find("target").get("dev"), d.find("source").get("file"))
            for d in rescued.findall("devices/disk")] == [("disk", "sda", "/p/rescue"), ("disk", "sdb", "/p/root"),
                                                          ("cdrom", "hda", "/p/seed")]
    assert rescued.find("devices/disk/address") is None
