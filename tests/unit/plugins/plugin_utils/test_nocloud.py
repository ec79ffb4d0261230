"""The NoCloud seed ISO, read back with pycdlib as cloud-init's reader would see it."""

from __future__ import annotations

import io
import json

import pycdlib

from ansible_collections.berth.fleet.plugins.plugin_utils.nocloud import seed_iso


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
