"""A hypervisor whose libvirtd asks for a SASL login (auth_unix_rw = "sasl", scram-sha-256), as
a real one behind a password does: the credential comes from the environment, as AWX injects
it, is never printed, and a wrong or missing one puts the host down with the reason."""

from __future__ import annotations

import json
import tempfile

import fleet
import pytest
from facts_helpers import REPO, ansible_env, group_members, plain, run_inventory, run_playbook

pytestmark = pytest.mark.integration

USER = "berth-ops"
SECRET = "correct horse battery staple"
WRONG = "hunter2-not-it"


@pytest.fixture(scope="module")
def sasl_lab():
    directory = tempfile.mkdtemp(prefix="berth-sasl-", dir="/tmp")
    try:
        fleet.up(directory, hosts=1)
        fleet.require_password(directory, "hv1", USER, SECRET)
        yield directory
    finally:
        fleet.discard(directory)


def credentials(password: str | None) -> dict[str, str]:
    extra = {"BERTH_LIBVIRT_USERNAME": USER}
    if password is not None:
        extra["BERTH_LIBVIRT_PASSWORD"] = password
    return ansible_env(**extra)


@pytest.mark.parametrize("password", [None, WRONG], ids=["no-password", "wrong-password"])
def test_without_the_right_password_the_host_is_down_with_the_reason(sasl_lab, password):
    inventory = run_inventory(fleet.inventory_dir(sasl_lab), "-vvv", env=credentials(password))
    assert group_members(inventory, "down") == {"hv1"}
    reason = plain(inventory["_meta"]["hostvars"]["hv1"]["berth_host_state"])["down_reason"]
    assert "authentication failed" in reason, reason
    assert WRONG not in inventory["_json"] + inventory["_stdout"] + inventory["_stderr"]


def test_the_password_from_the_environment_logs_in_and_launches(sasl_lab):
    env = credentials(SECRET)
    inventory = run_inventory(fleet.inventory_dir(sasl_lab), "-vvv", env=env)
    assert group_members(inventory, "down") == set()
    state = plain(inventory["_meta"]["hostvars"]["hv1"]["berth_host_state"])
    assert state["service_up"] and state["nodename"] == "berth-hv1"
    assert SECRET not in inventory["_json"] + inventory["_stdout"] + inventory["_stderr"]

    playbooks = REPO / "playbooks"
    synced = run_playbook(str(playbooks / "gather.yml"), fleet.inventory_dir(sasl_lab), env=env)
    assert synced["rc"] == 0, synced["stderr"]
    launch = run_playbook(str(playbooks / "launch.yml"), fleet.inventory_dir(sasl_lab), "-e",
                          json.dumps({"name": "locked", "flavor": "m1.tiny"}), env=env)
    assert launch["rc"] == 0, launch["stderr"]
    uri = fleet.uri(sasl_lab, "hv1")
    assert fleet.virsh(uri, "domstate", "locked-1").strip() == "running"
    deleted = run_playbook(str(playbooks / "delete.yml"), fleet.inventory_dir(sasl_lab), "-e", "name=locked",
                           env=env)
    assert deleted["rc"] == 0, deleted["stderr"]
    assert "locked-1" not in fleet.virsh(uri, "list", "--all", "--name").split()
    assert SECRET not in json.dumps(synced) + json.dumps(launch) + json.dumps(deleted)
