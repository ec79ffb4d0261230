"""rebuild.yml on the real lab fleet (issue 37 item 3): a guest launched from one image, with a
static address and a key through its seed, is rebuilt from another image on its own host; it
keeps its name, UUID, MAC, address, key and claim, and its new root disk is the new image's (the
lab guest prints the first line of its root disk: ``BERTH-GUEST-IMAGE <name>``). A rebuild from
an image whose properties the host's rules refuse (ImagePropertiesFilter) changes nothing."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import fleet
import pytest
from conftest import failed_messages
from test_evacuate import BOOT_TIMEOUT_S, launch_on, row_of
from test_seed import lab_subnet_prefix, make_key

pytestmark = pytest.mark.integration


def raw_image(directory: Path, name: str) -> Path:
    """A 1 MiB raw image whose first line names it, as the lab guest reads it back."""
    path = directory / f"{name}.raw"
    path.write_bytes(f"BERTH-IMAGE {name}\n".encode().ljust(1024 * 1024, b"\0"))
    return path


def serial_after(log: Path, offset: int, wanted: list[str], timeout_s: float) -> str:
    """What the serial log says after ``offset`` (all of it, if the log was started anew), once
    it has every line of ``wanted`` or the time is up."""
    deadline, text = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        data = log.read_bytes() if log.exists() else b""
        text = (data[offset:] if len(data) >= offset else data).decode(errors="replace")
        if all(line in text for line in wanted):
            break
        time.sleep(0.5)
    return text


def mac_of(lab, host: str, name: str) -> str:
    return ET.fromstring(lab.virsh(host, "dumpxml", name)).find("devices/interface/mac").get("address")


def test_a_rebuild_makes_the_root_disk_anew_from_another_image_and_keeps_what_identifies_the_guest(lab, tmp_path):
    _key, public = make_key(tmp_path, "rbkey")
    prefix = lab_subnet_prefix(lab, "hv1")
    address = f"{prefix}.8"  # below the lab network's DHCP range
    alpha, beta = raw_image(tmp_path, "alpha"), raw_image(tmp_path, "beta")
    before = launch_on(lab, "hv1", "rb", image={"name": "rb-alpha.raw", "format": "raw", "source": str(alpha)},
                       ssh_authorized_keys=[public], cdrom_bus="ide", networks=[
                           {"type": "network", "name": fleet.NETWORK_NAME, "addresses": [f"{address}/24"],
                            "gateway": f"{prefix}.1"}])
    log = fleet.log_dir(lab.dir, "hv1") / "rb-1.serial.log"
    booted = serial_after(log, 0, ["BERTH-GUEST-IMAGE alpha", f"BERTH-GUEST-NET eth0 {address}"], BOOT_TIMEOUT_S)
    assert "BERTH-GUEST-IMAGE alpha" in booted, booted
    mac = mac_of(lab, "hv1", "rb-1")
    try:
        # The host's rules refuse an aarch64 image: nothing changes, nothing is uploaded.
        offset = log.stat().st_size
        refused = lab.playbook("rebuild.yml", "-e", json.dumps({"instance": "rb-1", "image": {
            "name": "rb-arm.raw", "format": "raw", "source": str(beta), "properties": {"hw_architecture": "aarch64"}}}))
        assert refused["rc"] != 0
        assert any("rb-1 cannot be rebuilt from image rb-arm.raw on hv1: image properties: aarch64/any/any not "
                   "supported. Nothing was changed" in message for message in failed_messages(refused)), \
            failed_messages(refused)
        row = row_of(lab, "rb-1")
        assert (row["state"], row["image"], row["uuid"]) == ("ACTIVE", "rb-alpha.raw", before["uuid"])
        assert "rb-arm.raw" not in lab.virsh("hv1", "vol-list", "default")
        assert lab.virsh("hv1", "domstate", "rb-1").strip() == "running"

        done = lab.playbook("rebuild.yml", "-e", json.dumps({"instance": "rb-1", "image": {
            "name": "rb-beta.raw", "format": "raw", "source": str(beta)}}))
        assert done["rc"] == 0, failed_messages(done)
        after = row_of(lab, "rb-1")
        assert (after["uuid"], after["host"], after["state"], after["image"]) == (
            before["uuid"], "hv1", "ACTIVE", "rb-beta.raw")
        assert mac_of(lab, "hv1", "rb-1") == mac
        assert [claim["hypervisor_uuid"] for claim in lab.ledger_rows("claims")
                if claim["instance_uuid"] == before["uuid"]] == [before["hypervisor_uuid"]]
        # The guest boots from the new image, with its key and its address from the new seed.
        wanted = ["BERTH-GUEST-IMAGE beta", "BERTH-GUEST-KEYS 1", f"BERTH-GUEST-NET eth0 {address}"]
        rebuilt = serial_after(log, offset, wanted, BOOT_TIMEOUT_S)
        assert all(line in rebuilt for line in wanted) and "BERTH-GUEST-IMAGE alpha" not in rebuilt, rebuilt
    finally:
        assert lab.playbook("delete.yml", "-e", "name=rb")["rc"] == 0
