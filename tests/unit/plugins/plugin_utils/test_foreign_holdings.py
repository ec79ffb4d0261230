"""Domains Berth did not make hold pinned CPUs and PCI devices too: the tracker sync reads them
from the domain XML libvirt gives (here libvirt's own test driver) and records them as the
domain's assignment, which every claim then counts as used (docs/docsite/rst/numa.rst)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.berth.fleet.plugins.module_utils.host_devices import domain_holdings
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import UriPolicy
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.tracker import foreign_assignment
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Sync, SyncRequest, Target

TWO_CELLS = {"cells": [{"id": 0, "cpus": [0, 1]}, {"id": 1, "cpus": [2, 3]}]}

PINNED = """<domain type='test'>
  <name>pinned</name><uuid>11111111-2222-3333-4444-555555555555</uuid>
  <memory unit='MiB'>256</memory><vcpu>3</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='1'/>
    <vcpupin vcpu='1' cpuset='2'/>
    <vcpupin vcpu='2' cpuset='0-3'/>
    <emulatorpin cpuset='3'/>
  </cputune>
  <os><type>hvm</type></os>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x81' slot='0x00' function='0x2'/></source>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x1ff' slot='0x00' function='0x0'/></source>
    </hostdev>
  </devices>
</domain>"""


def test_a_domain_holds_the_cpus_its_vcpus_are_pinned_to_alone_and_its_pci_devices():
    holds = domain_holdings(ET.fromstring(PINNED))
    # vCPU 2 floats over four CPUs: it owns none of them. The bus 0x1ff address is no PCI address.
    assert holds == {"pins": {"0": 1, "1": 2}, "emulator": 3, "pci": ["0000:81:00.2"]}
    assert domain_holdings(ET.fromstring("<domain><name>plain</name></domain>")) == {
        "pins": {}, "emulator": None, "pci": []}


def test_the_holdings_become_an_assignment_with_each_pin_on_its_cpus_cell():
    assignment = foreign_assignment({"pins": {"0": 1, "1": 2}, "emulator": 3, "pci": ["0000:81:00.2"]}, TWO_CELLS)
    assert assignment["numa"]["cells"] == [
        {"id": 0, "host_cell": 0, "vcpus": [0], "memory_mb": 0, "page_size_kb": None, "pinning": {"0": 1}},
        {"id": 1, "host_cell": 1, "vcpus": [1], "memory_mb": 0, "page_size_kb": None, "pinning": {"1": 2}}]
    assert assignment["numa"]["emulator_cpus"] == [3] and assignment["numa"]["emulator_isolated"] is True
    assert [device["address"] for device in assignment["pci"]] == ["0000:81:00.2"]
    assert foreign_assignment({"pins": {}, "emulator": None, "pci": []}, TWO_CELLS) is None
    assert foreign_assignment(None, TWO_CELLS) is None


def test_the_sync_records_a_foreign_domains_pins_and_devices_and_the_scheduler_reads_them(ledger, tmp_path):
    path = tmp_path / "hv1.xml"
    # libvirt itself refuses the bus 0x1ff address: the domain it keeps has a second real device.
    pinned = PINNED.replace("bus='0x1ff'", "bus='0x82'")
    plain = ("<domain type='test'><name>plain</name><uuid>22222222-2222-3333-4444-555555555555</uuid>"
             "<memory unit='MiB'>256</memory><vcpu>1</vcpu><os><type>hvm</type></os></domain>")
    path.write_text(
        "<node><cpu><mhz>2400</mhz><model>Haswell</model><active>4</active><max>4</max><nodes>1</nodes>"
        "<sockets>1</sockets><cores>2</cores><threads>2</threads></cpu>"
        f"<memory>{8 * 1024 * 1024}</memory>"
        + pinned.replace("<domain type='test'>", "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>")
        + plain.replace("<domain type='test'>", "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>")
        + "<pool type='dir'><name>default</name><target><path>/p</path></target></pool></node>")
    policy = UriPolicy(allow_test_files=True)
    target = Target.from_hostvars("hv1", {"berth_libvirt_uri": f"test://{path}", "berth_hypervisor": {
        "storage_pool": "default", "settings": {}, "aggregates": [], "availability_zone": "nova",
        "keepalive_interval": 5, "keepalive_count": 3, "timeout": 5.0}}, policy)
    first = Sync(SyncRequest(uri_policy=policy, targets=(target,)), ledger).run()
    assert first["summary"]["changed"] == 1, first["findings"]
    table, _generations = ledger.host_table(fields={"assignments", "numa_topology"})
    [state] = list(table)
    # Only the pinned domain holds anything; the plain one is unmanaged usage without an assignment.
    [held] = state.assignments
    pinned_cpus = sorted(cpu for cell in held["numa"]["cells"] for cpu in cell["pinning"].values())
    assert pinned_cpus == [1, 2] and held["numa"]["emulator_cpus"] == [3]
    assert [device["address"] for device in held["pci"]] == ["0000:81:00.2", "0000:82:00.0"]
    # This node reports no NUMA cells: the pins are kept on no cell (None), still counted as used.
    assert state.numa_topology["cells"] == []
    assert [cell["host_cell"] for cell in held["numa"]["cells"]] == [None]
    # A second sync of the same domains writes nothing new for them.
    again = Sync(SyncRequest(uri_policy=policy, targets=(target,)), ledger).run()
    assert again["summary"]["changed"] == 0
