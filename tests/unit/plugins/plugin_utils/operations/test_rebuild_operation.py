"""Rebuild (operations/rebuild.py) through a fake hypervisor (fake_hypervisor.py) synced by the
real tracker sync into a real ledger: the disks made anew from another image on the instance's
own host, its UUID, MAC, keys, user data and claim kept, the ledger recording the new image; a
host whose image property rules refuse the image changes nothing; check mode changes nothing; a
rebuild that dies after removing the old disks leaves the instance ERROR with its claim and
nothing unknown, and running it again finishes it; bad input refused naming the field. The same
through real libvirt and ansible-playbook: tests/integration/test_rebuild_lab.py."""

from __future__ import annotations

import json

import pytest
from fake_hypervisor import FakeHypervisor, connect_to
from test_evacuate_operation import hv_uuid, sync

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Image, Network, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import root_volume_name, seed_volume_name
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import mac_address
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import AFTER_REBUILD_REMOVE, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import ACTIVE, ERROR
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.rebuild import Rebuild
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
ARGS = {"timeout": 30, "template": None}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ0vYpX1JmTQ4bKHgJ8uRSWYkdpNCn0KOCCR6sAvOTOz lab@berth"


class Killed(BaseException):
    """The process dies (SIGKILL): nothing after this point runs."""


class DieAt(Hooks):
    def __init__(self, point):
        self.point = point

    def reached(self, point, host=None, instance=None):
        if point == self.point:
            raise Killed()


@pytest.fixture
def app(ledger):
    """app-1 built on hv1 from old.qcow2 by a real Build, with user data and a key; new.qcow2 and
    old.qcow2 in hv1's pool."""
    hv1 = FakeHypervisor("hv1")
    hv1.add_volume("old.qcow2", data=b"old image")
    hv1.add_volume("new.qcow2", data=b"new image")
    sync(ledger, hv1)
    request = Request(flavor=TINY, domain_type="qemu", image=Image("old.qcow2"),
                      networks=Network.from_option([{"type": "network", "name": "default"}]),
                      user_data="#cloud-config\n# app-marker\n", public_keys=(KEY,))
    [row] = ledger.claim([{"name": "app-1", "host": "hv1", "hypervisor_uuid": hv_uuid("hv1")}], TINY, "launch",
                         request=request.to_record(), image="old.qcow2", user_data=request.user_data)
    target = ledger.build_targets([hv_uuid("hv1")])[hv_uuid("hv1")]
    build = Build(Settings(), ledger, DEFAULT_TEMPLATE, False, False, connect=connect_to(hv1))
    placement = {**target, "name": "app-1", "uuid": row["uuid"], "assignment": None}
    assert not build.build(request, [placement]).get("failed")
    return ledger, hv1, row["uuid"]


def rebuild(ledger, hv, check_mode=False, hooks=None, **args):
    return Rebuild({**ARGS, "name": "app-1", **args}, Settings(), ledger, {}, check_mode,
                   **({"hooks": hooks} if hooks else {}), connect=connect_to(hv)).run()


def test_the_disks_are_made_anew_from_the_new_image_keeping_what_identifies_the_instance(app):
    ledger, hv1, uuid = app
    before_xml = hv1.domain_xml(uuid)
    [before] = ledger.instances(["app-1"])
    done = rebuild(ledger, hv1, image="new.qcow2")
    assert done["changed"] and (done["image"], done["previous_image"]) == ("new.qcow2", "old.qcow2")
    [after] = ledger.instances(["app-1"])
    assert (after["uuid"], after["host"], after["state"], after["image"]) == (uuid, "hv1", ACTIVE, "new.qcow2")
    assert after["request"]["image"]["name"] == "new.qcow2" and after["failure_reason"] is None
    assert [claim["host"] for claim in ledger.claims(uuid)] == ["hv1"]
    assert hv1.domain_state(uuid) == "running"
    root = hv1.pools["default"]["volumes"][root_volume_name(uuid)]
    assert root["backing"].endswith("/new.qcow2")
    # MAC, key and user data kept: the MAC is the UUID's, the seed made again with both.
    assert mac_address(uuid, 0) in hv1.domain_xml(uuid) and mac_address(uuid, 0) in before_xml
    seed = hv1.pools["default"]["volumes"][seed_volume_name(uuid)]["data"]
    assert b"# app-marker" in seed and KEY.encode() in seed
    assert "app-marker" not in json.dumps(done, default=str)
    assert before["created_at"] == after["created_at"]


def test_a_host_whose_image_rules_refuse_the_image_changes_nothing(app):
    ledger, hv1, uuid = app
    hv1.add_volume("arm.qcow2")
    snapshot = hv1.snapshot()
    with pytest.raises(InputError, match=r"cannot be rebuilt from image arm\.qcow2 on hv1: image properties: "
                                         r"aarch64/any/any not supported\. Nothing was changed") as raised:
        rebuild(ledger, hv1, image={"name": "arm.qcow2", "properties": {"hw_architecture": "aarch64"}})
    assert raised.value.field == "image"
    assert hv1.snapshot() == snapshot
    [row] = ledger.instances(["app-1"])
    assert (row["state"], row["image"]) == (ACTIVE, "old.qcow2")


