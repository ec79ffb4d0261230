"""Operator settings on the lab, through real ansible-playbook runs of playbooks/launch.yml as a
user runs it (Ansible's own output): an extra variable named as an operator setting is ignored,
with a printed warning, and changes nothing; the same setting as berth_<name> is honoured."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, ansible_env, fleet_snapshot

pytestmark = pytest.mark.integration


def launch(lab, extra: dict) -> tuple[int, str]:
    """``launch.yml --check`` with ``extra`` as its extra variables and the lab's inventory;
    its exit code and its output (stdout and stderr, where Ansible prints warnings), with the
    lines Ansible wraps joined again."""
    lab.keep_synced((), None)
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", lab.inventory, str(REPO / "playbooks" / "launch.yml"),
         "--check", "-e", json.dumps(extra)],
        cwd=REPO, env={**ansible_env(), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"},
        capture_output=True, text=True, timeout=600, check=False)
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


def ignored(variable: str) -> str:
    return f"[WARNING]: the play variable {variable} is ignored: {variable} is an operator setting, taken only from " \
           f"berth_{variable}"


@pytest.fixture(scope="module")
def image_dir():
    """A directory with a small raw image, outside the lab's berth_image_source_dirs (/tmp)."""
    directory = Path(tempfile.mkdtemp(prefix="berth-settings-", dir="/var/tmp"))
    (directory / "settings.raw").write_bytes(b"\0" * 1024 * 1024)
    yield directory
    shutil.rmtree(directory)


def test_a_bare_image_source_dirs_is_ignored_with_a_warning_and_claims_nothing(lab):
    before = fleet_snapshot(lab)
    rc, output = launch(lab, {"server_name": "ims", "image_source_dirs": ["/"],
                              "image": {"name": "x.qcow2", "source": "/etc/passwd"}})
    assert rc != 0
    assert "image.source" in output and "/etc/passwd" in output, output[-3000:]
    assert ignored("image_source_dirs") in output, output[-3000:]
    assert fleet_snapshot(lab) == before


def test_image_source_dirs_is_honoured_as_berth_image_source_dirs_only(lab, image_dir):
    image = {"name": "settings.raw", "format": "raw", "source": str(image_dir / "settings.raw")}
    before = fleet_snapshot(lab)

    rc, output = launch(lab, {"server_name": "imh", "image_source_dirs": [str(image_dir)], "image": image})
    assert rc != 0 and "image.source" in output, output[-3000:]
    assert ignored("image_source_dirs") in output

    rc, output = launch(lab, {"server_name": "imh", "berth_image_source_dirs": [str(image_dir)], "image": image})
    assert rc == 0, output[-3000:]
    assert "imh-1" in output and "PLANNED" in output and "[WARNING]" not in output, output[-3000:]
    assert fleet_snapshot(lab) == before


def test_a_bare_enabled_filters_is_ignored_and_the_default_filters_still_decide(lab):
    """No host is in zone nowhere: AvailabilityZoneFilter (a default filter) turns every one
    down, unless the operator's berth_enabled_filters leaves it out."""
    before = fleet_snapshot(lab)
    rc, output = launch(lab, {"server_name": "flt", "enabled_filters": [], "availability_zone": "nowhere"})
    assert rc != 0
    assert "0/3 hosts are available" in output and "availability zone nowhere" in output, output[-3000:]
    assert ignored("enabled_filters") in output

    rc, output = launch(lab, {"server_name": "flt", "berth_enabled_filters": [], "availability_zone": "nowhere"})
    assert rc == 0, output[-3000:]
    assert "flt-1" in output and "PLANNED" in output and "[WARNING]" not in output, output[-3000:]
    assert fleet_snapshot(lab) == before
