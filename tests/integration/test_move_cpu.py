"""Before a live migration Berth asks each destination's own libvirt whether it can run the guest's
CPU (issue 23), on the real lab fleet. The lab's hypervisors are daemons on one machine, sharing
one CPU, so the guest that none of them can take is one whose definition asks for a CPU feature
this machine's KVM cannot give: a KVM domain (the comparison is against what KVM gives; a guest
under plain QEMU emulation is not compared, as in Nova) defined with check='none', which libvirt
starts without the feature, as it would start a guest whose definition changed after it booted.
Its live migration (one migrate, then a drain) is refused before anything is claimed, the feature
named, each host named; the guest runs on; a KVM guest with QEMU's default CPU moves live in the
same drain, its CPU compared and accepted."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from conftest import failed_messages, item_failed, rows

pytestmark = pytest.mark.integration

SOURCE = "hv1"
# Features of recent x86 CPUs that libvirt knows (its cpu_map), the first this machine lacks is used.
RARE_FEATURES = ("avx512-fp16", "amx-tile", "avx512-vp2intersect", "serialize", "avx-vnni", "amx-int8")
CARRY = {"carry_definition": True}


def missing_feature(lab) -> str:
    """A CPU feature neither this machine's CPU (/proc/cpuinfo) nor its KVM (libvirt's host-model
    for domain type kvm) has."""
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        flags = set(re.search(r"^flags\s*:(.*)$", handle.read(), re.M).group(1).split())
    kvm_model = lab.virsh(SOURCE, "domcapabilities", "--virttype", "kvm")
    for feature in RARE_FEATURES:
        if feature.replace("-", "_") not in flags and f"name='{feature}'" not in kvm_model:
            return feature
    pytest.skip(f"this machine has every one of {RARE_FEATURES}")


def kvm_domain(lab, name: str, cpu: str) -> str:
    """A KVM domain with one pool disk, defined and started with plain virsh on the source (no OS:
    SeaBIOS runs, which is all a migration needs); returns its UUID."""
    lab.virsh(SOURCE, "vol-create-as", "default", f"{name}.qcow2", "1G", "--format", "qcow2")
    xml = f"""<domain type='kvm'>
  <name>{name}</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64'>hvm</type></os>
  {cpu}
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/{name}.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
  </devices>
</domain>"""
    subprocess.run(["virsh", "-c", lab.hosts[SOURCE]["uri"], "define", "/dev/stdin"], input=xml, text=True,
                   check=True, capture_output=True)
    lab.virsh(SOURCE, "start", name)
    return lab.virsh(SOURCE, "domuuid", name).strip()


@pytest.fixture(scope="module")
def guests(lab, tmp_path_factory):
    """Two adopted KVM guests on hv1, in a ledger of their own: ``demanding`` asks for a feature
    nobody here has, ``plain`` runs QEMU's default CPU."""
    directory = tmp_path_factory.mktemp("cpu")
    url = f"sqlite:///{directory}/ledger.sqlite3"
    inventory = lab.inventory_copy(directory, url)

    def playbook(name: str, extra: dict, check: bool = False) -> dict:
        return lab.finish(lab.start_playbook(name, "-e", json.dumps(extra), *(["--check"] if check else []),
                                             inventory=inventory))

    feature = missing_feature(lab)
    made = {}
    try:
        made["demanding"] = kvm_domain(lab, "demanding", (
            f"<cpu mode='custom' match='exact' check='none'><model fallback='forbid'>kvm64</model>"
            f"<feature policy='require' name='{feature}'/></cpu>"))
        made["plain"] = kvm_domain(lab, "plain", "")
        assert playbook("gather.yml", {})["rc"] == 0
        for name in made:
            adopted = playbook("adopt.yml", {"host": SOURCE, "domain": name})
            assert adopted["rc"] == 0, failed_messages(adopted)
        yield {"url": url, "playbook": playbook, "feature": feature, "uuids": made}
    finally:
        for name in made:
            for host in lab.hosts:
                if name in lab.virsh(host, "list", "--all", "--name").split():
                    if lab.virsh(host, "domstate", name).strip() == "running":
                        lab.virsh(host, "destroy", name)
                    lab.virsh(host, "undefine", name)
                if f"{name}.qcow2" in lab.virsh(host, "vol-list", "default"):
                    lab.virsh(host, "vol-delete", "--pool", "default", f"{name}.qcow2")


def assert_unmoved(lab, guests, before: dict) -> None:
    """The demanding guest is where it was: its one claim on hv1, running there, nowhere else."""
    uuid = guests["uuids"]["demanding"]
    [row] = [row for row in rows(guests["url"], "instances") if row["uuid"] == uuid]
    assert (row["host"], row["state"]) == (before["host"], before["state"]) == (SOURCE, "ACTIVE")
    claims = [claim for claim in rows(guests["url"], "claims") if claim["instance_uuid"] == uuid]
    assert [claim["hypervisor_uuid"] for claim in claims] == [before["hypervisor_uuid"]]
    assert lab.virsh(SOURCE, "domstate", uuid).strip() == "running"
    for host in lab.hosts:
        if host != SOURCE:
            assert uuid not in lab.virsh(host, "list", "--all", "--uuid")
            assert "demanding.qcow2" not in lab.virsh(host, "vol-list", "default")


def test_a_live_migration_no_host_can_run_the_cpu_of_is_refused_before_any_claim(lab, guests):
    uuid = guests["uuids"]["demanding"]
    [before] = [row for row in rows(guests["url"], "instances") if row["uuid"] == uuid]
    for check in (True, False):
        refused = guests["playbook"]("migrate.yml", {"instance": "demanding", "mode": "live", **CARRY}, check=check)
        assert refused["rc"] != 0
        [message] = failed_messages(refused)
        assert message.startswith("cannot live-migrate demanding: no destination can run it live: "), message
        # Each other host, with libvirt's own words naming the feature.
        for host in ("hv2", "hv3"):
            assert re.search(rf"{host}: cannot run the guest's CPU, the CPU its definition asks for: the CPU is "
                             rf"incompatible with host CPU: Host CPU does not provide required features: "
                             rf"[^;]*\b{re.escape(guests['feature'])}\b", message), message
        assert "no other host: no valid host" in message
        assert_unmoved(lab, guests, before)


def test_a_drain_moves_the_guest_whose_cpu_fits_live_and_refuses_the_other(lab, guests):
    uuid = guests["uuids"]["demanding"]
    [before] = [row for row in rows(guests["url"], "instances") if row["uuid"] == uuid]
    drained = guests["playbook"]("drain.yml", {"drain_host": SOURCE, "mode": "live", **CARRY})
    assert drained["rc"] != 0  # one of its moves was refused
    [moves] = [result for play in drained["plays"] for task in play["tasks"]
               if task["task"].startswith("Move each instance off") for result in task["hosts"].values()]
    results = {result["item"]["name"]: result for result in moves["results"]}
    assert item_failed(results["demanding"])
    assert "does not provide required features: " in results["demanding"]["msg"]
    assert guests["feature"] in results["demanding"]["msg"]
    assert_unmoved(lab, guests, before)
    moved = results["plain"]
    assert not item_failed(moved), moved.get("msg")
    assert moved["mode"] == "live" and moved["to_host"] != SOURCE
    assert "its CPU can run the guest's" in moved["why"]
    assert lab.virsh(moved["to_host"], "domstate", guests["uuids"]["plain"]).strip() == "running"
