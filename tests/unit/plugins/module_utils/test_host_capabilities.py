"""libvirt's capabilities XML read into host-state facts, without libvirt."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ansible_collections.berth.fleet.plugins.module_utils import host_capabilities

# getInfo(): [model, memory KiB, cpus, mhz, nodes, sockets, cores, threads]
INFO = ["x86_64", 16777216, 8, 2400, 1, 1, 4, 2]

CAPABILITIES = """
<capabilities>
  <host>
    <uuid>5a9c3b0e-6a1c-4c8e-9d7f-2f1e0c3b4a5d</uuid>
    <cpu>
      <arch>x86_64</arch><model>Skylake-Client</model><vendor>Intel</vendor>
      <topology sockets="1" dies="1" cores="4" threads="2"/>
      <feature name="vmx"/><feature name="aes"/>
    </cpu>
    <topology><cells num="2">
      <cell id="0"><memory unit="KiB">8388608</memory>
        <cpus num="2"><cpu id="0"/><cpu id="1"/></cpus></cell>
      <cell id="1"><memory unit="MiB">8192</memory>
        <cpus num="2"><cpu id="3"/><cpu id="2"/></cpus></cell>
    </cells></topology>
  </host>
  <guest>
    <os_type>hvm</os_type>
    <arch name="x86_64"><domain type="qemu"/><domain type="kvm"/></arch>
  </guest>
  <guest><os_type>hvm</os_type></guest>
</capabilities>
"""


def test_a_full_host():
    caps = ET.fromstring(CAPABILITIES)
    assert host_capabilities.host_uuid(caps) == "5a9c3b0e-6a1c-4c8e-9d7f-2f1e0c3b4a5d"
    assert host_capabilities.cpu_info(caps, INFO) == {
        "arch": "x86_64", "model": "Skylake-Client", "vendor": "Intel",
        "features": ["aes", "vmx"], "topology": {"sockets": 1, "dies": 1, "cores": 4, "threads": 2},
        "mhz": 2400,
    }
    # A cell whose memory is not in KiB is not trusted (libvirt always says KiB).
    assert host_capabilities.numa_topology(caps) == {"cells": [
        {"id": 0, "memory_mb": 8192, "cpus": [0, 1]},
        {"id": 1, "memory_mb": 0, "cpus": [2, 3]},
    ]}
    assert host_capabilities.supported_instances(caps) == [
        ["x86_64", "qemu", "hvm"], ["x86_64", "kvm", "hvm"]]


def test_the_test_driver_host_falls_back_on_get_info():
    caps = ET.fromstring("<capabilities><host/></capabilities>")
    assert host_capabilities.host_uuid(caps) == ""
    assert host_capabilities.cpu_info(caps, INFO) == {
        "arch": "", "model": "x86_64", "vendor": "", "features": [],
        "topology": {"sockets": 1, "cores": 4, "threads": 2}, "mhz": 2400,
    }
    assert host_capabilities.numa_topology(caps) == {"cells": []}
    assert host_capabilities.supported_instances(caps) == []
