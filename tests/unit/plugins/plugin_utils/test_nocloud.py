"""The NoCloud seed ISO, read back with pycdlib as cloud-init's reader would see it, and the
network-config it carries."""

from __future__ import annotations

import dataclasses
import io
import json

import pycdlib
import yaml

from ansible_collections.berth.fleet.plugins.module_utils.request import Network, Request, network_specs
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.plugin_utils.nocloud import network_config, seed_iso


def _read(iso: pycdlib.PyCdlib, rr_path: str) -> str:
    out = io.BytesIO()
    iso.get_file_from_iso_fp(out, rr_path=rr_path)
    return out.getvalue().decode("utf-8")


def test_seed_is_labelled_cidata_with_user_and_meta_data():
    user_data = "#cloud-config\nruncmd: [\"echo '$(rm -rf /)'\"]\n"
    data = seed_iso("0f7d7a4e-4a7c-4b0c-9a55-1d1c7d1d3c11", "web-1", user_data)
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(data))
    try:
        assert iso.pvd.volume_identifier.decode().strip() == "cidata"
        assert _read(iso, "/user-data") == user_data  # byte for byte, never interpreted
        meta = json.loads(_read(iso, "/meta-data"))
        assert meta == {"instance-id": "0f7d7a4e-4a7c-4b0c-9a55-1d1c7d1d3c11", "local-hostname": "web-1"}
    finally:
        iso.close()


UUID = "0f7d7a4e-4a7c-4b0c-9a55-1d1c7d1d3c11"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMHAHKTOP2ZweYwdkDpx84WRcq9TQF+EoJE7iTdXnww7 alice@example"
MACS = ["52:54:00:aa:bb:01", "52:54:00:aa:bb:02", "52:54:00:aa:bb:03"]


def _files(data: bytes) -> dict[str, str]:
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(data))
    try:
        names = [child.rock_ridge.name().decode() for child in iso.list_children(rr_path="/")
                 if child.is_file()]
        return {name: _read(iso, f"/{name}") for name in names}
    finally:
        iso.close()


def test_without_static_settings_there_is_no_network_config():
    assert network_config(network_specs([{"type": "user"}, {"type": "network", "name": "lan"}]), MACS) is None
    assert network_config([], []) is None


def test_network_config_lists_every_interface_by_mac_static_ones_with_their_settings():
    networks = network_specs([
        {"type": "network", "name": "lan", "addresses": ["10.0.0.5/24", "fd00::5/64"], "gateway": "10.0.0.1",
         "routes": [{"to": "10.9.0.0/16", "via": "10.0.0.254", "metric": 50}, {"to": "default", "via": "fd00::1"}],
         "nameservers": {"addresses": ["10.0.0.53"], "search": ["example.com"]}},
        {"type": "user"},
        {"type": "bridge", "name": "br0", "addresses": ["192.168.7.2/24"], "dhcp": True},
    ])
    assert network_config(networks, MACS) == {"version": 2, "ethernets": {
        "nic0": {"match": {"macaddress": MACS[0]}, "addresses": ["10.0.0.5/24", "fd00::5/64"], "dhcp4": False,
                 "routes": [{"to": "0.0.0.0/0", "via": "10.0.0.1"},
                            {"to": "10.9.0.0/16", "via": "10.0.0.254", "metric": 50},
                            {"to": "::/0", "via": "fd00::1"}],
                 "nameservers": {"addresses": ["10.0.0.53"], "search": ["example.com"]}},
        "nic1": {"match": {"macaddress": MACS[1]}, "dhcp4": True},
        "nic2": {"match": {"macaddress": MACS[2]}, "addresses": ["192.168.7.2/24"], "dhcp4": True},
    }}


def test_a_seed_for_keys_and_network_alone_has_an_empty_user_data_as_cloud_init_requires():
    config = network_config(network_specs([{"type": "user", "addresses": ["10.0.2.20/24"], "gateway": "10.0.2.2"}]),
                            MACS[:1])
    files = _files(seed_iso(UUID, "web-1", None, public_keys=[KEY], network_config=config))
    assert sorted(files) == ["meta-data", "network-config", "user-data"]
    assert files["user-data"] == ""
    assert json.loads(files["meta-data"]) == {"instance-id": UUID, "local-hostname": "web-1", "public-keys": [KEY]}
    assert yaml.safe_load(files["network-config"]) == config  # JSON, read as cloud-init reads YAML


def test_a_seed_for_user_data_alone_has_no_keys_and_no_network_config():
    files = _files(seed_iso(UUID, "web-1", "#cloud-config\n"))
    assert sorted(files) == ["meta-data", "user-data"]
    assert "public-keys" not in json.loads(files["meta-data"])


def test_the_build_makes_a_seed_when_user_data_keys_or_static_settings_need_it():
    plain = Request(flavor=Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1),
                    networks=Network.from_option([{"type": "user"}]))
    assert not plain.wants_seed
    assert dataclasses.replace(plain, user_data="").wants_seed
    assert dataclasses.replace(plain, public_keys=(KEY,)).wants_seed
    assert dataclasses.replace(plain, networks=Network.from_option([{"type": "user", "dhcp": True}])).wants_seed


def test_the_seed_carries_the_disks_vendor_data_beside_keys_and_network_config():
    config = network_config(network_specs([{"type": "user", "addresses": ["10.0.2.20/24"]}]), MACS[:1])
    files = _files(seed_iso(UUID, "web-1", None, public_keys=[KEY], network_config=config,
                            vendor_data={"mounts": []}))
    assert sorted(files) == ["meta-data", "network-config", "user-data", "vendor-data"]
