"""A CPU baseline group on the real lab (issue 36): a guest that asks for its group's baseline CPU
(the guest option cpu_baseline) live-migrates between two hypervisors whose own host-model CPUs
differ.

The lab's daemons run on one machine, so they would all report its CPU. This test gives itself a
fleet of two and makes hv2 report less: libvirt keeps what QEMU said the host's KVM CPU is in
its capabilities cache (<hostCPU type='kvm'>, one property per feature), read again only when
QEMU, the kernel or the microcode change; hv2's copy says one feature of hv1's host-model CPU is
missing. hv2's libvirt then leaves that feature out of its host-model CPU and refuses a CPU that
requires it, as a hypervisor with an older CPU would; the guests themselves run on the same
machine's KVM either way. The daemons are libvirt's own (libvirt 9.0), and the baseline is
computed by virConnectBaselineHypervisorCPU on hv1 during gather.yml.

This machine's nested KVM says it has arch-capabilities but refuses its MSR (0x10a): QEMU aborts
a kvm guest that has it, a host-model guest included (measured: "Failed to set MSR 0x10a",
kvm_buf_set_msrs assertion). Both daemons' caches therefore also say that KVM lacks it and the
bits it carries, as a host whose KVM does not offer it says, so that the baseline guest starts."""

from __future__ import annotations

import glob
import json
import re
import subprocess
import tempfile
from pathlib import Path

import fleet
import pytest
from conftest import drift, failed_messages, lab_fleet, rows, task_result

pytestmark = pytest.mark.integration

GROUP = "rack1"
# IA32_ARCH_CAPABILITIES and the bits libvirt reads from it (QEMU's property names).
NESTED_KVM_REFUSES = ("arch-capabilities", "rdctl-no", "skip-l1dfl-vmentry", "mds-no", "pschange-mc-no")
# Features a newer x86 CPU has and no old QEMU model turns on by itself. Not vme, x2apic or
# tsc-deadline: QEMU's kvm64 enables them although libvirt's kvm64 does not list them, so the
# running guest has them whatever its definition says (measured: its live CPU requires vme).
NEWER_FEATURES = ("gfni", "clwb", "clflushopt", "umip", "xsaveerptr", "clzero", "avx2", "sha-ni")


def host_model(lab, host: str) -> str:
    """The kvm host-model CPU (model, vendor, features) that ``host``'s libvirt offers."""
    caps = lab.virsh(host, "domcapabilities", "--virttype", "kvm")
    found = re.search(r"<mode name='host-model' supported='yes'>(.*?)</mode>", caps, re.S)
    if found is None:
        pytest.skip("this machine's libvirt offers no kvm host-model CPU")
    return found.group(1)


def required(cpu: str) -> list[str]:
    return re.findall(r"<feature policy='require' name='([^']+)'/>", cpu)


def cached_kvm_cpus(lab, host: str) -> list[str]:
    return glob.glob(str(fleet.host_root(lab.dir, host) / "cache" / "qemu" / "capabilities" / "*.xml"))


def removable_feature(lab) -> tuple[str, str]:
    """A feature of hv1's host-model CPU (libvirt's name) and the property of the KVM CPU in
    libvirt's cache that gives it (QEMU's name)."""
    [cache] = cached_kvm_cpus(lab, "hv1")
    kvm = re.search(r"<hostCPU type='kvm'.*?</hostCPU>", Path(cache).read_text(), re.S).group(0)
    for feature in [name for name in NEWER_FEATURES if name in required(host_model(lab, "hv1"))]:
        for name in (feature, feature.replace("_", "-")):
            if f"<property name='{name}' type='boolean' value='true' migratable='yes'/>" in kvm:
                return feature, name
    pytest.skip("no feature of this machine's host-model CPU shows in libvirt's KVM CPU cache")


@pytest.fixture(scope="module")
def cpu_lab():
    """Two hypervisors of the lab; hv2's libvirt says its KVM lacks one feature hv1's has."""
    with lab_fleet("berth-baseline-", hosts=2) as lab:
        feature, prop = removable_feature(lab)
        for host, lacking in (("hv1", NESTED_KVM_REFUSES), ("hv2", (*NESTED_KVM_REFUSES, prop))):
            fleet.stop_daemon(lab.dir, host)
            for cache in cached_kvm_cpus(lab, host):
                text = Path(cache).read_text()
                kvm = re.search(r"<hostCPU type='kvm'.*?</hostCPU>", text, re.S).group(0)
                edited = kvm
                for name in lacking:
                    edited = edited.replace(f"<property name='{name}' type='boolean' value='true' migratable='yes'/>",
                                            f"<property name='{name}' type='boolean' value='false'/>")
                Path(cache).write_text(text.replace(kvm, edited))
            fleet.start_daemon(lab.dir, host)
        yield lab, feature


