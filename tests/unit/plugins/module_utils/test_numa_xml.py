"""An instance's assignment (numa.rst) in its domain XML, rendered through the role's template
as berth.fleet.instance renders it: pinned and floating vCPUs, the emulator threads, guest cells
on host cells, huge pages, PCI devices and mediated devices; and a ledger row that is not one
refused naming its field, never pasted into the XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._numa_xml import assignment_context, mdev_uuid
from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import Boot, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import of_spec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import request_spec
from ansible_collections.berth.fleet.plugins.plugin_utils.operations import build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DomainTemplate
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

TEMPLATE = Path(__file__).resolve().parents[4] / "roles" / "instance" / "templates" / "domain.xml.j2"
UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
POOL = "/var/lib/libvirt/images"
CPU = {"mode": "host-model", "model": None, "features": [], "topology": {"sockets": 1, "cores": 2, "threads": 1}}


def render(assignment, vcpus=2, memory_mb=1024, cpu="host-model"):
    request = Request(flavor=Flavor(name="n1", vcpus=vcpus, memory_mb=memory_mb, root_gb=1),
                      boot=Boot("/srv/vmlinuz", "/srv/initrd.img", "console=ttyS0"))
    made = {"disk": {"path": f"{POOL}/berth-{UUID}-root.qcow2"}, "seed": None, "nvram": None}
    return ET.fromstring(DomainTemplate(str(TEMPLATE)).render(request, "numa-1", UUID, made, "qemu",
                                                              "/var/log/libvirt/qemu",
                                                              cpu=CPU if cpu == "host-model" else cpu,
                                                              assignment=assignment))


def pins(domain):
    return {int(pin.get("vcpu")): pin.get("cpuset") for pin in domain.findall("cputune/vcpupin")}


def attributes(domain, path):
    return [element.attrib for element in domain.findall(path)]


DEDICATED_ONE_CELL = {"numa": {"cpu_policy": "dedicated", "cells": [
    {"id": 0, "host_cell": 1, "vcpus": [0, 1], "memory_mb": 1024, "page_size_kb": 2048, "pinning": {"0": 4, "1": 5}}]}}


def test_dedicated_vcpus_in_one_cell_with_2_mib_pages():
    domain = render(DEDICATED_ONE_CELL)
    assert pins(domain) == {0: "4", 1: "5"}
    # Without an emulator policy, Nova's: the emulator threads float over the guest's CPUs.
    assert domain.find("cputune/emulatorpin").get("cpuset") == "4-5"
    assert domain.find("numatune/memory").attrib == {"mode": "strict", "nodeset": "1"}
    assert attributes(domain, "numatune/memnode") == [{"cellid": "0", "mode": "strict", "nodeset": "1"}]
    assert attributes(domain, "memoryBacking/hugepages/page") == [{"size": "2048", "unit": "KiB", "nodeset": "0"}]
    # The guest cell sits in the host's <cpu> beside its model and topology; huge pages make
    # its memory shared, as Nova's driver marks it.
    cpu = domain.find("cpu")
    assert cpu.get("mode") == "host-model" and cpu.find("topology") is not None
    assert attributes(domain, "cpu/numa/cell") == [
        {"id": "0", "cpus": "0-1", "memory": "1024", "unit": "MiB", "memAccess": "shared"}]


def test_a_two_cell_guest_sits_on_two_host_cells():
    assignment = {"numa": {"cpu_policy": "dedicated", "cells": [
        {"id": 0, "host_cell": 0, "vcpus": [0, 1], "memory_mb": 1024, "page_size_kb": None, "pinning": {"0": 2, "1": 3}},
        {"id": 1, "host_cell": 1, "vcpus": [2, 3], "memory_mb": 1024, "page_size_kb": None,
         "pinning": {"2": 10, "3": 11}}]}}
    domain = render(assignment, vcpus=4, memory_mb=2048)
    assert pins(domain) == {0: "2", 1: "3", 2: "10", 3: "11"}
    assert domain.find("numatune/memory").get("nodeset") == "0-1"
    assert attributes(domain, "numatune/memnode") == [{"cellid": "0", "mode": "strict", "nodeset": "0"},
                                                      {"cellid": "1", "mode": "strict", "nodeset": "1"}]
    assert attributes(domain, "cpu/numa/cell") == [{"id": "0", "cpus": "0-1", "memory": "1024", "unit": "MiB"},
                                                   {"id": "1", "cpus": "2-3", "memory": "1024", "unit": "MiB"}]
    # Small pages: no memory backing, and private memory.
    assert domain.find("memoryBacking") is None


def test_shared_vcpus_float_over_their_cell_s_cpuset():
    assignment = {"numa": {"cpu_policy": "shared", "cells": [
        {"id": 0, "host_cell": 0, "vcpus": [0, 1], "memory_mb": 512, "cpuset": [0, 1, 2, 3, 6]}]}}
    domain = render(assignment, memory_mb=512)
    assert pins(domain) == {0: "0-3,6", 1: "0-3,6"}
    assert domain.find("cputune/emulatorpin").get("cpuset") == "0-3,6"


def test_mixed_cell_pins_its_dedicated_vcpus_and_floats_the_rest():
    assignment = {"numa": {"cpu_policy": "mixed", "cells": [
        {"id": 0, "host_cell": 0, "vcpus": [0, 1], "memory_mb": 1024, "pinning": {"1": 7}, "cpuset": [0, 1]}]}}
    assert pins(render(assignment)) == {0: "0-1", 1: "7"}


def test_isolated_emulator_threads_get_their_own_cpu():
    assignment = {"numa": {"cpu_policy": "dedicated", "emulator_cpus": [6], "emulator_isolated": True,
                           "cells": DEDICATED_ONE_CELL["numa"]["cells"]}}
    domain = render(assignment)
    assert domain.find("cputune/emulatorpin").get("cpuset") == "6"
    assert pins(domain) == {0: "4", 1: "5"}


def test_a_domain_type_without_cpu_models_still_gets_its_cells():
    domain = render(DEDICATED_ONE_CELL, cpu=None)
    cpu = domain.find("cpu")
    assert cpu.attrib == {} and cpu.find("topology") is None
    assert [cell.get("cpus") for cell in cpu.findall("numa/cell")] == ["0-1"]


def test_a_pci_vf_and_an_mdev_are_host_devices():
    assignment = {"pci": [{"address": "0000:81:00.2", "alias": "nic", "dev_type": "type-VF", "numa_node": 1}],
                  "mdevs": [{"parent": "0000:06:00.0", "type": "nvidia-35"}]}
    domain = render(assignment)
    pci = domain.find("devices/hostdev[@type='pci']")
    assert pci.attrib == {"mode": "subsystem", "type": "pci", "managed": "yes"}
    assert pci.find("source/address").attrib == {"domain": "0x0000", "bus": "0x81", "slot": "0x00", "function": "0x2"}
    mdev = domain.find("devices/hostdev[@type='mdev']")
    assert mdev.attrib == {"mode": "subsystem", "type": "mdev", "model": "vfio-pci"}
    assert mdev.find("source/address").attrib == {"uuid": mdev_uuid(UUID, 0)}
    # Devices alone: no CPU tuning, no NUMA.
    assert domain.find("cputune") is None and domain.find("numatune") is None and domain.find("cpu/numa") is None


def test_without_an_assignment_nothing_changes():
    domain = render(None)
    for path in ("cputune", "numatune", "memoryBacking", "cpu/numa", "devices/hostdev"):
        assert domain.find(path) is None, path


def test_the_mdev_uuid_is_stable_per_instance_and_index():
    assert mdev_uuid(UUID, 0) == mdev_uuid(UUID, 0) != mdev_uuid(UUID, 1)


def cell(**changes):
    return {"numa": {"cells": [{**DEDICATED_ONE_CELL["numa"]["cells"][0], **changes}]}}


@pytest.mark.parametrize("assignment, field", [
    ("numa", "assignment"),
    ({"pci": [{"address": "0000:81:00.2'/><disk x='"}]}, "assignment.pci[0].address"),
    ({"pci": [{"address": "81:00.2"}]}, "assignment.pci[0].address"),
    ({"pci": [{"address": "0000:81:20.0"}]}, "assignment.pci[0].address"),  # slot beyond 0x1f
    ({"pci": [{"address": "0000:81:00.8"}]}, "assignment.pci[0].address"),
    ({"pci": [{"address": "0000:81:00.2"}, {"address": "0000:81:00.2"}]}, "assignment.pci"),
    ({"pci": "0000:81:00.2"}, "assignment.pci"),
    ({"numa": {"cells": []}}, "assignment.numa.cells"),
    (cell(pinning={"0": "4'/>", "1": 5}), "assignment.numa.cells[0].pinning.0"),
    (cell(pinning={"0": True, "1": 5}), "assignment.numa.cells[0].pinning.0"),
    (cell(pinning={"0": 4.0, "1": 5}), "assignment.numa.cells[0].pinning.0"),
    (cell(pinning={"0": 4, "1": 99999}), "assignment.numa.cells[0].pinning.1"),
    (cell(pinning={"0": 4, "7": 5}), "assignment.numa.cells[0].pinning"),
    (cell(pinning={"0": 4}), "assignment.numa.cells[0].cpuset"),
    (cell(page_size_kb=3000), "assignment.numa.cells[0].page_size_kb"),
    (cell(page_size_kb="2048"), "assignment.numa.cells[0].page_size_kb"),
    (cell(host_cell=-1), "assignment.numa.cells[0].host_cell"),
    (cell(id=1), "assignment.numa.cells[0].id"),
    (cell(vcpus=[0], pinning={"0": 4}), "assignment.numa.cells"),  # vCPU 1 of the flavor in no cell
    (cell(vcpus=[0, 1, 2]), "assignment.numa.cells[0].vcpus[2]"),
    (cell(memory_mb=512), "assignment.numa.cells"),
    ({"numa": {"emulator_cpus": ["6"], "cells": DEDICATED_ONE_CELL["numa"]["cells"]}},
     "assignment.numa.emulator_cpus[0]"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_an_assignment_that_is_not_one_is_refused_naming_its_field(assignment, field):
    with pytest.raises(InputError) as error:
        render(assignment)
    assert error.value.field == field


def test_the_context_holds_range_text_and_no_raw_values():
    context = assignment_context(DEDICATED_ONE_CELL, 2, 1024)
    assert context["numa"]["vcpupins"] == [{"vcpu": 0, "cpuset": "4"}, {"vcpu": 1, "cpuset": "5"}]
    assert context["pci"] == [] and context["mdevs"] == []
    with pytest.raises(InputError) as error:
        assignment_context({"mdevs": [{"parent": "0000:06:00.0", "type": "nvidia-35"}]}, 2, 1024)
    assert error.value.field == "assignment.mdevs"


class AlternateLedger:
    """What Build._active asks of the ledger on a retry: the first host's claim holds
    ``first``, the alternate's claim (fitted with the request it is given) has its own."""

    def __init__(self, first, alternate_assignment):
        self.first = first
        self.alternate_assignment = alternate_assignment
        self.exact = None

    def claims(self, uuid):
        return [{"host": "hv1", "assignment": self.first}]

    def build_failed(self, uuid):
        pass

    def claim_alternate(self, uuid, host, hypervisor_uuid, owner, lease_s, exact=None):
        self.exact = exact
        return {"uuid": uuid, "host": host, "assignment": self.alternate_assignment}

    def mark_active(self, uuid, record):
        return {"uuid": uuid}


