"""The remote path for real: a loopback sshd in front of the lab daemons.

The inventory plugin reaches hv1 through ``qemu+ssh://`` and ``qemu+libssh://`` URIs
(``socket=`` and ``proxy=netcat``), and berth.fleet.hypervisor_facts runs on hv1 over Ansible's
ssh connection. Host keys are checked unless the source says otherwise.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import fleet
import pytest
from facts_helpers import LAB_POLICY, REPO, ansible_env, group_members, plain, run_inventory, run_playbook, task_results
from loopback_sshd import LoopbackSshd

pytestmark = pytest.mark.integration

SECRET = "hunter2-never-printed"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


def source(tmp_path, uri: str, *extra: str):
    path = tmp_path / "remote.berth.yml"
    path.write_text("\n".join(["plugin: berth.fleet.hypervisors", "timeout: 15", LAB_POLICY.strip(), *extra, "hypervisors:",
                               "  hv1:", f"    uri: {json.dumps(uri)}", ""]))
    return path


def virsh(lab, *args: str) -> str:
    return fleet.virsh(lab.hosts["hv1"]["uri"], *args, timeout=60)


def test_unknown_host_key_is_refused_by_default(lab, sshd, tmp_path):
    env = ansible_env(BERTH_SSH_KEYFILE=str(sshd.client_key))
    inventory = run_inventory(source(tmp_path, sshd.uri(fleet.socket_path(lab.dir, "hv1"))), env=env)
    assert group_members(inventory, "down") == {"hv1"}
    reason = plain(inventory["_meta"]["hostvars"]["hv1"]["berth_host_state"])["down_reason"]
    assert "Host key verification failed" in reason, reason


def test_qemu_ssh_gives_the_same_host_as_the_local_socket(lab, sshd, tmp_path):
    env = ansible_env(BERTH_SSH_KEYFILE=str(sshd.client_key), BERTH_LIBVIRT_PASSWORD=SECRET)
    remote_source = source(tmp_path, sshd.uri(fleet.socket_path(lab.dir, "hv1")), "verify_host_keys: false")
    remote = run_inventory(remote_source, "-vvvv", env=env)
    assert group_members(remote, "down") == set()
    state = plain(remote["_meta"]["hostvars"]["hv1"]["berth_host_state"])
    caps = ET.fromstring(virsh(lab, "capabilities"))
    assert state["uuid"] == caps.findtext("host/uuid")
    assert state["nodename"] == virsh(lab, "hostname").strip() == "berth-hv1"
    assert state["domains"] == [] or sorted(d["name"] for d in state["domains"]) == sorted(
        virsh(lab, "list", "--all", "--name").split())
    # Remote: memory from libvirt's node statistics, CPU times but no load (libvirt has none).
    assert state["hv_memory_source"] == "libvirt"
    memstats = dict(line.split(":") for line in virsh(lab, "nodememstats").splitlines() if ":" in line)
    assert state["total_usable_ram_mb"] == int(memstats["total  "].split()[0]) // 1024
    assert "cpu_idle_ns" in state["metrics"] and "load_1m" not in state["metrics"]
    uri = plain(remote["_meta"]["hostvars"]["hv1"]["berth_libvirt_uri"])
    assert "no_verify=1" in uri and f"keyfile={sshd.client_key}" in uri
    # A credential from the environment is never printed, at any verbosity.
    assert SECRET not in remote["_json"] + remote["_stdout"] + remote["_stderr"]


def test_libssh_checks_the_given_known_hosts(lab, sshd, tmp_path):
    uri = sshd.uri(fleet.socket_path(lab.dir, "hv1"), scheme="qemu+libssh")
    good = run_inventory(source(tmp_path, uri), env=ansible_env(
        BERTH_SSH_KEYFILE=str(sshd.client_key), BERTH_SSH_KNOWN_HOSTS=str(sshd.known_hosts)))
    assert group_members(good, "down") == set()
    assert plain(good["_meta"]["hostvars"]["hv1"]["berth_host_state"])["nodename"] == "berth-hv1"

    wrong = tmp_path / "wrong_known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {sshd.client_key.with_suffix('.pub').read_text()}")
    bad = run_inventory(source(tmp_path, uri), env=ansible_env(
        BERTH_SSH_KEYFILE=str(sshd.client_key), BERTH_SSH_KNOWN_HOSTS=str(wrong)))
    assert group_members(bad, "down") == {"hv1"}
    reason = plain(bad["_meta"]["hostvars"]["hv1"]["berth_host_state"])["down_reason"]
    assert "HOST KEY VERIFICATION FAILED" in reason.upper(), reason


def test_hypervisor_facts_runs_on_the_hypervisor_over_ssh(lab, sshd, tmp_path):
    inventory = tmp_path / "ssh_hosts.yml"
    inventory.write_text(json.dumps({"hypervisors": {"hosts": {"hv1": {
        "ansible_host": "127.0.0.1", "ansible_port": sshd.port, "ansible_user": "root",
        "ansible_connection": "ssh",
        "ansible_ssh_private_key_file": str(sshd.client_key),
        # The host key is checked, against the sshd's own.
        "ansible_ssh_common_args": f"-o UserKnownHostsFile={sshd.known_hosts} -o StrictHostKeyChecking=yes",
        # No persistent master connection: nothing may outlive the test's sshd.
        "ansible_ssh_args": "-o ControlMaster=no -o ControlPersist=no",
        "ansible_python_interpreter": str(REPO / ".venv" / "bin" / "python"),
        "berth_local_uri": lab.hosts["hv1"]["uri"],
    }}}}))
    playbook = REPO / "tests" / "integration" / "playbooks" / "hypervisor_facts.yml"
    env = ansible_env(ANSIBLE_INVENTORY_ENABLED="ansible.builtin.yaml")
    for check in (True, False):
        output = run_playbook(playbook, inventory, *(["--check"] if check else []), env=env)
        assert output["rc"] == 0, output["stderr"]
        result = task_results(output, "Gather")["hv1"]
        assert result["changed"] is False
        state = result["host_state"]
        caps = ET.fromstring(virsh(lab, "capabilities"))
        assert state["uuid"] == caps.findtext("host/uuid")
        assert state["nodename"] == "berth-hv1"
        assert state["vcpus_total"] == int(dict(
            line.split(":", 1) for line in virsh(lab, "nodeinfo").splitlines())["CPU(s)"])
        # On the hypervisor itself: /proc, with the load.
        assert state["hv_memory_source"] == "proc" and "load_1m" in state["metrics"]
        assert state["reserved_host_memory_mb"] == 1024
        assert (state["availability_zone"], state["cpu_allocation_ratio"]) == ("az1", 2.0)
        assert state["aggregates"] == [{"name": "rack1", "metadata": {"availability_zone": "az1",
                                                                      "cpu_allocation_ratio": "2.0"}}]
        assert state["free_ram_mb"] == state["total_usable_ram_mb"] - 1024 - sum(
            d["memory_mb"] for d in state["domains"])
        assert result["ansible_facts"]["berth_host_state"]["uuid"] == state["uuid"]
