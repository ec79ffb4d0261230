"""cloud-init NoCloud seed images, built in memory on the controller.

The seed is an ISO 9660 image labelled ``cidata`` holding ``user-data`` and ``meta-data``,
``network-config`` where an interface has static settings and ``vendor-data`` where the flavor
has ephemeral or swap disks, as cloud-init's NoCloud datasource reads them. It is built with pycdlib (no genisoimage, no shell) and uploaded to the instance's
storage pool through libvirt.

cloud-init takes a seed only when it has both ``user-data`` and ``meta-data``: a seed made for
keys or a network configuration alone carries an empty ``user-data``. The public keys are the
meta-data's ``public-keys``, where cloud-init reads a key pair as Nova's metadata gives it.
"""

from __future__ import annotations

import io
import json
from typing import Any, Mapping, Sequence

from ansible_collections.berth.fleet.plugins.module_utils._requirements import import_library
from ansible_collections.berth.fleet.plugins.module_utils._static_network import has_static_config, route_is_default

# The default route of each address family, as network-config version 2 writes it.
_DEFAULT_NETWORKS = {4: "0.0.0.0/0", 6: "::/0"}


def meta_data(instance_uuid: str, hostname: str, public_keys: Sequence[str] = ()) -> str:
    # JSON is valid YAML, and json.dumps quotes whatever the values hold; one key a line, so
    # that a reader of the seed (or a guest's shell) finds each.
    data: dict[str, Any] = {"instance-id": instance_uuid, "local-hostname": hostname}
    if public_keys:
        data["public-keys"] = list(public_keys)
    return json.dumps(data, indent=2) + "\n"


def network_config(networks: Sequence[Mapping[str, Any]], macs: Sequence[str]) -> dict[str, Any] | None:
    """cloud-init's network-config (version 2) for the checked ``networks`` (module_utils/request.py
    network_specs) with their interfaces' MAC addresses, or None where none has static settings
    (the guest then configures its interfaces as its image does, DHCP for cloud images).

    Every interface is listed, matched by its MAC: a network-config replaces cloud-init's own
    fallback, so one left out would stay down. One without static settings gets DHCP; ``dhcp``
    defaults to true where an interface has no address."""
    if not any(has_static_config(network) for network in networks):
        return None
    ethernets = {}
    for index, (network, mac) in enumerate(zip(networks, macs)):
        entry: dict[str, Any] = {"match": {"macaddress": mac}}
        if network.get("addresses"):
            entry["addresses"] = list(network["addresses"])
        entry["dhcp4"] = network.get("dhcp", not network.get("addresses"))
        routes = [{"to": _DEFAULT_NETWORKS[_version(gateway)], "via": gateway}
                  for gateway in network.get("gateway", [])]
        for route in network.get("routes", []):
            to = _DEFAULT_NETWORKS[_version(route["via"])] if route_is_default(route["to"]) else route["to"]
            routes.append({**route, "to": to})
        if routes:
            entry["routes"] = routes
        if network.get("nameservers"):
            entry["nameservers"] = dict(network["nameservers"])
        ethernets[f"nic{index}"] = entry
    return {"version": 2, "ethernets": ethernets}


def _version(address: str) -> int:
    return 6 if ":" in address else 4


def seed_iso(instance_uuid: str, hostname: str, user_data: str | None, *, public_keys: Sequence[str] = (),
             network_config: Mapping[str, Any] | None = None, vendor_data: Mapping[str, Any] | None = None) -> bytes:
    """The seed's bytes. ``user_data`` None is an empty user-data file; ``vendor_data`` is
    cloud-config of Berth's own (the ephemeral and swap disks' formatting)."""
    pycdlib = import_library("pycdlib", "pycdlib", "the instance's NoCloud seed ISO (user_data, keys, network "
                                                   "settings, local disks)")
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident="cidata")
    files = [("USERDATA.;1", "user-data", user_data or ""),
             ("METADATA.;1", "meta-data", meta_data(instance_uuid, hostname, public_keys))]
    if network_config is not None:
        files.append(("NETWORKC.;1", "network-config", json.dumps(network_config, indent=2) + "\n"))
    if vendor_data is not None:
        files.append(("VENDORDA.;1", "vendor-data", "#cloud-config\n" + json.dumps(vendor_data) + "\n"))
    for iso_name, name, text in files:
        data = text.encode("utf-8")
        iso.add_fp(io.BytesIO(data), len(data), f"/{iso_name}", rr_name=name, joliet_path=f"/{name}")
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()
