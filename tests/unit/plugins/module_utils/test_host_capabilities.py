"""libvirt's capabilities XML read into host-state facts, without libvirt."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

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
    cells = host_capabilities.numa_topology(caps)["cells"]
    assert [{key: cell[key] for key in ("id", "memory_mb", "cpus")} for cell in cells] == [
        {"id": 0, "memory_mb": 8192, "cpus": [0, 1]},
        {"id": 1, "memory_mb": 0, "cpus": [2, 3]},
    ]
    # Without socket, core or siblings attributes a CPU is its own only sibling.
    assert cells[1]["cpu_topology"] == [
        {"id": 2, "socket_id": None, "die_id": None, "core_id": None, "siblings": [2]},
        {"id": 3, "socket_id": None, "die_id": None, "core_id": None, "siblings": [3]},
    ]
    assert cells[0]["pages"] == []
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


# A 2-socket host with SMT (siblings 0,2 and 1,3 in libvirt's range syntax), 4 KiB, 2 MiB and 1 GiB
# pages, as a real host's capabilities show them.
SMT_HOST = """
<capabilities><host><topology><cells num="2">
  <cell id="0"><memory unit="KiB">4194304</memory>
    <pages unit="KiB" size="4">786432</pages><pages unit="KiB" size="2048">512</pages>
    <pages unit="KiB" size="1048576">0</pages>
    <cpus num="4">
      <cpu id="0" socket_id="0" die_id="0" core_id="0" siblings="0,2"/>
      <cpu id="1" socket_id="0" die_id="0" core_id="1" siblings="1,3"/>
      <cpu id="2" socket_id="0" die_id="0" core_id="0" siblings="0,2"/>
      <cpu id="3" socket_id="0" die_id="0" core_id="1" siblings="1,3"/>
    </cpus></cell>
  <cell id="1"><memory unit="KiB">4194304</memory>
    <pages unit="KiB" size="4">1048576</pages><pages unit="MiB" size="2">512</pages>
    <pages unit="KiB" size="2048">0</pages>
    <cpus num="2">
      <cpu id="4" socket_id="1" core_id="0" siblings="4-5"/>
      <cpu id="5" socket_id="1" core_id="0" siblings="nonsense"/>
    </cpus></cell>
</cells></topology></host></capabilities>
"""


def test_cells_with_thread_siblings_and_pages():
    caps = ET.fromstring(SMT_HOST)
    assert host_capabilities.page_sizes_kb(caps) == [4, 2048, 1048576]
    free = {0: {4: 500000, 2048: 100, 1048576: 0}, 1: {4: 700000}}
    cell0, cell1 = host_capabilities.numa_topology(caps, free)["cells"]
    assert cell0["cpus"] == [0, 1, 2, 3]
    assert cell0["cpu_topology"][0] == {"id": 0, "socket_id": 0, "die_id": 0, "core_id": 0, "siblings": [0, 2]}
    assert cell0["cpu_topology"][3]["siblings"] == [1, 3]
    assert cell0["pages"] == [{"size_kb": 4, "total": 786432, "free": 500000},
                              {"size_kb": 2048, "total": 512, "free": 100},
                              {"size_kb": 1048576, "total": 0, "free": 0}]
    # Pages not in KiB are not trusted; a size libvirt gave no free count for is unknown, not 0.
    assert cell1["pages"] == [{"size_kb": 4, "total": 1048576, "free": 700000},
                              {"size_kb": 2048, "total": 0, "free": None}]
    # A siblings attribute that does not parse leaves the CPU its own only sibling.
    assert [cpu["siblings"] for cpu in cell1["cpu_topology"]] == [[4, 5], [5]]
    assert cell1["cpu_topology"][0]["die_id"] is None


# ---- a hostile host's capabilities -----------------------------------------------------------------

@pytest.mark.parametrize("old, new, message", [
    ('<cell id="1">', '<cell id="one">', "NUMA cell id 'one' is not a whole number"),
    ('<cell id="1">', '<cell id="²">', "NUMA cell id '²' is not a whole number"),
    ("2f1e0c3b4a5d</uuid>", "2f1e0c3b4a5d; DROP</uuid>", "the host UUID '5a9c3b0e-6a1c-4c8e-9d7f-2f1e0c3b4a5d; DROP' is not"),
], ids=["cell-id-word", "cell-id-superscript", "uuid"])
def test_a_value_berth_relies_on_that_does_not_read_is_refused_naming_it(old, new, message):
    caps = ET.fromstring(CAPABILITIES.replace(old, new))
    with pytest.raises(host_capabilities.CapabilitiesError, match=message):
        host_capabilities.host_uuid(caps)
        host_capabilities.numa_topology(caps)


def test_counts_and_ids_read_ascii_digits_only():
    # "²".isdigit() is true and int("²") fails: such a count is not trusted (0), an id is unknown.
    caps = ET.fromstring(CAPABILITIES.replace('<memory unit="KiB">8388608</memory>', '<memory unit="KiB">²</memory>')
                         .replace('cores="4"', 'cores="٤"').replace('<cpu id="1"/>', '<cpu id="1" core_id="²"/>'))
    assert host_capabilities.numa_topology(caps)["cells"][0]["memory_mb"] == 0
    assert host_capabilities.numa_topology(caps)["cells"][0]["cpu_topology"][1]["core_id"] is None
    assert host_capabilities.cpu_info(caps, INFO)["topology"] == {"sockets": 1, "dies": 1, "threads": 2}
