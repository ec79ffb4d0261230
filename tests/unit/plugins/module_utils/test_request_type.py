"""The typed launch request: what it records, what it reads back (its own schema and the one
before it), and what it refuses of a record, which comes from the ledger and is not trusted."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    REQUEST_VERSION,
    Boot,
    Built,
    Image,
    Network,
    RecordError,
    Request,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMHAHKTOP2ZweYwdkDpx84WRcq9TQF+EoJE7iTdXnww7 alice@example"
FLAVOR = Flavor.from_dict({"vcpus": 4, "memory_mb": 1024, "root_gb": 2, "ephemeral_gb": 1, "swap": 256,
                           "extra_specs": {"hw:cpu_sockets": "2"}}, name="m1.odd")


def full_request() -> Request:
    image = Image.from_option({"name": "debian.qcow2", "properties": {"hw_disk_bus": "sata", "os_type": "linux"}})
    return Request(
        flavor=FLAVOR, image=image,
        guest=Guest.from_options({"nic_model": "e1000", "graphics": "vnc"}, image.properties),
        networks=Network.from_option([{"type": "user"}, {"type": "network", "name": "default",
                                                         "addresses": ["10.0.0.5/24"], "gateway": "10.0.0.1"}]),
        key_name="ops", public_keys=(KEY,), metadata={"team": "blue"}, user_data="#cloud-config\n",
        boot=Boot("/boot/vmlinuz", "/boot/initrd", "console=ttyS0"), availability_zone="az1",
        server_group="web", scheduler_hints={"different_host": ["0b9a0e4e-6a54-4c5e-8d9f-2f4d3c1b2a10"]},
        labels=("db", "blue"), project_id="team-a", domain_type="qemu", autostart=True)


def test_a_request_reads_back_from_its_record_as_it_was_less_the_user_data():
    request = full_request()
    record = request.to_record()
    assert record["version"] == REQUEST_VERSION
    assert "user_data" not in record  # it may hold secrets; the seed keeps it on the host
    again, built = Request.from_record(record)
    assert built is None
    assert again == dataclasses.replace(request, user_data=None)
    assert again.guest.values == {"firmware": "bios", "disk_bus": "sata", "nic_model": "e1000", "cdrom_bus": "sata",
                                  "guest_agent": True, "graphics": {"type": "vnc", "listen": "127.0.0.1"},
                                  "cpu_baseline": False}
    assert again.topology == {"sockets": 2, "cores": 2, "threads": 1}
    # The labels the operator's host rules select by are kept, for every move.
    assert record["labels"] == ["db", "blue"] and again.labels == ("db", "blue")


def test_a_record_from_before_labels_reads_with_none():
    record = full_request().to_record()
    del record["labels"]
    assert Request.from_record(record)[0].labels == ()


def test_the_build_record_reads_back_beside_the_request():
    record = {**full_request().to_record(), "build": Built(
        seed=True, cpu={"mode": "custom", "model": "Nehalem", "features": [{"name": "pcid", "policy": "require"}],
                        "why": "dropped"}).to_record()}
    _request, built = Request.from_record(record)
    assert built == Built(seed=True, local_disks=True,
                          cpu={"mode": "custom", "model": "Nehalem",
                               "features": [{"name": "pcid", "policy": "require"}]})


def schema_1_record() -> dict:
    """A record as Berth wrote it before the request was typed: the launch's request options with
    the flavor and server group, and a build record holding the guest's definition."""
    return {
        "availability_zone": "az1", "scheduler_hints": {"same_host": ["x"]}, "project_id": "team-a",
        "image_properties": {"hw_cpu_max_sockets": "1", "hw_vif_model": "e1000"},
        "enabled_filters": ["ComputeFilter"], "weighers": ["RAMWeigher"], "requested_networks": ["default"],
        "max_attempts": 3, "flavor": FLAVOR.to_dict(), "server_group": "web",
        "build": {"metadata": {"team": "blue"}, "networks": [{"type": "network", "name": "default"}],
                  "boot": {"kernel": "/k", "initrd": "", "cmdline": "quiet"},
                  "guest": {"firmware": "uefi", "disk_bus": "scsi", "nic_model": "e1000", "guest_agent": False,
                            "cdrom_bus": "ide", "graphics": None},
                  "seed": True, "local_disks": True, "domain_type": "qemu",
                  "cpu": {"mode": "host-model", "model": None, "features": [],
                          "image_properties": {"hw_cpu_max_sockets": "1"}}},
    }


