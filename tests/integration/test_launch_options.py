"""Launch options on the real lab fleet: images and overlays, networks, NoCloud seeds, metadata,
autostart, check mode's plan and diff, and bad input refused before anything changes."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import fleet
import pytest
from conftest import changed_count, failed_messages, fleet_snapshot, task_result

pytestmark = pytest.mark.integration

BERTH = "{urn:berth:instance:1}"


@pytest.fixture(scope="module")
def base_image(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "tiny.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "64M"], check=True)
    return str(path)


def test_image_overlay_seed_metadata_autostart_then_unchanged_then_deleted(lab, base_image):
    hostile = 'a"b\'c<d>&e]]>f'
    request = {
        "name": "img", "count": 2, "flavor": "m1.tiny",
        "image": {"name": "tiny.qcow2", "source": base_image},
        "networks": [{"type": "user"}],
        "user_data": "#cloud-config\nhostname: img\n",
        "metadata": {"team": hostile},
        "autostart": True,
    }
    extra = ("-e", json.dumps(request))

    first = lab.playbook("launch.yml", *extra)
    assert first["rc"] == 0, failed_messages(first) or first["stderr"]
    rows = {row["name"]: row for row in lab.ledger_rows("instances") if row["name"].startswith("img-")}
    assert sorted(rows) == ["img-1", "img-2"]
    assert {row["state"] for row in rows.values()} == {"ACTIVE"}

    for row in rows.values():
        host, uuid = row["host"], row["uuid"]
        volumes = lab.virsh(host, "vol-list", "default")
        # The image was uploaded to the chosen host through libvirt, once.
        assert "tiny.qcow2" in volumes
        overlay = ET.fromstring(lab.virsh(host, "vol-dumpxml", "--pool", "default", f"berth-{uuid}-root.qcow2"))
        assert overlay.findtext("backingStore/path") == "/var/lib/libvirt/images/tiny.qcow2"
        assert overlay.find("target/format").get("type") == "qcow2"
        # 1 GiB from the flavor, larger than the 64 MiB image.
        assert overlay.findtext("capacity") == str(1024 ** 3)
        assert f"berth-{uuid}-seed.iso" in volumes
        domain = ET.fromstring(lab.virsh(host, "dumpxml", row["name"]))
        meta = domain.find(f"metadata/{BERTH}instance")
        assert meta.findtext(f"{BERTH}uuid") == uuid
        assert meta.find(f"{BERTH}meta").get("key") == "team"
        assert meta.findtext(f"{BERTH}meta") == hostile  # escaped going in, the same text coming out
        assert [i.get("type") for i in domain.findall("devices/interface")] == ["user"]
        assert domain.find("devices/disk[@device='cdrom']/source").get("file").endswith("-seed.iso")
        assert "Autostart:      enable" in lab.virsh(host, "dominfo", row["name"])
        assert lab.virsh(host, "domstate", row["name"]).strip() == "running"

    before = fleet_snapshot(lab)
    second = lab.playbook("launch.yml", *extra)
    assert second["rc"] == 0, failed_messages(second)
    assert changed_count(second) == 0
    assert fleet_snapshot(lab) == before

    deleted = lab.playbook("delete.yml", "-e", "name=img")
    assert deleted["rc"] == 0, failed_messages(deleted)
    for row in rows.values():
        volumes = lab.virsh(row["host"], "vol-list", "default")
        assert row["uuid"] not in volumes
        assert "tiny.qcow2" in volumes  # the image stays for the next instance
    assert not [r for r in lab.ledger_rows("instances") if r["name"].startswith("img-")]


def test_check_mode_plans_exactly_what_the_real_run_does_and_changes_nothing(lab):
    extra = ("-e", "name=pred", "-e", "count=3", "-e", "flavor=m1.tiny")
    before = fleet_snapshot(lab)

    dry = lab.playbook("launch.yml", *extra, "--diff", check=True)
    assert dry["rc"] == 0, failed_messages(dry)
    assert fleet_snapshot(lab) == before
    planned = {p["name"]: p["host"] for p in task_result(dry, "Launch the instances")["placements"]}
    assert sorted(planned) == ["pred-1", "pred-2", "pred-3"]
    launched = task_result(dry, "Launch the instances")
    # --diff shows each domain's XML as it would be defined, in the task's own diff.
    assert len(launched["diff"]) == len(launched["results"])
    for item, diff in zip(launched["results"], launched["diff"]):
        after = ET.fromstring(diff["after"])
        assert after.findtext("name") == item["item"]["name"]
        assert after.get("type") == "qemu"

    real = lab.playbook("launch.yml", *extra)
    assert real["rc"] == 0, failed_messages(real)
    done = {r["name"]: r["host"] for r in lab.ledger_rows("instances") if r["name"].startswith("pred-")}
    assert done == planned

    again = lab.playbook("launch.yml", *extra, check=True)
    assert again["rc"] == 0 and changed_count(again) == 0

    assert lab.playbook("delete.yml", "-e", "name=pred")["rc"] == 0


BAD_INPUT = [
    pytest.param({"name": "Web_1"}, "name", id="name-not-dns-label"),
    pytest.param({"name": 'web"><x'}, "name", id="name-breaks-xml"),
    pytest.param({"name": "web]]>"}, "name", id="name-cdata-end"),
    pytest.param({"name": "x" * 70}, "name", id="name-too-long"),
    pytest.param({"image": "../../etc/passwd"}, "image.name", id="image-dotdot"),
    pytest.param({"image": "/etc/passwd"}, "image.name", id="image-absolute"),
    pytest.param({"image": {"name": "a/b.qcow2"}}, "image.name", id="image-subdir"),
    pytest.param({"image": {"name": "ok.qcow2", "source": "relative.qcow2"}}, "image.source", id="image-source-relative"),
    # No hypervisor's last sync listed it: the scheduler passes over every host, saying why.
    pytest.param({"image": "no-such-image.qcow2"}, "3 without image no-such-image.qcow2 in the storage pool",
                 id="image-unknown"),
    pytest.param({"flavor": {"vcpus": 0, "memory_mb": 512, "root_gb": 1}}, "flavor.vcpus", id="flavor-zero"),
    pytest.param({"flavor": {"vcpus": 1, "memory_mb": -512, "root_gb": 1}}, "flavor.memory_mb", id="flavor-negative"),
    pytest.param({"flavor": {"vcpus": 1.5, "memory_mb": 512, "root_gb": 1}}, "flavor.vcpus", id="flavor-fraction"),
    pytest.param({"flavor": {"vcpus": 1, "memory_mb": "lots", "root_gb": 1}}, "flavor.memory_mb", id="flavor-string"),
    pytest.param({"flavor": "m1.huge"}, "unknown flavor 'm1.huge'", id="flavor-unknown"),
    pytest.param({"networks": [{"type": "network", "name": "nosuchnet"}]}, "network nosuchnet", id="network-unknown"),
    pytest.param({"networks": [{"type": "wifi"}]}, "networks[0].type", id="network-type"),
    pytest.param({"networks": [{"type": "bridge", "name": "br0'/><x"}]}, "networks[0].name", id="bridge-breaks-xml"),
    pytest.param({"metadata": {"a b": "x"}}, "metadata keys", id="metadata-key"),
    pytest.param({"metadata": {"k": "bell\x07"}}, "metadata.k", id="metadata-control-char"),
    pytest.param({"count": 0}, "count", id="count-zero"),
    pytest.param({"count": 100000}, "count", id="count-absurd"),
]


@pytest.mark.parametrize("override, expected", BAD_INPUT)
def test_bad_input_is_refused_before_anything_changes(lab, override, expected):
    request = {"name": "bad", "count": 1, "flavor": "m1.tiny", **override}
    before = fleet_snapshot(lab)

    result = lab.playbook("launch.yml", "-e", json.dumps(request))

    assert result["rc"] != 0
    message = " ".join(failed_messages(result))
    assert expected in message, message
    assert fleet_snapshot(lab) == before


def test_an_image_that_is_a_link_in_the_pool_is_refused_before_anything_changes(lab, base_image):
    """libvirt lists a symbolic link in a directory pool as an ordinary volume; Berth looks at the
    hypervisor's own filesystem and refuses it, whichever file it leads to."""
    link = fleet.host_path(lab.dir, "hv2", "/var/lib/libvirt/images/linked.qcow2")
    os.symlink(base_image, link)  # base_image lies outside every pool
    try:
        lab.virsh("hv2", "pool-refresh", "default")
        assert "linked.qcow2" in lab.virsh("hv2", "vol-list", "default")  # libvirt takes it as a volume
        # The tracker sync records the pool's images, and why it refuses this one.
        lab.gather()
        before = fleet_snapshot(lab)

        result = lab.playbook("launch.yml", "-e", json.dumps({"name": "linked", "image": "linked.qcow2"}))

        assert result["rc"] != 0
        message = " ".join(failed_messages(result))
        assert "image linked.qcow2 in storage pool default on hv2 is a symbolic link" in message, message
        assert fleet_snapshot(lab) == before
    finally:
        os.unlink(link)
        lab.virsh("hv2", "pool-refresh", "default")
        lab.gather()


