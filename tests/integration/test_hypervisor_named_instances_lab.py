"""An instance never takes over a hypervisor's inventory host (issue 34, item 3), on the real lab
fleet through ansible-playbook, with the lab's hv1 named hv-1 in an inventory of its own:

- a launch with server_name=hv (which makes hv-1) is refused, naming the hypervisor, and claims
  nothing;
- an instance named hv-1 planted in that ledger (the launch refuses to make one: a real guest,
  launched under another name and renamed in the ledger, as an older Berth or another writer of
  the ledger could leave it) has an address of its own, and still a play over the hypervisors with
  the instances source beside the hypervisors source reaches hv-1 as the hypervisor, and the run
  warns that the instance is not listed.

The operations' and the plugin's own tests:
tests/unit/plugins/plugin_utils/operations/test_hypervisor_named_instances.py and
tests/unit/plugins/inventory/test_instances.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import fleet
import pytest
from conftest import REPO, ansible_env, failed_messages, task_results

pytestmark = pytest.mark.integration

NETWORKS = [{"type": "network", "name": fleet.NETWORK_NAME}]


def run(lab, playbook: str, inventory: str, *extra: str) -> dict:
    return lab.finish(lab.start_playbook(playbook, *extra, inventory=inventory))


def renamed_inventory(lab, directory: Path, ledger_url: str) -> str:
    """A copy of the lab's inventory whose hypervisor hv1 is named hv-1 (the same daemon)."""
    inventory = lab.inventory_copy(directory, ledger_url)
    source_path = Path(inventory) / "fleet.berth.yml"
    source = json.loads(source_path.read_text())
    source["hypervisors"]["hv-1"] = source["hypervisors"].pop("hv1")
    source_path.write_text(json.dumps(source, indent=1) + "\n")
    return inventory


def instances_source(directory: Path, ledger_url: str) -> str:
    """A berth.fleet.instances source on that ledger, waiting for the guests' DHCP leases."""
    source = directory / "instances" / "fleet.berth_instances.yml"
    source.parent.mkdir()
    source.write_text(f"plugin: berth.fleet.instances\nledger_url: {ledger_url}\n"
                      "uri_policy: {allow_parameters: [socket]}\nwait_for_addresses: 120\n")
    return str(source.parent)


def listed(*sources: str) -> tuple[dict, str]:
    done = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-inventory"),
                           *[arg for source in sources for arg in ("-i", source)], "--list"],
                          cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def plain(value):
    """A string as ansible-inventory prints it, unsafe or not."""
    return value["__ansible_unsafe"] if isinstance(value, dict) else value


def test_an_instance_named_as_a_hypervisor_is_refused_and_never_takes_over_its_host(lab, tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    url = f"sqlite:///{ledger}"
    inventory = renamed_inventory(lab, tmp_path, url)
    instances = instances_source(tmp_path, url)
    try:
        assert run(lab, "gather.yml", inventory)["rc"] == 0
        assert {row["name"] for row in lab.ledger_rows("hypervisors", str(ledger))} == {"hv-1", "hv2", "hv3"}

        # A survey's server_name=hv makes hv-1: refused, naming the hypervisor, nothing claimed.
        refused = run(lab, "launch.yml", inventory, "-e", "server_name=hv")
        assert refused["rc"] != 0
        assert failed_messages(refused) == ["instance name hv-1 is refused: hv-1 is a hypervisor of the fleet, and an "
                                            "inventory of both would take the instance for it; choose another name"]
        assert lab.ledger_rows("instances", str(ledger)) == [] and lab.ledger_rows("claims", str(ledger)) == []

        # An instance hv-1 all the same, with a guest that has an address.
        planted = run(lab, "launch.yml", inventory, "-e",
                      json.dumps({"server_name": "plant", "networks": NETWORKS, "berth_force_hosts": ["hv2"]}))
        assert planted["rc"] == 0, failed_messages(planted)
        lab.ledger_execute(str(ledger), "UPDATE instances SET name = 'hv-1' WHERE name = 'plant-1'")
        alone, _stderr = listed(instances)
        guest_address = plain(alone["_meta"]["hostvars"]["hv-1"]["ansible_host"])
        assert guest_address.startswith("10.2")

        # The hypervisors' source, then the instances' (as examples/instances shows them): the play
        # over the hypervisors reaches hv-1 as the hypervisor, and the run says why the instance
        # is not listed.
        play = run(lab, "../tests/integration/playbooks/hypervisor_hosts.yml", inventory, "-i", instances)
        assert play["rc"] == 0, failed_messages(play)
        seen = {result["msg"]["berth_libvirt_uri"]: result["msg"]
                for result in task_results(play, "Where each hypervisor is reached")}
        hv1 = seen[lab.hosts["hv1"]["uri"]]
        # Ansible's own default address (its inventory name): nobody set one.
        assert hv1["ansible_host"] == "hv-1" and hv1["berth_instance"] is False
        assert guest_address not in json.dumps(seen)
        assert ("berth.fleet.instances: instance hv-1 is not listed: the inventory has a host of that name already"
                in " ".join(play["stderr"].split()))
        both, _stderr = listed(inventory, instances)
        assert "hv-1" not in both.get("berth_instances", {}).get("hosts", [])
        assert "hv-1" in both["hypervisors"]["hosts"]
    finally:
        lab.ledger_execute(str(ledger), "UPDATE instances SET name = 'plant-1' WHERE name = 'hv-1'")
        deleted = run(lab, "delete.yml", inventory, "-e", "server_name=plant")
    assert deleted["rc"] == 0, failed_messages(deleted)