def test_an_image_the_host_lacks_is_refused_by_pool_image_filter(app):
    ledger, hv1, _uuid = app
    with pytest.raises(InputError, match=r"cannot be rebuilt from image missing\.qcow2 on hv1: image missing") as raised:
        rebuild(ledger, hv1, image="missing.qcow2")
    assert raised.value.field == "image"
    assert ledger.instances(["app-1"])[0]["image"] == "old.qcow2"


def test_check_mode_says_what_it_would_do_and_changes_nothing(app):
    ledger, hv1, _uuid = app
    snapshot = hv1.snapshot()
    plan = rebuild(ledger, hv1, check_mode=True, image="new.qcow2")
    assert plan["changed"] and plan["msg"].startswith("would rebuild app-1 on hv1: root disk made anew from image new.qcow2")
    assert hv1.snapshot() == snapshot and ledger.instances(["app-1"])[0]["image"] == "old.qcow2"


def test_a_rebuild_without_an_image_uses_the_one_it_was_launched_with(app):
    ledger, hv1, uuid = app
    done = rebuild(ledger, hv1)
    assert done["image"] == "old.qcow2" and hv1.domain_state(uuid) == "running"


@pytest.mark.parametrize("point", [AFTER_REBUILD_REMOVE, "after-root-volume", "after-seed-volume", "after-define"])
def test_a_rebuild_that_dies_leaves_the_instance_error_with_its_claim_and_a_second_run_finishes_it(app, point):
    ledger, hv1, uuid = app
    with pytest.raises(Killed):
        rebuild(ledger, hv1, hooks=DieAt(point), image="new.qcow2")
    [row] = ledger.instances(["app-1"])
    assert row["state"] == ERROR and row["failure_reason"].startswith("rebuilding from image new.qcow2 by ")
    assert [claim["host"] for claim in ledger.claims(uuid)] == ["hv1"]
    # What is on the host is the instance's own (named by its UUID), and the ledger knows it.
    assert all(uuid in name for name in hv1.volume_names_of() if name not in ("old.qcow2", "new.qcow2"))
    synced = sync(ledger, hv1)
    assert not any("orphan" in line for line in synced["drift"]), synced["drift"]
    assert ledger.instances(["app-1"])[0]["state"] == ERROR
    done = rebuild(ledger, hv1, image="new.qcow2")
    assert done["instance"]["state"] == ACTIVE and hv1.domain_state(uuid) == "running"
    assert hv1.pools["default"]["volumes"][root_volume_name(uuid)]["backing"].endswith("/new.qcow2")


@pytest.mark.parametrize("args, field, message", [
    ({"name": "nope"}, "name", "no instance named nope"),
    ({"image": "../etc/passwd"}, "image", ""),
    ({"image": {"name": "x.qcow2", "source": "/etc/shadow"}}, "image", ""),
])
def test_bad_input_is_refused_naming_the_field_and_nothing_changes(app, args, field, message):
    ledger, hv1, _uuid = app
    snapshot = hv1.snapshot()
    with pytest.raises(InputError) as raised:
        rebuild(ledger, hv1, **args)
    assert raised.value.field.startswith(field) and message in str(raised.value)
    assert hv1.snapshot() == snapshot and ledger.instances(["app-1"])[0]["state"] == ACTIVE


def test_a_build_that_fails_leaves_the_instance_error_saying_why_and_a_second_run_finishes_it(app):
    from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError

    ledger, hv1, uuid = app
    hv1.faults["define"] = HypervisorError("hv1", "internal error: injected")
    with pytest.raises(BerthError, match=r"app-1: rebuild from image new\.qcow2 on hv1 failed \(ERROR, its claim kept"):
        rebuild(ledger, hv1, image="new.qcow2")
    [row] = ledger.instances(["app-1"])
    assert row["state"] == ERROR and "internal error: injected" in row["failure_reason"]
    assert hv1.domain_state(uuid) is None and [claim["host"] for claim in ledger.claims(uuid)] == ["hv1"]
    del hv1.faults["define"]
    assert rebuild(ledger, hv1, image="new.qcow2")["instance"]["state"] == ACTIVE


def test_an_attached_data_volume_is_kept_and_plugged_into_the_rebuilt_domain(app):
    from ansible_collections.berth.fleet.plugins.module_utils.volume_names import data_volume_name
    from ansible_collections.berth.fleet.plugins.plugin_utils.operations.volume import Volume

    ledger, hv1, uuid = app
    options = {"name": "data-1", "size_gb": 1, "host": "hv1", "instance": None, "timeout": 30}
    Volume({**options, "state": "present"}, Settings(), ledger, False, connect=connect_to(hv1)).run()
    Volume({**options, "state": "attached", "instance": "app-1"}, Settings(), ledger, False,
           connect=connect_to(hv1)).run()
    hv1.pools["default"]["volumes"][data_volume_name("data-1")]["data"] = b"kept"
    rebuild(ledger, hv1, image="new.qcow2")
    assert data_volume_name("data-1") in hv1.domain_xml(uuid)
    assert hv1.pools["default"]["volumes"][data_volume_name("data-1")]["data"] == b"kept"
    [volume] = ledger.volumes("data-1")
    assert volume["instance_uuid"] == uuid