def test_backing_files_must_stay_in_the_pool(lab, base_image, tmp_path):
    """A qcow2 image names its backing file in its header; libvirt reports it, and Berth follows
    the chain: inside the pool it launches, anywhere else it is refused before anything changes."""
    pool = fleet.host_path(lab.dir, "hv2", "/var/lib/libvirt/images")
    made = ["chain-base.qcow2", "chain-top.qcow2", "escape.qcow2"]
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(pool / made[0]), "64M"], check=True)
    # Relative, as qemu-img writes it when run in the pool; libvirt resolves it in the pool.
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", made[0], "-F", "qcow2", made[1]],
                   cwd=pool, check=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-u", "-b", base_image, "-F", "qcow2",
                    str(pool / made[2]), "64M"], check=True)
    try:
        lab.virsh("hv2", "pool-refresh", "default")
        lab.gather()
        before = fleet_snapshot(lab)
        refused = lab.playbook("launch.yml", "-e", json.dumps({"name": "escape", "image": "escape.qcow2"}))
        assert refused["rc"] != 0
        message = " ".join(failed_messages(refused))
        assert f"image escape.qcow2 in storage pool default on hv2 is backed by {base_image}, outside the pool" \
            in message, message
        assert fleet_snapshot(lab) == before

        # A standalone upload only: a qcow2 whose header names a backing file is refused on the controller.
        stacked = tmp_path / "stacked.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-u", "-b", "/etc/shadow", "-F", "raw",
                        str(stacked), "64M"], check=True)
        upload = {"name": "upload", "image": {"name": "stacked.qcow2", "source": str(stacked)}}
        refused = lab.playbook("launch.yml", "-e", json.dumps(upload))
        assert refused["rc"] != 0
        assert "image.source" in " ".join(failed_messages(refused))
        assert "names a backing file in its qcow2 header" in " ".join(failed_messages(refused))
        assert fleet_snapshot(lab) == before

        launched = lab.playbook("launch.yml", "-e", json.dumps({"name": "chain", "image": "chain-top.qcow2",
                                                                "berth_force_hosts": ["hv2"]}))
        assert launched["rc"] == 0, failed_messages(launched)
        [row] = [r for r in lab.ledger_rows("instances") if r["name"] == "chain-1"]
        overlay = ET.fromstring(lab.virsh("hv2", "vol-dumpxml", "--pool", "default", f"berth-{row['uuid']}-root.qcow2"))
        assert overlay.findtext("backingStore/path") == "/var/lib/libvirt/images/chain-top.qcow2"
        assert lab.playbook("delete.yml", "-e", "name=chain")["rc"] == 0
    finally:
        for name in made:
            (pool / name).unlink()
        lab.virsh("hv2", "pool-refresh", "default")
        lab.gather()


