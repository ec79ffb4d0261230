"""playbooks/check.yml on the lab fleet: every hypervisor ready; then one whose storage pool was
removed is told so, with how to mend it, and the others still pass."""

from __future__ import annotations

import pytest

from conftest import failed_messages, fleet, task_results

pytestmark = pytest.mark.integration


def test_the_check_finds_a_removed_storage_pool(lab):
    ready = lab.playbook("check.yml", "-e", f"check_networks={fleet.NETWORK_NAME}")
    assert ready["rc"] == 0, failed_messages(ready)
    summaries = sorted(result["msg"] for result in task_results(ready, "Ready"))
    assert len(summaries) == len(lab.hosts)
    assert all(": ready: connected to " in line and "storage pool 'default' active and autostarted" in line
               for line in summaries), summaries

    host = sorted(lab.hosts)[-1]
    lab.virsh(host, "pool-destroy", fleet.POOL_NAME)
    lab.virsh(host, "pool-undefine", fleet.POOL_NAME)
    try:
        missing = lab.playbook("check.yml", "-e", f"check_networks={fleet.NETWORK_NAME}")
    finally:
        # The lab's pool again, as lab/fleet.py made it (its volumes are still in the directory).
        lab.virsh(host, "pool-define-as", fleet.POOL_NAME, "dir", "--target", fleet.POOL_TARGET)
        lab.virsh(host, "pool-start", fleet.POOL_NAME)
        lab.virsh(host, "pool-autostart", fleet.POOL_NAME)
    assert missing["rc"] != 0
    (message,) = failed_messages(missing)
    assert message.startswith(f"{host} lacks what Berth needs: storage_pool: storage pool 'default' not found")
    assert "virsh pool-define-as default dir" in message
    assert missing["stats"][host]["failures"] == 1
    assert sorted(result["msg"].split(":")[0] for result in task_results(missing, "Ready")) == sorted(lab.hosts)[:-1]
