"""Adopting a domain Berth did not build, on the real lab fleet: the tracker stops counting it as
an orphan, the ledger holds it as an ACTIVE instance with its claim, the domain carries Berth's
metadata, a second run changes nothing, and migrate.yml and delete.yml treat it like any other
instance."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import fleet
import pytest
from conftest import changed_count, drift, failed_messages, task_result

pytestmark = pytest.mark.integration

BERTH = "{urn:berth:instance:1}"
# The operator's opt-in to carry the source's definition (an adopted domain has no build record).
CARRY = ("-e", "carry_definition=true")


def handmade_domain(lab, host: str, name: str, memory_mib: int = 96, transient: bool = False) -> str:
    """A domain defined and started with plain virsh, as an operator would (``transient``: started
    with virsh create, without a definition); returns its UUID."""
    lab.virsh(host, "vol-create-as", "default", f"{name}.qcow2", "1G", "--format", "qcow2")
    xml = f"""<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64'>hvm</type>
    <kernel>{os.path.join(lab.dir, 'guest', 'vmlinuz')}</kernel>
    <initrd>{os.path.join(lab.dir, 'guest', 'initrd.img')}</initrd>
    <cmdline>console=ttyS0</cmdline>
  </os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/{name}.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
  </devices>
</domain>"""
    subprocess.run(["virsh", "-c", lab.hosts[host]["uri"], "create" if transient else "define", "/dev/stdin"],
                   input=xml, text=True, check=True, capture_output=True)
    if not transient:
        lab.virsh(host, "start", name)
    return lab.virsh(host, "domuuid", name).strip()


def berth_metadata(lab, host: str, domain: str, inactive: bool = False) -> dict | None:
    root = ET.fromstring(lab.virsh(host, "dumpxml", *(["--inactive"] if inactive else []), domain))
    node = root.find(f"metadata/{BERTH}instance")
    if node is None:
        return None
    return {key: node.findtext(f"{BERTH}{key}") for key in ("uuid", "name", "flavor")}


def test_a_handmade_domain_is_adopted_once_and_stops_being_an_orphan(lab, tmp_path):
    domain_uuid = handmade_domain(lab, "hv2", "Legacy_DB")
    try:
        gathered = lab.playbook("gather.yml")
        assert gathered["rc"] == 0, failed_messages(gathered)
        assert any(line.startswith("hv2:") and "orphans: Legacy_DB" in line for line in drift(gathered))
        assert domain_uuid in [row["domain_uuid"] for row in lab.ledger_rows("unmanaged_usage")]
        before = (lab.ledger_rows("instances"), lab.ledger_rows("claims"))

        # Its name is no DNS label: refused, naming the field, until a name is given.
        refused = lab.playbook("adopt.yml", "-e", "host=hv2", "-e", "domain=Legacy_DB")
        assert refused["rc"] != 0
        assert "name must be a DNS label" in " ".join(failed_messages(refused))
        # Sizes that are not the domain's would make the ledger lie: refused too.
        request = {"host": "hv2", "domain": domain_uuid, "name": "legacy", "flavor": "m1.tiny"}
        wrong = lab.playbook("adopt.yml", "-e", json.dumps(request))
        assert wrong["rc"] != 0
        assert "flavor m1.tiny has 1 vCPUs and 512 MB, but domain Legacy_DB has 1 vCPUs and 96 MB" in \
            " ".join(failed_messages(wrong))

        planned = lab.playbook("adopt.yml", "-e", "host=hv2", "-e", "domain=Legacy_DB", "-e", "name=legacy",
                               check=True)
        assert planned["rc"] == 0, failed_messages(planned)
        assert task_result(planned, "Adopt the domain")["msg"].startswith(
            "would adopt domain Legacy_DB on hv2 as instance legacy (1 vCPUs, 96 MB, 1 GB")
        assert (lab.ledger_rows("instances"), lab.ledger_rows("claims")) == before
        assert berth_metadata(lab, "hv2", "Legacy_DB") is None
        # Check mode syncs nothing, so it must also plan for a ledger that never saw the host.
        fresh = f"berth_ledger_url=sqlite:///{tmp_path}/fresh.sqlite3"
        unsynced = lab.playbook("adopt.yml", "-e", "host=hv2", "-e", "domain=Legacy_DB", "-e", "name=legacy",
                                "-e", fresh, check=True)
        assert unsynced["rc"] == 0, failed_messages(unsynced)
        assert task_result(unsynced, "Adopt the domain")["msg"].startswith("would adopt domain Legacy_DB")

        adopted = lab.playbook("adopt.yml", "-e", "host=hv2", "-e", "domain=Legacy_DB", "-e", "name=legacy")
        assert adopted["rc"] == 0, failed_messages(adopted)
        assert changed_count(adopted) == 1
        [instance] = [row for row in lab.ledger_rows("instances") if row["uuid"] == domain_uuid]
        assert (instance["uuid"], instance["name"], instance["host"], instance["state"]) == \
            (domain_uuid, "legacy", "hv2", "ACTIVE")
        assert (instance["vcpus"], instance["memory_mb"], instance["root_gb"]) == (1, 96, 1)
        [claim] = [row for row in lab.ledger_rows("claims") if row["instance_uuid"] == domain_uuid]
        assert (claim["instance_uuid"], claim["vcpus"], claim["memory_mb"], claim["disk_mb"]) == \
            (domain_uuid, 1, 96, 1024)
        assert claim["lease_expires_at"] is None  # nothing is being built: no lease to expire
        assert domain_uuid not in [row["domain_uuid"] for row in lab.ledger_rows("unmanaged_usage")]
        wanted = {"uuid": domain_uuid, "name": "legacy", "flavor": "adopted"}
        assert berth_metadata(lab, "hv2", "Legacy_DB") == wanted
        assert berth_metadata(lab, "hv2", "Legacy_DB", inactive=True) == wanted
        assert "running" in lab.virsh("hv2", "domstate", "Legacy_DB")  # never stopped or moved

        adopted_rows = (lab.ledger_rows("instances"), lab.ledger_rows("claims"))
        again = lab.playbook("adopt.yml", "-e", "host=hv2", "-e", "domain=Legacy_DB", "-e", "name=legacy")
        assert again["rc"] == 0 and changed_count(again) == 0
        assert (lab.ledger_rows("instances"), lab.ledger_rows("claims")) == adopted_rows

        gathered = lab.playbook("gather.yml")
        assert gathered["rc"] == 0, failed_messages(gathered)
        [hv2_line] = [line for line in drift(gathered) if line.startswith("hv2:")]
        assert "orphans" not in hv2_line
        assert domain_uuid not in [row["domain_uuid"] for row in lab.ledger_rows("unmanaged_usage")]

        # Adopting again under another name is an error, not a silent no-op.
        renamed = lab.playbook("adopt.yml", "-e", "host=hv2", "-e", "domain=Legacy_DB", "-e", "name=other")
        assert renamed["rc"] != 0
        assert "the domain was adopted as instance legacy, not other" in " ".join(failed_messages(renamed))

        # A transient domain (virsh create) has no definition to keep: refused.
        transient_uuid = handmade_domain(lab, "hv3", "fleeting", transient=True)
        try:
            fleeting = lab.playbook("adopt.yml", "-e", "host=hv3", "-e", "domain=fleeting")
            assert fleeting["rc"] != 0
            assert "domain fleeting on hv3 is transient" in " ".join(failed_messages(fleeting))
        finally:
            lab.virsh("hv3", "destroy", transient_uuid)
            lab.virsh("hv3", "vol-delete", "--pool", "default", "fleeting.qcow2")

        # Another domain cannot take the adopted name.
        other_uuid = handmade_domain(lab, "hv3", "other")
        try:
            taken = lab.playbook("adopt.yml", "-e", "host=hv3", "-e", "domain=other", "-e", "name=legacy")
            assert taken["rc"] != 0
            assert "name legacy is already instance" in " ".join(failed_messages(taken))
            assert berth_metadata(lab, "hv3", "other") is None
        finally:
            lab.virsh("hv3", "destroy", other_uuid)
            lab.virsh("hv3", "undefine", other_uuid)
            lab.virsh("hv3", "vol-delete", "--pool", "default", "other.qcow2")

        # Berth has no build record of a domain it adopted, so it cannot define it again: a move is
        # refused unless the operator carries the source's definition for it.
        refused = lab.playbook("migrate.yml", "-e", "instance=legacy", "-e", "to_host=hv3")
        assert refused["rc"] != 0
        assert "legacy has no build record (adopted, or launched before Berth kept them)" in \
            " ".join(failed_messages(refused))
        assert (lab.ledger_rows("instances"), lab.ledger_rows("claims")) == adopted_rows

        # A volume of the same name on the destination is someone else's: the move is refused.
        lab.virsh("hv1", "vol-create-as", "default", "Legacy_DB.qcow2", "1M")
        try:
            clash = lab.playbook("migrate.yml", "-e", "instance=legacy", "-e", "to_host=hv1", *CARRY)
            assert clash["rc"] != 0
            assert "hv1 already has a volume Legacy_DB.qcow2 in storage pool default" in \
                " ".join(failed_messages(clash))
            assert (lab.ledger_rows("instances"), lab.ledger_rows("claims")) == adopted_rows
            assert "running" in lab.virsh("hv2", "domstate", "Legacy_DB")
        finally:
            lab.virsh("hv1", "vol-delete", "--pool", "default", "Legacy_DB.qcow2")

        # A volume something else on the source still uses does not move.
        pool = fleet.host_path(lab.dir, "hv2", "/var/lib/libvirt/images")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", "Legacy_DB.qcow2", "-F", "qcow2",
                        "child.qcow2"], cwd=pool, check=True)
        try:
            lab.virsh("hv2", "pool-refresh", "default")
            used = lab.playbook("migrate.yml", "-e", "instance=legacy", "-e", "to_host=hv3", *CARRY)
            assert used["rc"] != 0
            assert "volume Legacy_DB.qcow2 on hv2 is also used by volume child.qcow2" in " ".join(failed_messages(used))
        finally:
            (pool / "child.qcow2").unlink()
            lab.virsh("hv2", "pool-refresh", "default")
        # Nor does a disk outside the pool: the move is refused, in check mode already.
        outside = tmp_path / "outside.img"
        outside.write_bytes(bytes(1024 * 1024))
        lab.virsh("hv2", "attach-disk", "Legacy_DB", str(outside), "vdb", "--config")
        try:
            stuck = lab.playbook("migrate.yml", "-e", "instance=legacy", "-e", "to_host=hv3", *CARRY, check=True)
            assert stuck["rc"] != 0
            assert f"legacy has storage a move cannot carry, only volumes of storage pool default move: disk vdb " \
                   f"({outside})" in " ".join(failed_messages(stuck))
        finally:
            lab.virsh("hv2", "detach-disk", "Legacy_DB", "vdb", "--config")
        assert (lab.ledger_rows("instances"), lab.ledger_rows("claims")) == adopted_rows

        # With the operator's opt-in, an adopted instance moves like any other, its own disk with it.
        moved = lab.playbook("migrate.yml", "-e", "instance=legacy", "-e", "to_host=hv3", *CARRY)
        assert moved["rc"] == 0, failed_messages(moved)
        assert task_result(moved, "Migrate the instance")["mode"] == "live"  # the disk copied by QEMU
        [instance] = [row for row in lab.ledger_rows("instances") if row["uuid"] == domain_uuid]
        assert instance["host"] == "hv3"
        assert [row["hypervisor_uuid"] for row in lab.ledger_rows("claims") if row["instance_uuid"] == domain_uuid] \
            == [instance["hypervisor_uuid"]]
        assert "Legacy_DB" not in lab.virsh("hv2", "list", "--all", "--name").split()
        assert "running" in lab.virsh("hv3", "domstate", "Legacy_DB")
        assert "Legacy_DB.qcow2" not in lab.virsh("hv2", "vol-list", "default")
        assert "Legacy_DB.qcow2" in lab.virsh("hv3", "vol-list", "default")
        assert berth_metadata(lab, "hv3", "Legacy_DB", inactive=True) == wanted

        deleted = lab.playbook("delete.yml", "-e", "name=legacy")
        assert deleted["rc"] == 0, failed_messages(deleted)
        assert "Legacy_DB" not in lab.virsh("hv3", "list", "--all", "--name").split()
        assert (lab.ledger_rows("instances"), lab.ledger_rows("claims")) == before
        # Its disk was not Berth's making: it stays.
        assert "Legacy_DB.qcow2" in lab.virsh("hv3", "vol-list", "default")
    finally:
        for host in ("hv2", "hv3"):
            if domain_uuid in lab.virsh(host, "list", "--all", "--uuid"):
                if "running" in lab.virsh(host, "domstate", domain_uuid):
                    lab.virsh(host, "destroy", domain_uuid)
                lab.virsh(host, "undefine", domain_uuid)
            if "Legacy_DB.qcow2" in lab.virsh(host, "vol-list", "default"):
                lab.virsh(host, "vol-delete", "--pool", "default", "Legacy_DB.qcow2")
        lab.playbook("gather.yml")  # the lab's ledger forgets the orphan again for the next tests
