"""The guest's <cpu> in the domain Berth defines: rendered from the host's settings and the
flavor's topology, recorded with the build, and rendered again from the record (checked again,
a ledger row is not trusted) by every move, with the topology of the flavor it moves with."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest import guest_spec
from ansible_collections.berth.fleet.plugins.module_utils.cpu_topology import best_topology
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu
from ansible_collections.berth.fleet.plugins.module_utils.request import boot_spec, metadata_spec, network_specs
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    build_record,
    recorded_definition,
)

UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
POOL = "/var/lib/libvirt/images"
LOGS = "/var/log/libvirt/qemu"
TEMPLATE = DomainTemplate(DEFAULT_TEMPLATE)
QUAD = Flavor(name="c1.quad", vcpus=4, memory_mb=512, root_gb=1, extra_specs={"hw:cpu_sockets": "2"})
OCTO = Flavor(name="c1.octo", vcpus=8, memory_mb=512, root_gb=1, extra_specs={"hw:cpu_sockets": "2"})
HOST_CPU = {"settings": {"cpu_mode": "custom", "cpu_models": ["Westmere"], "cpu_model_extra_flags": ["+aes", "-vme"]}}


def request_for(flavor, image_properties=None):
    """A build's request as Build._request makes it."""
    image = {"name": "debian.qcow2", "properties": dict(image_properties or {})}
    return {"name": "web-1", "uuid": UUID, "flavor": flavor, "image": image, "guest": guest_spec({}),
            "networks": network_specs([{"type": "user"}]), "metadata": metadata_spec({}), "user_data": None,
            "public_keys": [],
            "boot": boot_spec({}), "pool": "default",
            "cpu_topology": best_topology(flavor.vcpus, flavor.extra_specs, image["properties"])}


def render(request, cpu):
    made = {"disk": {"path": f"{POOL}/berth-{UUID}-root.qcow2"}, "seed": None, "nvram": None}
    return ET.fromstring(TEMPLATE.render(request, made, "qemu", LOGS, cpu=cpu))


def test_custom_model_features_and_topology_land_in_one_cpu_element_after_vcpu():
    request = request_for(QUAD)
    domain = render(request, guest_cpu(HOST_CPU, "hv1", "qemu", request["cpu_topology"]))
    children = [child.tag for child in domain]
    assert children[children.index("vcpu") + 1] == "cpu"
    cpu = domain.find("cpu")
    assert cpu.attrib == {"mode": "custom", "match": "exact"}
    assert cpu.find("model").attrib == {"fallback": "forbid"} and cpu.findtext("model") == "Westmere"
    assert cpu.find("topology").attrib == {"sockets": "2", "cores": "2", "threads": "1"}
    assert [feature.attrib for feature in cpu.findall("feature")] == [
        {"policy": "require", "name": "aes"}, {"policy": "disable", "name": "vme"}]
    assert domain.findtext("vcpu") == "4"


MODES = [("host-model", {"mode": "host-model"}), ("host-passthrough", {"mode": "host-passthrough"}), ("none", {})]


@pytest.mark.parametrize("mode, attributes", MODES, ids=str)
def test_modes_without_a_model_keep_the_topology(mode, attributes):
    request = request_for(QUAD)
    cpu = render(request, guest_cpu({"settings": {"cpu_mode": mode}}, "hv1", "kvm", request["cpu_topology"])).find("cpu")
    assert cpu.attrib == attributes
    assert cpu.find("model") is None
    assert cpu.find("topology").attrib == {"sockets": "2", "cores": "2", "threads": "1"}


def test_no_cpu_no_element():
    assert render(request_for(QUAD), None).find("cpu") is None


def test_the_record_defines_the_same_cpu_again_and_a_resize_gets_its_own_topology():
    # hw_cpu_policy is a CPU property of Nova's too, but not the topology's: not recorded.
    request = request_for(QUAD, {"hw_cpu_max_threads": "1", "hw_disk_bus": "virtio", "hw_cpu_policy": "shared"})
    cpu = guest_cpu(HOST_CPU, "hv1", "qemu", request["cpu_topology"])
    launched = render(request, cpu)
    record = build_record(request, {"domain_type": "qemu", "cpu": cpu})
    # The host-side choice and the image's topology properties, not the topology itself.
    assert record["cpu"] == {"mode": "custom", "model": "Westmere",
                             "features": [{"policy": "require", "name": "aes"}, {"policy": "disable", "name": "vme"}],
                             "image_properties": {"hw_cpu_max_threads": "1"}}
    instance = {"name": "web-1", "uuid": UUID, "request": {"build": record}}
    again = ET.fromstring(recorded_definition(instance, QUAD, TEMPLATE, POOL, ["qemu"], LOGS))
    assert ET.tostring(again.find("cpu")) == ET.tostring(launched.find("cpu"))
    resized = ET.fromstring(recorded_definition(instance, OCTO, TEMPLATE, POOL, ["qemu"], LOGS)).find("cpu")
    assert resized.find("topology").attrib == {"sockets": "2", "cores": "4", "threads": "1"}
    assert resized.findtext("model") == "Westmere"


def test_an_instance_built_before_berth_recorded_its_cpu_is_defined_without_one():
    record = build_record(request_for(QUAD), {"domain_type": "qemu"})
    assert record["cpu"] is None
    instance = {"name": "web-1", "uuid": UUID, "request": {"build": record}}
    assert ET.fromstring(recorded_definition(instance, QUAD, TEMPLATE, POOL, ["qemu"], LOGS)).find("cpu") is None


@pytest.mark.parametrize("tampered, field", [
    ({"mode": "custom", "model": "Westmere'/><x", "features": []}, "cpu.model"),
    ({"mode": "custom", "model": "Westmere", "features": [{"policy": "require", "name": "aes'"}]}, "cpu.features[0]"),
    ({"mode": "custom", "model": "Westmere", "features": [], "image_properties": {"hw_disk_bus": "ide"}},
     "cpu.image_properties"),
    ({"mode": "custom", "model": "Westmere", "features": [], "image_properties": {"hw_cpu_sockets": "x"}},
     "image.properties.hw_cpu_sockets"),
], ids=["model", "feature", "foreign-property", "bad-topology-property"])
def test_a_tampered_record_is_refused_naming_the_field(tampered, field):
    record = build_record(request_for(QUAD), {"domain_type": "qemu"})
    instance = {"name": "web-1", "uuid": UUID, "request": {"build": {**record, "cpu": tampered}}}
    with pytest.raises(InputError) as caught:
        recorded_definition(instance, QUAD, TEMPLATE, POOL, ["qemu"], LOGS)
    assert caught.value.field == field