def test_a_schema_1_record_is_read_as_the_request_it_was():
    request, built = Request.from_record(schema_1_record())
    assert request.guest.values == {"firmware": "uefi", "disk_bus": "scsi", "nic_model": "e1000", "cdrom_bus": "ide",
                                    "guest_agent": False, "graphics": None, "cpu_baseline": False}
    assert [network.to_dict() for network in request.networks] == [{"type": "network", "name": "default"}]
    assert (request.metadata, request.boot, request.domain_type) == ({"team": "blue"}, Boot("/k", "", "quiet"), "qemu")
    assert (request.availability_zone, request.server_group, request.project_id) == ("az1", "web", "team-a")
    assert request.scheduler_hints == {"same_host": ["x"]}
    # Its image was kept by its properties only; the topology is theirs.
    assert request.image == Image(None, properties={"hw_cpu_max_sockets": "1", "hw_vif_model": "e1000"})
    assert request.topology == {"sockets": 1, "cores": 4, "threads": 1}
    assert built == Built(seed=True, local_disks=True, cpu={"mode": "host-model", "model": None, "features": []})
    # Read back, it records as schema 2, without the launch's scheduler settings.
    assert request.to_record()["version"] == 2
    assert "enabled_filters" not in request.to_record()


def test_a_schema_1_record_without_its_build_record_is_refused_naming_its_version():
    record = schema_1_record()
    del record["build"]
    with pytest.raises(RecordError, match=r"schema 1\).*no build record") as raised:
        Request.from_record(record)
    assert raised.value.version == 1 and raised.value.field == "request"


def test_a_record_of_an_unknown_schema_is_refused_naming_it():
    with pytest.raises(RecordError, match=r"schema 3\)"):
        Request.from_record({**full_request().to_record(), "version": 3})


@pytest.mark.parametrize("part, value, field", [
    ("guest", {"firmware": "uefi'/><x"}, "firmware"),
    ("guest", {"graphics": {"type": "vnc", "listen": "0.0.0.0'/>"}}, "graphics.listen"),
    ("networks", [{"type": "bridge", "name": "br0'/><interface type='direct"}], "networks[0].name"),
    ("metadata", {"k": "\x00"}, "metadata.k"),
    ("boot", {"kernel": "../../etc/shadow"}, "boot.kernel"),
    ("image", {"name": "../escape", "properties": {}}, "image.name"),
    ("flavor", {"name": "x", "vcpus": -1, "memory_mb": 1, "root_gb": 1}, "flavor.vcpus"),
    ("domain_type", "lxc", "domain_type"),
    ("public_keys", ["not a key"], "public_keys[0]"),
    ("labels", ["db", "Not A Label"], "labels[1]"),
    ("labels", "db", "labels"),
], ids=str)
def test_a_hostile_record_is_refused_naming_the_field(part, value, field):
    with pytest.raises(InputError) as raised:
        Request.from_record({**full_request().to_record(), part: value})
    assert raised.value.field == field


def test_a_flavor_that_contradicts_its_image_is_refused_when_the_request_is_made():
    image = Image.from_option({"name": "one-socket.qcow2", "properties": {"hw_cpu_max_sockets": "1",
                                                                          "hw_cpu_max_cores": "1", "hw_cpu_max_threads": "1"}})
    with pytest.raises(InputError, match="no vCPU topology"):
        Request(flavor=FLAVOR, image=image)


def test_a_resize_derives_the_topology_of_the_new_flavor():
    request = full_request()
    bigger = Flavor.from_dict({"vcpus": 8, "memory_mb": 2048, "root_gb": 2}, name="m1.big")
    assert request.resized(bigger).topology == {"sockets": 8, "cores": 1, "threads": 1}
    assert request.resized(bigger).guest is request.guest
