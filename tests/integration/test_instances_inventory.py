"""berth.fleet.instances on the real lab fleet, through real ansible-playbook and ansible-inventory
runs: a play launches instances on the lab's libvirt networks and then reaches web-1 by name over
SSH at the address libvirt's DHCP leases give it; the inventory's groups and host variables; an
unreachable hypervisor; user-mode guests without an address; delete removes them; a guest whose
agent answers with what is not an address of its network never gets it as its ansible_host."""

from __future__ import annotations

import json
import subprocess
import time
import xml.etree.ElementTree as ET

import fleet
import pytest
from conftest import REPO, ansible_env, changed_count, failed_messages, task_results
from facts_helpers import LAB_POLICY

pytestmark = pytest.mark.integration

EXAMPLE = str(REPO / "examples" / "instances" / "launch_and_configure.yml")
NETWORKS = [{"type": "network", "name": fleet.NETWORK_NAME}]


def inventory(lab, *sources: str) -> tuple[dict, str]:
    """ansible-inventory --list of the lab's instances source (or ``sources``): (hosts and
    groups as JSON, its stderr)."""
    sources = sources or (str(fleet.instances_inventory_dir(lab.dir)),)
    command = [str(REPO / ".venv" / "bin" / "ansible-inventory"), *[arg for source in sources for arg in ("-i", source)],
               "--list", "--export"]
    done = subprocess.run(command, cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def group(listing: dict, name: str) -> list[str]:
    return sorted(listing.get(name, {}).get("hosts", []))


def plain(value):
    """A host variable as ansible-inventory exports it, with unsafe strings unwrapped."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def leased_address(lab, host: str, domain: str) -> str:
    """The address the lab network's dnsmasq leased to the domain's NIC, as virsh reports it."""
    mac = ET.fromstring(lab.virsh(host, "dumpxml", domain)).find("devices/interface/mac").get("address")
    for line in lab.virsh(host, "net-dhcp-leases", fleet.NETWORK_NAME).splitlines():
        fields = line.split()
        if mac in fields:
            return fields[fields.index(mac) + 2].split("/")[0]
    raise AssertionError(f"no lease for {domain} ({mac}) on {host}")


def test_a_play_launches_then_reaches_web_1_by_name_over_ssh_and_delete_removes_them(lab, tmp_path):
    lab.keep_synced((), None)  # the ledger knows each hypervisor's network
    lab.server_group("inv-spread", "present")
    request = {"server_name": "inv", "count": 2, "flavor": "m1.tiny", "networks": NETWORKS, "server_group": "inv-spread",
               "metadata": {"role": "front"}}
    instances_dir = str(fleet.instances_inventory_dir(lab.dir))
    try:
        run = lab.finish(lab.start_playbook(EXAMPLE, "-i", instances_dir, "-e", json.dumps(request)))
        assert run["rc"] == 0, failed_messages(run) or run["stderr"]
        rows = {row["name"]: row for row in lab.ledger_rows("instances") if row["name"].startswith("inv-")}
        assert sorted(rows) == ["inv-1", "inv-2"] and {row["state"] for row in rows.values()} == {"ACTIVE"}

        # The play after the launch ran on inv-1, by name, over SSH to the guest itself: the guest
        # answered with its own SMBIOS UUID, which is the instance's.
        checked = task_results(run, "Check that this is the guest the ledger says (its SMBIOS UUID is the instance UUID)")
        assert len(checked) == 1 and not checked[0].get("failed")
        assert checked[0]["stdout"].strip().lower() == rows["inv-1"]["uuid"]
        shown = task_results(run, "Show where it runs")[0]["msg"]
        assert f"inv-1 ({rows['inv-1']['uuid']}) runs on {rows['inv-1']['host']}" in shown and "(from lease)" in shown

        listing, _stderr = inventory(lab)
        hostvars = {name: plain(listing["_meta"]["hostvars"][name]) for name in rows}
        assert {"inv-1", "inv-2"} <= set(group(listing, "berth_instances"))
        for name, row in rows.items():
            assert name in group(listing, f"hypervisor_{row['host']}")
            for grouping in ("flavor_m1_tiny", "state_active", "project_default", "server_group_inv_spread"):
                assert name in group(listing, grouping), grouping
            variables = hostvars[name]
            instance = variables["berth_instance"]
            assert (instance["uuid"], instance["host"], instance["state"], instance["flavor"]) == (
                row["uuid"], row["host"], "ACTIVE", "m1.tiny")
            assert instance["server_group"] == {"name": "inv-spread", "policy": "anti-affinity"}
            assert instance["metadata"] == {"role": "front"}  # from the domain's Berth metadata
            assert variables["berth_domain"]["state"] == "running"
            assert variables["berth_domain"]["interfaces"][0]["source"] == fleet.NETWORK_NAME
            assert variables["berth_address_source"] == "lease"
            assert variables["ansible_host"] == leased_address(lab, row["host"], name)
        # Anti-affinity: two hypervisors, so one stopped daemon leaves the other instance's address.
        assert rows["inv-1"]["host"] != rows["inv-2"]["host"]

        # A second run of the same play changes nothing.
        again = lab.finish(lab.start_playbook(EXAMPLE, "-i", instances_dir, "-e", json.dumps(request)))
        assert again["rc"] == 0, failed_messages(again)
        assert changed_count(again) == 0

        # One hypervisor that does not answer: named in a warning, its instance listed without an
        # address, the rest whole.
        down = rows["inv-1"]["host"]
        lab.stop_daemon(down)
        try:
            listing, stderr = inventory(lab)
        finally:
            lab.start_daemon(down)
        assert f"hypervisor {down} did not answer" in " ".join(stderr.split())
        first, second = (plain(listing["_meta"]["hostvars"][name]) for name in ("inv-1", "inv-2"))
        assert "ansible_host" not in first and first["berth_address_source"] == "unknown"
        assert first["berth_instance"]["uuid"] == rows["inv-1"]["uuid"]
        assert second["ansible_host"] == hostvars["inv-2"]["ansible_host"]

        # The ledger alone: no hypervisor contacted, no address.
        source = tmp_path / "ledger_only.berth_instances.yml"
        source.write_text(f"plugin: berth.fleet.instances\nledger_url: sqlite:///{lab.ledger_path}\n"
                          "contact_hypervisors: false\n" + LAB_POLICY)
        listing, _stderr = inventory(lab, str(source))
        only = plain(listing["_meta"]["hostvars"]["inv-1"])
        assert "ansible_host" not in only and only["berth_address_source"] == "unknown"
        assert only["berth_instance"]["host"] == rows["inv-1"]["host"] and only["berth_instance"]["metadata"] is None
    finally:
        deleted = lab.playbook("delete.yml", "-e", "server_name=inv")
        lab.server_group("inv-spread", "absent")
    assert deleted["rc"] == 0, failed_messages(deleted)
    listing, _stderr = inventory(lab)
    assert not {"inv-1", "inv-2"} & set(listing["_meta"]["hostvars"])
    assert "server_group_inv_spread" not in listing


def test_a_user_mode_guest_is_listed_without_an_address_and_says_why(lab):
    launched = lab.playbook("launch.yml", "-e", json.dumps({"server_name": "slirp", "networks": [{"type": "user"}]}))
    assert launched["rc"] == 0, failed_messages(launched)
    try:
        listing, _stderr = inventory(lab)
        variables = plain(listing["_meta"]["hostvars"]["slirp-1"])
        assert "ansible_host" not in variables
        assert variables["berth_address_source"] == "none"
        assert "user-mode networking only" in variables["berth_address_reason"]
        assert variables["berth_domain"]["interfaces"][0]["type"] == "user"
    finally:
        assert lab.playbook("delete.yml", "-e", "server_name=slirp")["rc"] == 0


# What a hostile guest's agent answers (lab/guest.py's berth.agent=): an SSH option, an address
# outside the lab's networks, and its own DHCP address, in that order.
HOSTILE_AGENT_ANSWER = ["-oProxyCommand=/bin/false", "192.0.2.1", "own"]


def test_a_guest_agent_answer_that_is_not_an_address_of_its_network_never_becomes_ansible_host(lab, tmp_path):
    lab.keep_synced((), None)
    hostile = ",".join(HOSTILE_AGENT_ANSWER)
    for name, answer in (("liar", hostile), ("liar-bare", hostile.removesuffix(",own"))):
        launched = lab.playbook("launch.yml", "-e", json.dumps({"server_name": name, "networks": NETWORKS}),
                                "-e", json.dumps({"berth_boot_cmdline": f"console=ttyS0 berth.agent={answer}"}))
        assert launched["rc"] == 0, failed_messages(launched)
    try:
        row = next(row for row in lab.ledger_rows("instances") if row["name"] == "liar-1")
        # The default sources (the lab's source waits for DHCP leases): the hypervisor's lease
        # wins over whatever the agent says.
        listing, _stderr = inventory(lab)
        own = leased_address(lab, row["host"], "liar-1")
        default = plain(listing["_meta"]["hostvars"]["liar-1"])
        assert (default["berth_address_source"], default["ansible_host"]) == ("lease", own)

        # The agent alone: the guest's own address is kept, the rest refused.
        source = tmp_path / "agent_only.berth_instances.yml"
        source.write_text(f"plugin: berth.fleet.instances\nledger_url: sqlite:///{lab.ledger_path}\n"
                          "address_sources: [agent]\n" + "\n".join(fleet.LAB_URI_POLICY) + "\n")
        deadline = time.monotonic() + 60
        while True:  # the lab guest's agent loop starts beside its DHCP client
            listing, _stderr = inventory(lab, str(source))
            variables = plain(listing["_meta"]["hostvars"]["liar-1"])
            if variables["berth_address_source"] == "agent" or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert variables["berth_address_source"] == "agent", variables.get("berth_address_reason")
        assert variables["ansible_host"] == own
        assert [address["address"] for address in variables["berth_addresses"]] == [own]
        assert "ProxyCommand" not in json.dumps(variables)

        # A guest whose agent says only the hostile values has no address, and says why.
        bare = plain(listing["_meta"]["hostvars"]["liar-bare-1"])
        assert "ansible_host" not in bare and bare["berth_address_source"] == "none"
        assert "is not an IP address" in bare["berth_address_reason"]
        assert "192.0.2.1 is outside the networks of interface" in bare["berth_address_reason"]
    finally:
        assert lab.playbook("delete.yml", "-e", "server_name=liar")["rc"] == 0
        assert lab.playbook("delete.yml", "-e", "server_name=liar-bare")["rc"] == 0