def test_a_hint_whose_filter_is_not_enabled_is_refused_before_anything_is_claimed(lab):
    """different_host with the default filters (no DifferentHostFilter): Nova would place the
    instance anywhere, beside the one to avoid; Berth refuses the launch, naming the hint and the
    filter, with nothing decided or claimed, in check mode and in the real run alike."""
    launched = lab.playbook("launch.yml", "-e", json.dumps({"name": "near", "flavor": "m1.tiny"}))
    assert launched["rc"] == 0, failed_messages(launched)
    [near] = [row for row in lab.ledger_rows("instances") if row["name"] == "near-1"]
    request = {"name": "avoid", "flavor": "m1.tiny", "scheduler_hints": {"different_host": [near["uuid"]]}}
    before = fleet_snapshot(lab)
    decisions = lab.ledger_rows("decisions")

    for check in (True, False):
        refused = lab.playbook("launch.yml", "-e", json.dumps(request), check=check)
        assert refused["rc"] != 0
        assert failed_messages(refused) == [
            "scheduler_hints.different_host needs DifferentHostFilter, which enabled_filters lacks: "
            "add it (berth_enabled_filters) or drop the hint"]
        assert fleet_snapshot(lab) == before
        assert lab.ledger_rows("decisions") == decisions

    assert lab.playbook("delete.yml", "-e", "name=near")["rc"] == 0


def test_ignore_and_force_hosts_reach_the_scheduler(lab):
    ignored = lab.playbook("launch.yml", "-e", json.dumps(
        {"name": "ign", "count": 2, "ignore_hosts": ["hv1", "hv2"]}))
    assert ignored["rc"] == 0, failed_messages(ignored)
    forced = lab.playbook("launch.yml", "-e", json.dumps({"name": "frc", "count": 2, "berth_force_hosts": ["hv2"]}))
    assert forced["rc"] == 0, failed_messages(forced)

    hosts = {r["name"]: r["host"] for r in lab.ledger_rows("instances")}
    assert [hosts["ign-1"], hosts["ign-2"]] == ["hv3", "hv3"]
    assert [hosts["frc-1"], hosts["frc-2"]] == ["hv2", "hv2"]
    for name in ("ign", "frc"):
        assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0