def test_a_retry_on_an_alternate_renders_that_claim_s_assignment(monkeypatch):
    other = {"numa": {"cells": [{**DEDICATED_ONE_CELL["numa"]["cells"][0], "pinning": {"0": 8, "1": 9}}]}}
    rendered = []

    def fake_build(self, session, name, uuid, request, assignment, chosen_type, cpu, shared_cpus, step, volumes=()):
        rendered.append((session.host, assignment, shared_cpus))
        if session.host == "hv1":
            raise HypervisorError("hv1", "QEMU would not start")
        return {"changed": True}

    monkeypatch.setattr(build.Build, "_on_host", fake_build)
    placement = {"uuid": UUID, "name": "numa-1", "host": "hv1", "uri": "test:///default", "cpu_shared_set": [0],
                 "targets": [{"host": "hv2", "uri": "test:///default", "hypervisor_uuid": "hv2-uuid",
                              "domain_types": [], "cpu_shared_set": [0, 1]}],
                 # What the placement says is never what the domain gets: the ledger's claim is.
                 "assignment": {"numa": {"cells": []}}}
    ledger = AlternateLedger(DEDICATED_ONE_CELL, other)
    settings = Settings(max_attempts=2, lease_seconds=60)
    operation = build.Build(settings, ledger, str(TEMPLATE), check_mode=False, diff=False, timeout_s=5)
    flavor = Flavor(name="pinned", vcpus=2, memory_mb=1024, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"})
    request = Request(flavor=flavor, domain_type="qemu")
    # What the schedule hands the build (Schedule.exact): the flavor's request of cells and CPUs.
    exact = of_spec(request_spec(request, settings))
    result = operation._active(request, placement, exact)
    assert result["host"] == "hv2"
    # Each host's own shared CPUs too.
    assert rendered == [("hv1", DEDICATED_ONE_CELL, [0]), ("hv2", other, [0, 1])]
    # The alternate's claim was asked to fit the flavor's request there.
    assert ledger.exact is exact
    assert ledger.exact.numa.cpu_policy == "dedicated" and ledger.exact.pci is None
