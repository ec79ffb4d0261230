"""cloud-init NoCloud seed images, built in memory on the controller.

The seed is an ISO 9660 image labelled ``cidata`` holding ``user-data`` and ``meta-data``, as
cloud-init's NoCloud datasource reads it. It is built with pycdlib (no genisoimage, no shell)
and uploaded to the instance's storage pool through libvirt.
"""

from __future__ import annotations

import io
import json
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils._requirements import import_library


def meta_data(instance_uuid: str, hostname: str) -> str:
    # JSON is valid YAML, and json.dumps quotes whatever the values hold.
    return json.dumps({"instance-id": instance_uuid, "local-hostname": hostname}) + "\n"


def seed_iso(instance_uuid: str, hostname: str, user_data: str,
             vendor_data: Mapping[str, Any] | None = None) -> bytes:
    pycdlib = import_library("pycdlib", "pycdlib", "user_data (its NoCloud seed ISO)")
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident="cidata")
    files = [("USERDATA.;1", "user-data", user_data), ("METADATA.;1", "meta-data", meta_data(instance_uuid, hostname))]
    if vendor_data is not None:
        files.append(("VENDORDA.;1", "vendor-data", "#cloud-config\n" + json.dumps(vendor_data) + "\n"))
    for iso_name, name, text in files:
        data = text.encode("utf-8")
        iso.add_fp(io.BytesIO(data), len(data), f"/{iso_name}", rr_name=name, joliet_path=f"/{name}")
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()