def test_a_baseline_guest_live_migrates_both_ways_between_hosts_whose_host_model_cpus_differ(cpu_lab):
    lab, feature = cpu_lab
    # The two daemons' own host-model CPUs differ: hv2's lacks the feature and refuses a CPU with it.
    assert feature in required(host_model(lab, "hv1")) and feature not in required(host_model(lab, "hv2"))
    assert "arch-capabilities" not in required(host_model(lab, "hv1"))
    with_feature = Path(tempfile.mkdtemp(dir=lab.dir)) / "cpu.xml"
    with_feature.write_text(f"<cpu mode='custom' match='exact'>{host_model(lab, 'hv1')}</cpu>")
    compared = subprocess.run(["virsh", "-c", lab.hosts["hv2"]["uri"], "hypervisor-cpu-compare", "--virttype", "kvm",
                               str(with_feature)], capture_output=True, text=True, check=False)
    assert "incompatible" in compared.stdout + compared.stderr, compared

    directory = Path(tempfile.mkdtemp(dir=lab.dir))
    url = f"sqlite:///{directory}/ledger.sqlite3"
    # The hosts keep Nova's default cpu_mode (host-model): the guest asks for the baseline itself.
    inventory = lab.inventory_copy(directory, url, guest_os=False,
                                   aggregates={GROUP: {"hosts": sorted(lab.hosts), "metadata": {}}})
    with open(Path(inventory) / "group_vars" / "all.yml", "a", encoding="utf-8") as handle:
        handle.write(f"berth_cpu_baseline_groups: [{GROUP}]\n")

    def playbook(name: str, *extra: str) -> dict:
        return lab.finish(lab.start_playbook(name, *extra, inventory=inventory))

    gathered = playbook("gather.yml")
    assert gathered["rc"] == 0, failed_messages(gathered)
    report = drift(gathered)
    [recorded] = [line for line in report if line.startswith(f"CPU baseline group {GROUP}: recorded ")]
    assert "(computed on hv1 from hv1, hv2; 2 record(s) changed)" in recorded, recorded
    assert not any("cannot run the CPU baseline" in line for line in report), report
    baselines = {json.dumps(json.loads(row["cpu_info"])["guest"]["baseline"], sort_keys=True)
                 for row in rows(url, "hypervisor_facts")}
    [baseline] = [json.loads(text) for text in baselines]
    kvm = baseline["cpus"]["kvm"]
    assert baseline["hosts"] == ["hv1", "hv2"] and feature not in [item["name"] for item in kvm["features"]]

    launched = playbook("launch.yml", "-e", "server_name=base", "-e", "domain_type=kvm", "-e", "cpu_baseline=true")
    assert launched["rc"] == 0, failed_messages(launched)
    [instance] = [row for row in rows(url, "instances") if row["name"] == "base-1"]
    try:
        defined = lab.virsh(instance["host"], "dumpxml", "--inactive", instance["uuid"])
        cpu = re.search(r"<cpu mode='custom' match='exact' check='[a-z]+'>(.*?)</cpu>", defined, re.S).group(1)
        assert f"<model fallback='forbid'>{kvm['model']}</model>" in cpu
        assert sorted(re.findall(r"<feature policy='(\w+)' name='([^']+)'/>", cpu)) == sorted(
            (item["policy"], item["name"]) for item in kvm["features"])

        host = instance["host"]
        for leg in ("there", "back"):  # each destination's libvirt compares the guest's CPU first
            moved = playbook("migrate.yml", "-e", "instance=base-1", "-e", "mode=live")
            assert moved["rc"] == 0, (leg, failed_messages(moved))
            result = task_result(moved, "Migrate the instance")
            other = next(name for name in lab.hosts if name != host)
            assert (result["from_host"], result["to_host"], result["mode"]) == (host, other, "live"), result
            assert "its CPU can run the guest's" in result["why"], result["why"]
            assert lab.virsh(other, "domstate", instance["uuid"]).strip() == "running"
            assert f"<model fallback='forbid'>{kvm['model']}</model>" in lab.virsh(other, "dumpxml", instance["uuid"])
            host = other
    finally:
        deleted = playbook("delete.yml", "-e", "server_name=base")
        assert deleted["rc"] == 0, failed_messages(deleted)
