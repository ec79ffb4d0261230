"""Controller-side refusals are never charged to the hosts (issue 34, item 5), on the real lab
fleet through ansible-playbook: a launch run with a URI policy that refuses the lab's URIs (they
need socket=, which -e berth_uri_policy here does not allow, as a launch without the inventory's
policy would) fails once, before anything is claimed: no instance (no ERROR one), no claim, no
domain, and no host's failed-build count moved, which BuildFailureWeigher would weigh at
-1,000,000. With the inventory's policy the same launch builds. The operations' own tests:
tests/unit/plugins/plugin_utils/operations/test_controller_refusals.py."""

from __future__ import annotations

import json

import pytest
from conftest import failed_messages, remove_all_domains, task_result

pytestmark = pytest.mark.integration


def run(lab, playbook: str, inventory: str, *extra: str) -> dict:
    return lab.finish(lab.start_playbook(playbook, *extra, inventory=inventory))


def test_a_launch_whose_uri_policy_refuses_the_hosts_fails_once_and_charges_no_host(lab, tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, f"sqlite:///{ledger}", guest_os=False)
    try:
        assert run(lab, "gather.yml", inventory)["rc"] == 0
        # Every host once failed a build: the refusal must not add to any count.
        lab.ledger_execute(str(ledger), "UPDATE hypervisors SET failed_builds = 1")

        refused = run(lab, "launch.yml", inventory, "-e",
                      json.dumps({"server_name": "refused", "berth_uri_policy": {"allow_parameters": []}}))
        assert refused["rc"] != 0
        [message] = failed_messages(refused)
        assert message.startswith("nothing was claimed, and no host is charged a failed build: this controller "
                                  "refuses to build refused-1 on hv"), message
        assert "its URI is refused by Berth's URI policy: parameter socket= picks the unix socket" in message
        # Once: the launch task's one failure, no build tried on any host.
        assert task_result(refused, "Launch the instances")["results"] == []
        assert lab.ledger_rows("instances", str(ledger)) == []
        assert lab.ledger_rows("claims", str(ledger)) == []
        assert {row["name"]: row["failed_builds"] for row in lab.ledger_rows("hypervisors", str(ledger))} == {
            name: 1 for name in lab.hosts}
        # Each host it was placed on refused, it decided again without it, until none was left.
        assert sorted(row["outcome"] for row in lab.ledger_rows("decisions", str(ledger))) == [
            "no_valid_host", *["refused"] * len(lab.hosts)]
        for host in lab.hosts:
            assert "refused-1" not in lab.virsh(host, "list", "--all", "--name").split()

        # The inventory's own policy (berth_uri_policy set by its source): the same launch builds.
        built = run(lab, "launch.yml", inventory, "-e", "server_name=refused")
        assert built["rc"] == 0, failed_messages(built)
        [row] = lab.ledger_rows("instances", str(ledger))
        assert (row["name"], row["state"]) == ("refused-1", "ACTIVE")
        assert lab.virsh(row["host"], "domstate", row["uuid"]).strip() == "running"
    finally:
        remove_all_domains(lab)
