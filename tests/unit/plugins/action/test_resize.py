"""The resize action's decisions without a hypervisor: where (its own host preferred, decided on a
real SQLite ledger), what it refuses, and the domain definition with the new size."""

from __future__ import annotations

import importlib
import xml.etree.ElementTree as ET

import pytest
import yaml

from ansible_collections.berth.fleet.plugins.plugin_utils.operations.move import destination
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.resize import (
    refuse_shrinking,
    resized_domain_xml,
    root_volume,
)
from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import METADATA_NAMESPACE
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

TINY = Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1)
SMALL = Flavor(name="m1.small", vcpus=1, memory_mb=2048, root_gb=20)
MEDIUM = Flavor(name="m1.medium", vcpus=2, memory_mb=4096, root_gb=40)

# A domain as libvirt gives its persistent definition back (units and attributes it adds).
DOMAIN_XML = f"""<domain type='qemu'>
  <name>web-1</name>
  <uuid>6f1a0a52-6c0e-4c4e-9a51-2f5a3b1c9d10</uuid>
  <metadata>
    <berth:instance xmlns:berth='{METADATA_NAMESPACE}'>
      <berth:uuid>6f1a0a52-6c0e-4c4e-9a51-2f5a3b1c9d10</berth:uuid>
      <berth:name>web-1</berth:name>
      <berth:flavor>m1.tiny</berth:flavor>
    </berth:instance>
  </metadata>
  <memory unit='KiB'>524288</memory>
  <currentMemory unit='KiB'>262144</currentMemory>
  <vcpu placement='static' current='1'>2</vcpu>
  <os><type arch='x86_64'>hvm</type></os>
  <cpu mode='custom'><topology sockets='1' dies='1' cores='2' threads='1'/></cpu>
  <devices>
    <disk type='file' device='disk'>
      <source file='/var/lib/libvirt/images/berth-6f1a-root.qcow2'/><target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='cdrom'>
      <source file='/var/lib/libvirt/images/berth-6f1a-seed.iso'/><target dev='sda' bus='sata'/>
    </disk>
  </devices>
</domain>"""


def test_the_definition_gets_the_flavors_vcpus_memory_topology_and_name():
    root = ET.fromstring(resized_domain_xml(DOMAIN_XML, MEDIUM))
    assert [(root.find(tag).get("unit"), root.findtext(tag)) for tag in ("memory", "currentMemory")] == [
        ("KiB", str(4096 * 1024))] * 2
    vcpu = root.find("vcpu")
    assert (vcpu.text, vcpu.get("current"), vcpu.get("placement")) == ("2", None, "static")
    assert root.find("cpu/topology").attrib == {"sockets": "2", "dies": "1", "cores": "1", "threads": "1"}
    assert root.findtext(f"metadata/{{{METADATA_NAMESPACE}}}instance/{{{METADATA_NAMESPACE}}}flavor") == "m1.medium"
    # Everything else stays: the disks, the name, the UUID.
    original = ET.fromstring(DOMAIN_XML)
    assert [d.find("source").get("file") for d in root.findall("devices/disk")] == [
        d.find("source").get("file") for d in original.findall("devices/disk")]
    assert (root.findtext("name"), root.findtext("uuid")) == (original.findtext("name"), original.findtext("uuid"))


@pytest.mark.parametrize(("change", "why"), [
    ("<cpu><numa><cell id='0' cpus='0' memory='512' unit='MiB'/></numa></cpu>", "NUMA cells"),
    ("<vcpus><vcpu id='0' enabled='yes'/></vcpus>", "sets vCPUs one by one"),
    ("<maxMemory slots='2' unit='MiB'>1024</maxMemory>",
     r"4096 MB is more than domain web-1's memory hotplug maximum \(1024 MB\)"),
], ids=["numa", "vcpus", "max-memory"])
def test_what_cannot_be_resized_without_guessing_is_refused_naming_the_flavor(change, why):
    with pytest.raises(InputError, match=why) as caught:
        resized_domain_xml(DOMAIN_XML.replace("<os>", change + "<os>"), MEDIUM)
    assert caught.value.field == "flavor"


def test_a_disk_is_never_shrunk_as_nova_refuses_it():
    refuse_shrinking("web-1", TINY, SMALL)
    with pytest.raises(InputError, match="flavor m1.tiny has root_gb 1, less than web-1's 20 .m1.small.: a disk is "
                                         "never shrunk"):
        refuse_shrinking("web-1", SMALL, TINY)
    with pytest.raises(InputError, match="ephemeral_gb 0, less than web-1's 5") as caught:
        refuse_shrinking("web-1", Flavor(name="e", vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=5), TINY)
    assert caught.value.field == "flavor.ephemeral_gb"
    # Swap is made anew by a resize (as Nova does): a smaller one is no shrink.
    refuse_shrinking("web-1", Flavor(name="s", vcpus=1, memory_mb=512, root_gb=1, swap=512),
                     Flavor(name="t", vcpus=1, memory_mb=512, root_gb=1, swap=256))


