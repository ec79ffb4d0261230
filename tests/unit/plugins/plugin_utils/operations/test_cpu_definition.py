"""The guest's <cpu> in the domain Berth defines: rendered from the host's settings and the
flavor's topology, recorded with the build, and rendered again from the record (checked again,
a ledger row is not trusted) by every move, with the topology of the flavor it moves with."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import guest_cpu
from ansible_collections.berth.fleet.plugins.module_utils.request import Image, Network, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
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
    """A launch's request as check_request makes it."""
    image = Image.from_option({"name": "debian.qcow2", "properties": dict(image_properties or {})})
    return Request(flavor=flavor, image=image, networks=Network.from_option([{"type": "user"}]))


def render(request, cpu):
    made = {"disk": {"path": f"{POOL}/berth-{UUID}-root.qcow2"}, "seed": None, "nvram": None}
    return ET.fromstring(TEMPLATE.render(request, "web-1", UUID, made, "qemu", LOGS, cpu=cpu))


def test_custom_model_features_and_topology_land_in_one_cpu_element_after_vcpu():
    request = request_for(QUAD)
    domain = render(request, guest_cpu(HOST_CPU, "hv1", "qemu", request.topology))
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
    cpu = render(request, guest_cpu({"settings": {"cpu_mode": mode}}, "hv1", "kvm", request.topology)).find("cpu")
    assert cpu.attrib == attributes
    assert cpu.find("model") is None
    assert cpu.find("topology").attrib == {"sockets": "2", "cores": "2", "threads": "1"}


def test_no_cpu_no_element():
    assert render(request_for(QUAD), None).find("cpu") is None


def test_the_record_defines_the_same_cpu_again_and_a_resize_gets_its_own_topology(launched_instance):
    # hw_cpu_policy is a CPU property of Nova's too, but not the topology's.
    request = request_for(QUAD, {"hw_cpu_max_threads": "1", "hw_disk_bus": "virtio", "hw_cpu_policy": "shared"})
    cpu = guest_cpu(HOST_CPU, "hv1", "qemu", request.topology)
    launched = render(request, cpu)
    instance = launched_instance(request, "web-1", UUID, HOST_CPU)
    # The build records the host-side choice, not the topology (computed again from the flavor a
    # definition is made with and the image's properties, which the request records).
    assert instance["request"]["build"]["cpu"] == {
        "mode": "custom", "model": "Westmere",
        "features": [{"policy": "require", "name": "aes"}, {"policy": "disable", "name": "vme"}]}
    assert instance["request"]["image"]["properties"]["hw_cpu_max_threads"] == "1"
    again = ET.fromstring(recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS))
    assert ET.tostring(again.find("cpu")) == ET.tostring(launched.find("cpu"))
    resized = ET.fromstring(recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS, flavor=OCTO)).find("cpu")
    assert resized.find("topology").attrib == {"sockets": "2", "cores": "4", "threads": "1"}
    assert resized.findtext("model") == "Westmere"


def test_an_instance_built_before_berth_recorded_its_cpu_is_defined_without_one(launched_instance):
    instance = launched_instance(request_for(QUAD), "web-1", UUID, HOST_CPU)
    del instance["request"]["build"]["cpu"]
    assert ET.fromstring(recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS)).find("cpu") is None


def schema_1(instance):
    """The instance's record as Berth wrote it before the request was typed (schema 1): the
    launch's request options, and a build record holding the guest's definition, its CPU with the
    image's topology properties."""
    record = instance["request"]
    image_properties = record["image"]["properties"]
    return {**instance, "request": {
        "flavor": record["flavor"], "image_properties": image_properties, "project_id": record["project_id"],
        "availability_zone": None, "scheduler_hints": {}, "server_group": None,
        "build": {**{key: record[key] for key in ("metadata", "networks", "boot", "guest", "domain_type")},
                  **record["build"],
                  "cpu": {**record["build"]["cpu"], "image_properties": {
                      key: value for key, value in image_properties.items() if key.startswith("hw_cpu_max")}}}}}


def test_a_schema_1_record_defines_the_same_cpu_again(launched_instance):
    request = request_for(QUAD, {"hw_cpu_max_threads": "1"})
    instance = launched_instance(request, "web-1", UUID, HOST_CPU)
    assert recorded_definition(schema_1(instance), TEMPLATE, POOL, ["qemu"], LOGS) == \
        recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS)


def tampered_cpu(instance, cpu):
    """``instance`` with a build record whose CPU a ledger writer changed."""
    return {**instance, "request": {**instance["request"], "build": {**instance["request"]["build"], "cpu": cpu}}}


def tampered_image_properties(instance, properties):
    """``instance`` with a recorded image whose properties a ledger writer changed."""
    record = instance["request"]
    return {**instance, "request": {**record, "image": {**record["image"], "properties": properties}}}


@pytest.mark.parametrize("tamper, field", [
    (lambda instance: tampered_cpu(instance, {"mode": "custom", "model": "Westmere'/><x", "features": []}),
     "build.cpu.model"),
    (lambda instance: tampered_cpu(instance, {"mode": "custom", "model": "Westmere",
                                              "features": [{"policy": "require", "name": "aes'"}]}),
     "build.cpu.features[0]"),
    (lambda instance: tampered_image_properties(instance, {"hw_cpu_sockets": "x"}),
     "image.properties.hw_cpu_sockets"),
    (lambda instance: schema_1(tampered_cpu(instance, {"mode": "custom", "model": "Westmere'/><x", "features": []})),
     "build.cpu.model"),
    (lambda instance: {**schema_1(instance), "request": {**schema_1(instance)["request"],
                                                         "image_properties": {"hw_cpu_sockets": "x"}}},
     "image.properties.hw_cpu_sockets"),
], ids=["model", "feature", "bad-topology-property", "schema-1-model", "schema-1-bad-topology-property"])
def test_a_tampered_record_is_refused_naming_the_field(launched_instance, tamper, field):
    instance = tamper(launched_instance(request_for(QUAD), "web-1", UUID, HOST_CPU))
    with pytest.raises(InputError) as caught:
        recorded_definition(instance, TEMPLATE, POOL, ["qemu"], LOGS)
    assert caught.value.field == field
