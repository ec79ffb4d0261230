"""Facts from the real lab fleet, checked against what virsh itself reports for the same hosts.

The expected values are read from virsh's own output (nodeinfo, nodememstats, capabilities,
pool-info, dominfo, domblklist, vol-info, metadata, version, hostname), never through Berth's
helpers.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

import fleet
import pytest
from conftest import failed_messages
from facts_helpers import LAB_POLICY, ansible_env, group_members, plain, run_inventory, strings_not_unsafe

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy

pytestmark = pytest.mark.integration

BERTH_NS = "urn:berth:instance:1"
EVIL_NAME = "{{ lookup('pipe', 'id') }}"
INSTANCE_UUID = "5e1f0000-0000-4000-8000-00000000beef"
# pool-info and the plugin read the pool of a live filesystem at different moments.
POOL_DRIFT_MB = 256


def virsh(lab, host: str, *args: str) -> str:
    return fleet.virsh(lab.hosts[host]["uri"], *args, timeout=60)


def fields(text: str) -> dict[str, str]:
    """'Key:   value' lines of virsh output as a dict."""
    return {key.strip(): value.strip() for key, _separator, value in
            (line.partition(":") for line in text.splitlines()) if value}


def domain_xml(name: str, memory_mb: int, vcpus: int, disk: str | None = None, berth: bool = False) -> str:
    metadata = (f'<metadata><berth:instance xmlns:berth="{BERTH_NS}"><berth:uuid>{INSTANCE_UUID}</berth:uuid>'
                f"<berth:name>{escape(name)}</berth:name><berth:flavor>m1.tiny</berth:flavor>"
                "</berth:instance></metadata>") if berth else ""
    disks = (f"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='{disk}'/>"
             "<target dev='vda' bus='virtio'/></disk>") if disk else ""
    return (f"<domain type='qemu'><name>{escape(name)}</name>{metadata}<memory unit='MiB'>{memory_mb}</memory>"
            f"<vcpu>{vcpus}</vcpu><os><type arch='x86_64'>hvm</type></os><devices>{disks}"
            "</devices></domain>")


@pytest.fixture
def lab_domains(lab, tmp_path):
    """On hv1: a Berth-made domain with a pool volume, and a running orphan; on hv2 a domain
    whose name is a Jinja2 expression. Removed again afterwards."""
    made = []

    def define(host: str, name: str, xml: str, start: bool = False) -> None:
        path = tmp_path / f"{host}-{len(made)}.xml"
        path.write_text(xml)
        virsh(lab, host, "define", str(path))
        made.append((host, name))
        if start:
            virsh(lab, host, "start", name)

    virsh(lab, "hv1", "vol-create-as", "default", "facts-root.qcow2", "1G", "--format", "qcow2")
    disk = virsh(lab, "hv1", "vol-path", "--pool", "default", "facts-root.qcow2").strip()
    try:
        define("hv1", "facts-instance", domain_xml("facts-instance", 128, 2, disk=disk, berth=True))
        define("hv1", "facts-orphan", domain_xml("facts-orphan", 64, 1), start=True)
        define("hv2", EVIL_NAME, domain_xml(EVIL_NAME, 96, 1))
        yield made
    finally:
        for host, name in made:
            subprocess.run(["virsh", "-c", lab.hosts[host]["uri"], "destroy", name], capture_output=True, check=False)
            subprocess.run(["virsh", "-c", lab.hosts[host]["uri"], "undefine", name], capture_output=True, check=False)
        subprocess.run(["virsh", "-c", lab.hosts["hv1"]["uri"], "vol-delete", "--pool", "default",
                        "facts-root.qcow2"], capture_output=True, check=False)


def version_number(text: str) -> int:
    major, minor, micro = (int(part) for part in text.split("."))
    return major * 1_000_000 + minor * 1_000 + micro


def test_facts_match_virsh(lab, lab_domains):
    inventory = run_inventory(lab.inventory)
    hostvars = inventory["_meta"]["hostvars"]
    assert group_members(inventory, "hypervisors") == set(lab.hosts)
    assert group_members(inventory, "down") == set()

    for host in lab.hosts:
        raw = hostvars[host]["berth_host_state"]
        assert strings_not_unsafe(raw) == [], host
        state = plain(raw)
        nodeinfo = fields(virsh(lab, host, "nodeinfo"))
        memstats = fields(virsh(lab, host, "nodememstats"))
        caps = ET.fromstring(virsh(lab, host, "capabilities"))
        pool = fields(virsh(lab, host, "pool-info", "--bytes", "default"))
        version = fields(virsh(lab, host, "version"))

        assert state["nodename"] == virsh(lab, host, "hostname").strip()
        assert state["uuid"] == caps.findtext("host/uuid")
        assert state["vcpus_total"] == int(nodeinfo["CPU(s)"])
        # The node memory statistics over all cells, not getInfo's NUMA node 0 (TESTBED.md).
        assert state["total_usable_ram_mb"] == int(memstats["total"].split()[0]) // 1024
        assert state["hv_memory_total_mb"] == state["total_usable_ram_mb"]
        assert state["hv_memory_source"] == "proc"
        assert state["hv_memory_used_mb"] == state["hv_memory_total_mb"] - (
            state["hv_memory_free_mb"] + state["hv_memory_buffers_mb"] + state["hv_memory_cached_mb"])
        assert {"load_1m", "load_5m", "load_15m", "cpu_idle_ns"} <= set(state["metrics"])

        cpu = state["cpu_info"]
        assert cpu["arch"] == caps.findtext("host/cpu/arch") == nodeinfo["CPU model"]
        assert cpu["model"] == caps.findtext("host/cpu/model")
        assert cpu["vendor"] == caps.findtext("host/cpu/vendor")
        assert cpu["features"] == sorted(f.get("name") for f in caps.findall("host/cpu/feature"))
        topology = caps.find("host/cpu/topology").attrib
        assert cpu["topology"]["sockets"] == int(topology["sockets"]) == int(nodeinfo["CPU socket(s)"])
        assert cpu["topology"]["cores"] == int(topology["cores"]) == int(nodeinfo["Core(s) per socket"])
        assert cpu["topology"]["threads"] == int(topology["threads"]) == int(nodeinfo["Thread(s) per core"])
        cells = caps.findall("host/topology/cells/cell")
        assert len(state["numa_topology"]["cells"]) == len(cells) == int(nodeinfo["NUMA cell(s)"])
        for got, cell in zip(state["numa_topology"]["cells"], cells):
            assert got["id"] == int(cell.get("id"))
            assert got["memory_mb"] == int(cell.findtext("memory")) // 1024
            assert got["cpus"] == sorted(int(c.get("id")) for c in cell.findall("cpus/cpu"))
            # Issue 24: thread siblings and pages as the capabilities say; free pages from a real
            # driver are counted, never unknown.
            assert [cpu["socket_id"] for cpu in got["cpu_topology"]] == [
                int(c.get("socket_id")) for c in sorted(cell.findall("cpus/cpu"), key=lambda c: int(c.get("id")))]
            assert all(cpu["id"] in cpu["siblings"] for cpu in got["cpu_topology"])
            assert [(page["size_kb"], page["total"]) for page in got["pages"]] == sorted(
                (int(p.get("size")), int(p.text)) for p in cell.findall("pages"))
            assert all(isinstance(page["free"], int) and 0 <= page["free"] <= page["total"] for page in got["pages"])
        # The machine's PCI devices (six on these VMs), as the namespaced daemon's node devices list them.
        listed = virsh(lab, host, "nodedev-list", "--cap", "pci").split()
        assert listed and sorted(device["name"] for device in state["pci_devices"]) == sorted(listed)
        assert state["pci_devices_skipped"] == {"beyond_limit": 0, "unreadable": 0}

        assert state["hypervisor_type"] == version["Running hypervisor"].split()[0] == "QEMU"
        assert state["hypervisor_version"] == version_number(version["Running hypervisor"].split()[1])
        assert state["libvirt_version"] == version_number(version["Using library"].split()[1])
        assert sorted(map(tuple, state["supported_instances"])) == sorted(
            (arch.get("name"), dom.get("type"), guest.findtext("os_type"))
            for guest in caps.findall("guest") for arch in guest.findall("arch") for dom in arch.findall("domain"))

        default_pool = next(p for p in state["pools"] if p["name"] == "default")
        assert default_pool["capacity_mb"] == int(pool["Capacity"]) // 2**20
        assert abs(default_pool["allocation_mb"] - int(pool["Allocation"]) // 2**20) <= POOL_DRIFT_MB
        assert abs(default_pool["available_mb"] - int(pool["Available"]) // 2**20) <= POOL_DRIFT_MB
        assert state["total_usable_disk_gb"] == int(pool["Capacity"]) // 2**30
        assert [p["name"] for p in state["pools"]] == sorted(virsh(lab, host, "pool-list", "--all", "--name").split())

        names = [line.strip() for line in virsh(lab, host, "list", "--all", "--name").splitlines() if line.strip()]
        assert sorted(d["name"] for d in state["domains"]) == sorted(names)
        vcpus_used = memory_used_mb = disk_used_mb = 0
        for dom in state["domains"]:
            info = fields(virsh(lab, host, "dominfo", dom["name"]))
            assert dom["uuid"] == info["UUID"]
            assert dom["state"] == {"shut off": "shutoff"}.get(info["State"], info["State"])
            assert dom["vcpus"] == int(info["CPU(s)"])
            assert dom["memory_mb"] == int(info["Max memory"].split()[0]) // 1024
            sources = [line.split()[3] for line in virsh(lab, host, "domblklist", "--details", dom["name"]).splitlines()
                       if line.split()[:2] == ["file", "disk"]]
            assert [disk["path"] for disk in dom["disks"]] == sources
            for disk in dom["disks"]:
                vol = fields(virsh(lab, host, "vol-info", "--bytes", disk["path"]))
                assert disk["capacity_mb"] == int(vol["Capacity"].split()[0]) // 2**20
                assert disk["pool"] == virsh(lab, host, "vol-pool", disk["path"]).strip()
                disk_used_mb += disk["capacity_mb"]
            vcpus_used += dom["vcpus"]
            memory_used_mb += dom["memory_mb"]
        assert state["vcpus_used"] == vcpus_used
        assert state["num_instances"] == len(names)
        assert state["free_ram_mb"] == state["total_usable_ram_mb"] - 512 - memory_used_mb
        assert state["free_disk_mb"] == state["total_usable_disk_gb"] * 1024 - disk_used_mb

    hv1 = {d["name"]: d for d in plain(hostvars["hv1"]["berth_host_state"])["domains"]}
    metadata = ET.fromstring(virsh(lab, "hv1", "metadata", "facts-instance", "--uri", BERTH_NS))
    assert hv1["facts-instance"]["berth"]["instance_uuid"] == metadata.findtext("uuid") == INSTANCE_UUID
    assert hv1["facts-instance"]["state"] == "shutoff" and hv1["facts-orphan"]["state"] == "running"
    assert hv1["facts-orphan"]["berth"] is None
    hv1_state = plain(hostvars["hv1"]["berth_host_state"])
    assert hv1_state["instances"] == [INSTANCE_UUID]
    assert hv1_state["orphans"] == ["facts-orphan"]
    assert plain(hostvars["hv2"]["berth_host_state"])["orphans"] == [EVIL_NAME]


def test_a_stopped_daemon_is_down_and_never_picked(lab):
    lab.stop_daemon("hv3")
    try:
        inventory = run_inventory(lab.inventory)
        hostvars = inventory["_meta"]["hostvars"]
        assert group_members(inventory, "hypervisors") == {"hv1", "hv2", "hv3"}
        assert group_members(inventory, "down") == {"hv3"}
        down = plain(hostvars["hv3"]["berth_host_state"])
        assert down["service_up"] is False
        # libvirt's own words for a socket nobody listens on, with the host named.
        assert down["down_reason"].startswith("hv3: ") and "libvirt-sock" in down["down_reason"], down["down_reason"]
        assert re.search(r"hypervisor hv3 is down: hv3: .*libvirt-sock", inventory["_stderr"])
        for host in ("hv1", "hv2"):
            up = plain(hostvars[host]["berth_host_state"])
            assert up["service_up"] is True and up["vcpus_total"] > 0 and up["total_usable_ram_mb"] > 0

        launch = lab.playbook("launch.yml", "-e", "name=downtest", "-e", "flavor=m1.tiny", "-e", "count=3")
        assert launch["rc"] == 0, failed_messages(launch) or launch["stderr"]
        placed = [row for row in lab.ledger_rows("instances") if row["name"].startswith("downtest")]
        assert len(placed) == 3
        assert {row["host"] for row in placed} == {"hv1", "hv2"}
        for row in placed:
            assert row["name"] in virsh(lab, row["host"], "list", "--all", "--name")
        deleted = lab.playbook("delete.yml", "-e", "name=downtest")
        assert deleted["rc"] == 0, failed_messages(deleted)
    finally:
        lab.start_daemon("hv3")


def test_keepalive_drops_a_daemon_that_stopped_answering(lab):
    """With the daemon frozen after the connection is open, libvirt's keepalive (not Berth's
    call timeout, set far higher here) is what ends the call."""
    pid = fleet.daemon_pid(lab.dir, "hv2")
    with Hypervisor("hv2", lab.hosts["hv2"]["uri"], timeout_s=120, keepalive_interval_s=1, keepalive_count=2,
                    uri_policy=UriPolicy.from_settings({"allow_parameters": ["socket"]})) as hv:
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(HypervisorError) as info:
                hv.facts("default")
        finally:
            os.kill(pid, signal.SIGCONT)
    assert "keepalive" in str(info.value), str(info.value)
    assert fleet.status(lab.dir)[1]["running"]


def test_a_hung_daemon_is_down_after_the_timeout_and_the_rest_is_whole(lab, tmp_path):
    """A daemon that accepts connections but never answers (frozen): the per-call timeout
    reports it down, naming the call; the other hosts come through whole."""
    source = tmp_path / "hung.berth.yml"
    source.write_text("plugin: berth.fleet.hypervisors\ntimeout: 2\n" + LAB_POLICY + "hypervisors:\n" + "".join(
        f"  {name}:\n    uri: \"{record['uri']}\"\n" for name, record in lab.hosts.items()))
    # A daemon's first capabilities call probes the host and may take seconds: not a hang.
    assert group_members(run_inventory(lab.inventory), "down") == set()
    pid = fleet.daemon_pid(lab.dir, "hv2")
    os.kill(pid, signal.SIGSTOP)
    try:
        inventory = run_inventory(source)
    finally:
        os.kill(pid, signal.SIGCONT)
    reasons = {host: plain(hostvars["berth_host_state"])["down_reason"]
               for host, hostvars in inventory["_meta"]["hostvars"].items()}
    assert group_members(inventory, "down") == {"hv2"}, reasons
    reason = plain(inventory["_meta"]["hostvars"]["hv2"]["berth_host_state"])["down_reason"]
    assert re.fullmatch(r"hv2: libvirt did not answer \w+ within 2 s", reason), reason
    for host in ("hv1", "hv3"):
        state = plain(inventory["_meta"]["hostvars"][host]["berth_host_state"])
        assert state["service_up"] and state["vcpus_total"] > 0 and state["pools"], host


def test_uris_from_the_environment(lab, tmp_path):
    """The way AWX injects a credential: the source lists names only, the URI comes from
    $BERTH_URI_TEMPLATE; berth_libvirt_uri is what the roles will connect with."""
    source = tmp_path / "env.berth.yml"
    source.write_text("plugin: berth.fleet.hypervisors\n" + LAB_POLICY + "hypervisors:\n"
                      + "".join(f"  {name}: {{}}\n" for name in lab.hosts))
    template = str(fleet.socket_path(lab.dir, "hv1")).replace("/hv1/", "/{name}/")
    inventory = run_inventory(source, env=ansible_env(BERTH_URI_TEMPLATE=f"qemu+unix:///system?socket={template}"))
    assert group_members(inventory, "down") == set()
    for host in lab.hosts:
        hostvars = plain(inventory["_meta"]["hostvars"][host])
        assert hostvars["berth_libvirt_uri"] == lab.hosts[host]["uri"]
        assert hostvars["berth_host_state"]["nodename"] == f"berth-{host}"