def test_the_root_volume_is_the_first_disk_when_it_is_in_the_pool():
    assert root_volume(DOMAIN_XML, "/var/lib/libvirt/images") == "berth-6f1a-root.qcow2"
    assert root_volume(DOMAIN_XML, "/srv/other-pool") is None


# ---- where: its own host preferred ------------------------------------------------------------

def hypervisor(name, uuid, reserved_mb):
    return {
        "host": name, "nodename": name, "uuid": uuid, "uri": f"qemu+ssh://{name}/system", "service_up": True,
        "disabled": False, "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 8192, "free_ram_mb": 0,
        "total_usable_disk_gb": 200, "free_disk_mb": 0, "num_instances": 0, "num_io_ops": 0,
        "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
        "reserved_host_memory_mb": reserved_mb, "reserved_host_disk_mb": 0, "domains": [],
        "supported_instances": [["x86_64", "qemu", "hvm"]],
    }


@pytest.fixture
def fleet(tmp_path):
    """hv1 keeps 3072 MB for instances (a tiny and a small fit, a medium does not); hv2 has room."""
    ledger = Ledger(f"sqlite:///{tmp_path}/ledger.sqlite3").open(create=True)
    ledger.sync_hypervisors([hypervisor("hv1", "hv-1", 8192 - 3072), hypervisor("hv2", "hv-2", 512)])
    [row] = ledger.claim([{"name": "web-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], TINY, "launch")
    ledger.mark_active(row["uuid"])
    yield ledger
    ledger.close()


# A resize's own arguments (it names no host) and the run's operator settings.
ARGS: dict = {}
SETTINGS = Settings(service_down_time=600, source="ledger")


def test_its_own_host_is_kept_where_the_new_flavor_fits_with_its_own_claim_given_back(fleet):
    fleet.claim([{"name": "other-1", "host": "hv1", "hypervisor_uuid": "hv-1"}], Flavor(
        name="x", vcpus=1, memory_mb=512, root_gb=1), "launch")
    # 3072 - 512 - 512 = 2048 MB free: a new m1.small fits only because web-1's 512 MB come back.
    [web] = fleet.instances(["web-1"])
    target = destination(ARGS, SETTINGS, {}, fleet, web, SMALL)
    assert (target["host"], target["hypervisor_uuid"]) == ("hv1", "hv-1")
    assert "hv1 still has room for it" in target["why"]


def test_a_flavor_its_host_cannot_take_goes_where_the_scheduler_says_with_why(fleet):
    [web] = fleet.instances(["web-1"])
    target = destination(ARGS, SETTINGS, {}, fleet, web, MEDIUM)
    assert (target["host"], target["uri"]) == ("hv2", "qemu+ssh://hv2/system")
    assert target["why"].startswith("hv1 has no room (insufficient RAM: needs 4096 MB")
    assert "chosen by the scheduler" in target["why"]


def test_a_flavor_no_host_can_take_fails_saying_why_for_each(fleet):
    [web] = fleet.instances(["web-1"])
    huge = Flavor(name="huge", vcpus=2, memory_mb=8000, root_gb=40)
    with pytest.raises(BerthError, match=r"cannot resize web-1 to huge: its host hv1 has no room \(insufficient RAM.*"
                                         r"elsewhere no valid host: .*hv1: ignored: listed in ignore_hosts; hv2: "
                                         r"insufficient RAM"):
        destination(ARGS, SETTINGS, {}, fleet, web, huge)


# ---- documentation and argument specs agree ------------------------------------------------------

def documented_options(module_name: str) -> dict:
    """A module's options as ansible-doc shows them: its own and its documentation fragments'."""
    module = importlib.import_module(f"ansible_collections.berth.fleet.plugins.modules.{module_name}")
    documentation = yaml.safe_load(module.DOCUMENTATION)
    options = {}
    for fragment in documentation.get("extends_documentation_fragment", []):
        name = fragment.rsplit(".", 1)[-1]
        fragment_module = importlib.import_module(f"ansible_collections.berth.fleet.plugins.doc_fragments.{name}")
        options.update(yaml.safe_load(fragment_module.ModuleDocFragment.DOCUMENTATION)["options"])
    options.update(documentation["options"])
    return options


@pytest.mark.parametrize("module_name", ["power", "resize", "migrate"])
def test_documentation_and_argument_spec_list_the_same_options(module_name):
    spec = importlib.import_module(f"ansible_collections.berth.fleet.plugins.action.{module_name}").ActionModule.ARGUMENT_SPEC
    documented = documented_options(module_name)
    assert sorted(documented) == sorted(spec)
    for name, option in spec.items():
        doc = documented[name]
        assert (doc["type"], doc.get("choices"), doc.get("required", False)) == (
            option["type"], option.get("choices"), option.get("required", False)), name
        if option.get("default") is not None:
            assert doc.get("default") == option["default"], name
