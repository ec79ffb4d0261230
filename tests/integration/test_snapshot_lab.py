"""snapshot.yml on the real lab fleet (issue 37 item 2): a running guest launched from one image
is snapshotted into the operator's image directory (paused for the copy on its host: the lab
guest has no agent), runs again afterwards, and a second instance launched with the new image's
name alone boots from it - the lab guest prints the first line of its root disk, which is the
first guest's image's."""

from __future__ import annotations

import json
import uuid as uuidlib

import fleet
import pytest
from conftest import failed_messages, task_result
from test_evacuate import BOOT_TIMEOUT_S, launch_on
from test_rebuild_lab import raw_image, serial_after

pytestmark = pytest.mark.integration


def test_a_snapshot_of_a_running_guest_launches_again_by_name(lab, tmp_path):
    alpha = raw_image(tmp_path, "alpha")
    dirs = ("-e", json.dumps({"berth_image_source_dirs": [str(tmp_path)]}))
    image = f"snap-{uuidlib.uuid4().hex[:8]}.qcow2"
    first = launch_on(lab, "hv1", "sn", image={"name": f"sn-{image}.raw", "format": "raw", "source": str(alpha)})
    log = fleet.log_dir(lab.dir, "hv1") / "sn-1.serial.log"
    assert "BERTH-GUEST-IMAGE alpha" in serial_after(log, 0, ["BERTH-GUEST-IMAGE alpha"], BOOT_TIMEOUT_S)
    try:
        taken = lab.playbook("snapshot.yml", "-e", "instance=sn-1", "-e", f"image={image}", *dirs)
        assert taken["rc"] == 0, failed_messages(taken)
        result = task_result(taken, "Write the instance's root disk as an image")
        assert result["consistency"].startswith("paused for the copy")
        written = tmp_path / image
        record = json.loads((tmp_path / f"{image}.berth-image.json").read_text())
        assert written.read_bytes()[:4] == b"QFI\xfb" and record["checksum"] == result["checksum"]
        assert record["from_instance"] == "sn-1"
        # The guest runs again, and nothing of the copy is left in the pool.
        assert lab.virsh("hv1", "domstate", "sn-1").strip() == "running"
        assert f"berth-{first['uuid']}-snapshot.qcow2" not in lab.virsh("hv1", "vol-list", "default")
        # Launched again by the image's name alone, on another host: it boots from the snapshot.
        second = lab.playbook("launch.yml", "-e", json.dumps({"name": "sn2", "count": 1, "image": image,
                                                              "berth_force_hosts": ["hv2"]}), *dirs)
        assert second["rc"] == 0, failed_messages(second)
        log2 = fleet.log_dir(lab.dir, "hv2") / "sn2-1.serial.log"
        booted = serial_after(log2, 0, ["BERTH-GUEST-IMAGE alpha"], BOOT_TIMEOUT_S)
        assert "BERTH-GUEST-IMAGE alpha" in booted, booted
        assert image in lab.virsh("hv2", "vol-list", "default")
    finally:
        for name in ("sn", "sn2"):
            assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0
