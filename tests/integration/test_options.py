"""The option model through real ansible-playbook runs, on a real SQLite file and a real
PostgreSQL database: a size over its limit leaves the ledger as it was (no decision, no
instance, no claim), a hypervisor whose facts no 32-bit column holds is synced as down, and
module_defaults for group/berth.fleet.ledger reach the actions.

No libvirt daemon is needed: the ledger is given two hypervisors by a tracker sync of host states
written here, which is all a launch decides from, and gather.yml reads libvirt's test driver.
Nothing is ever built: every launch here fails before its claim, or is a check-mode run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, ansible_env, failed_messages
from facts_helpers import run_playbook
from sqlalchemy import create_engine, text

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

pytestmark = pytest.mark.integration

TABLES = ("decisions", "instances", "claims")
SMALL = {"name": "small", "vcpus": 1, "memory_mb": 512, "root_gb": 1}


def synced_ledger(url: str) -> None:
    """Two hypervisors of 8 CPUs, 16 GiB and 100 GiB each, as a tracker sync records them."""
    ledger = Ledger(url).open()
    try:
        ledger.tracker_sync([{
            "host": f"hv{n}", "nodename": f"hv{n}", "uuid": f"00000000-0000-4000-8000-00000000000{n}",
            "service_up": True, "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 16384,
            "free_ram_mb": 15872, "total_usable_disk_gb": 100, "free_disk_mb": 102400, "num_instances": 0,
            "num_io_ops": 0, "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0,
            "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0,
            "supported_instances": [["x86_64", "qemu", "hvm"]], "domains": [], "images": [], "networks": [],
            "uri": f"qemu+ssh://hv{n}.invalid/system"} for n in (1, 2)])
    finally:
        ledger.close()


def counts(url: str) -> dict[str, int]:
    """Rows per table, read with plain SQL (not Berth's ledger code)."""
    engine = create_engine(url)
    try:
        with engine.connect() as db:
            return {table: db.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar() for table in TABLES}
    finally:
        engine.dispose()


def run(playbook: Path, extra: dict, tmp_path: Path) -> dict:
    """ansible-playbook with no inventory but localhost; the default ledger is a file of
    tmp_path, so a run that missed its ledger_url would be seen writing there."""
    env = {**ansible_env(), "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop("BERTH_LEDGER_URL", None)
    return run_playbook(playbook, "localhost,", "-c", "local", "-e", json.dumps(extra), env=env)


SCHEDULE_ONLY = """
- name: Schedule without the launch's request check
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Schedule
      berth.fleet.schedule:
        name: big
        flavor: "{{ flavor }}"
        count: "{{ count | default(1) }}"
        lease_seconds: "{{ lease_seconds | default(3600) }}"
        scheduler_hints: "{{ scheduler_hints | default({}) }}"
        ledger_url: "{{ berth_ledger_url }}"
"""

# (what is over its limit, extra vars, the field the error names)
OVER = [
    ("memory", {"flavor": {**SMALL, "memory_mb": 1000000000000}}, "flavor.memory_mb: 1000000000000 is over the limit "
                                                                  "of 4194304 MiB (4 TiB)"),
    ("vcpus", {"flavor": {**SMALL, "vcpus": 4096}}, "flavor.vcpus: 4096 is over the limit of 1024 vCPUs"),
    ("root disk", {"flavor": {**SMALL, "root_gb": 2**31}}, "flavor.root_gb: 2147483648 is over the limit"),
    ("count", {"flavor": SMALL, "count": 1001}, "count: 1001 is over the limit of 1000 instances"),
    ("lease", {"flavor": SMALL, "lease_seconds": 10**12}, "lease_seconds: 1000000000000 is over the limit"),
    ("hints", {"flavor": SMALL, "scheduler_hints": {"query": "x" * 70000}}, "scheduler_hints: 70013 bytes is over"),
]


@pytest.mark.parametrize("what, extra, message", OVER, ids=[case[0] for case in OVER])
def test_a_size_over_its_limit_leaves_no_decision_instance_or_claim(tmp_path, ledger_url, what, extra, message):
    synced_ledger(ledger_url)
    playbook = tmp_path / "schedule.yml"
    playbook.write_text(SCHEDULE_ONLY)
    output = run(playbook, {**extra, "berth_ledger_url": ledger_url}, tmp_path)
    assert output["rc"] != 0
    assert [msg for msg in failed_messages(output) if message in msg], failed_messages(output)
    assert counts(ledger_url) == {table: 0 for table in TABLES}
    assert not (tmp_path / "state").exists()


def test_the_launch_refuses_an_oversized_flavor_in_its_first_task(tmp_path, ledger_url):
    synced_ledger(ledger_url)
    extra = {"name": "big", "flavor": {**SMALL, "memory_mb": 1000000000000}, "berth_ledger_url": ledger_url}
    output = run(REPO / "playbooks" / "launch.yml", extra, tmp_path)
    assert output["rc"] != 0
    [failed] = [task for play in output["plays"] for task in play["tasks"]
                if any(result.get("failed") for result in task["hosts"].values())]
    assert failed["task"] == "Launch the instances"
    result = failed["hosts"]["localhost"]
    assert result["field"] == "flavor.memory_mb"
    assert result["msg"] == "flavor.memory_mb: 1000000000000 is over the limit of 4194304 MiB (4 TiB)"
    assert counts(ledger_url) == {table: 0 for table in TABLES}


def test_a_flavor_at_the_limit_is_decided_and_recorded(tmp_path, ledger_url):
    """The same run with the largest flavor allowed reaches the decision (no host has 4 TiB,
    so no valid host) and records it: what the runs above would have done without the limits."""
    synced_ledger(ledger_url)
    playbook = tmp_path / "schedule.yml"
    playbook.write_text(SCHEDULE_ONLY)
    output = run(playbook, {"flavor": {**SMALL, "memory_mb": 4194304}, "berth_ledger_url": ledger_url}, tmp_path)
    assert output["rc"] != 0
    assert any(msg.startswith("no valid host") for msg in failed_messages(output)), failed_messages(output)
    assert counts(ledger_url) == {"decisions": 1, "instances": 0, "claims": 0}


MODULE_DEFAULTS = """
- name: Set the ledger once for the play
  hosts: localhost
  gather_facts: false
  module_defaults:
    group/berth.fleet.ledger:
      ledger_url: "{{ berth_ledger_url }}"
  tasks:
    - name: Create a server group
      berth.fleet.server_group:
        name: web
        policy: anti-affinity

    - name: Read the groups
      berth.fleet.ledger_info:
        what: server_groups
      register: listed

    - name: Plan a launch
      berth.fleet.schedule:
        name: web
        flavor: m1.tiny
        count: 2
        server_group: web
      check_mode: true
      register: plan

    - name: Show them
      ansible.builtin.debug:
        msg: "{{ listed.server_groups | map(attribute='name') | list }} {{ plan.placements | length }}"
"""


def test_module_defaults_of_the_ledger_group_reach_every_action(tmp_path, ledger_url, request):
    synced_ledger(ledger_url)
    playbook = tmp_path / "defaults.yml"
    playbook.write_text(MODULE_DEFAULTS)
    output = run(playbook, {"berth_ledger_url": ledger_url}, tmp_path)
    assert output["rc"] == 0, failed_messages(output)
    shown = [result["msg"] for play in output["plays"] for task in play["tasks"] if task["task"] == "Show them"
             for result in task["hosts"].values()]
    assert shown == ["['web'] 2"]
    engine = create_engine(ledger_url)
    try:
        with engine.connect() as db:
            assert db.execute(text("SELECT name, policy FROM server_groups")).all() == [("web", "anti-affinity")]
    finally:
        engine.dispose()
    # The default ledger (under XDG_STATE_HOME) was never opened: every task used the group's.
    assert not (tmp_path / "state").exists()
    if "postgresql" in ledger_url:
        password = request.getfixturevalue("postgres").password
        assert password not in json.dumps(output)


def node_xml(memory_kib: int) -> str:
    """A libvirt test-driver hypervisor (TESTBED.md): 4 CPUs, ``memory_kib`` of memory, no domain."""
    return (f"<node><cpu><mhz>2400</mhz><model>Haswell</model><active>4</active><max>4</max><nodes>1</nodes>"
            f"<sockets>1</sockets><cores>2</cores><threads>2</threads></cpu><memory>{memory_kib}</memory>"
            "<pool type='dir'><name>default</name><target><path>/p</path></target></pool></node>")


def test_a_huge_test_driver_hypervisor_is_synced_as_down_with_why(tmp_path, ledger_url):
    """gather.yml through the real inventory plugin: a node reporting an exbibyte of memory, which
    no 32-bit column holds, is recorded as down with the reason; the sync of the others goes on."""
    node = tmp_path / "huge.xml"
    node.write_text(node_xml(8 * 1024 * 1024))
    (tmp_path / "sane.xml").write_text(node_xml(8 * 1024 * 1024))
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "fleet.berth.yml").write_text(json.dumps({
        "plugin": "berth.fleet.hypervisors", "storage_pool": "default", "uri_policy": {"allow_test_files": True},
        "hypervisors": {"huge": {"uri": f"test://{node}"}, "sane": {"uri": f"test://{tmp_path}/sane.xml"}}}))
    (inventory / "group_vars" / "all.yml").write_text(f"berth_ledger_url: {json.dumps(ledger_url)}\n")

    def gather() -> dict:
        env = {**ansible_env(), "XDG_STATE_HOME": str(tmp_path / "state")}
        env.pop("BERTH_LEDGER_URL", None)
        return run_playbook(REPO / "playbooks" / "gather.yml", inventory, env=env)

    assert gather()["rc"] == 0
    node.write_text(node_xml(2**50))  # KiB: an exbibyte
    output = gather()
    assert output["rc"] == 0, failed_messages(output)
    engine = create_engine(ledger_url)
    try:
        with engine.connect() as db:
            rows = {row.name: row for row in db.execute(text(
                "SELECT name, sync_status, down_reason, total_usable_ram_mb FROM hypervisors"))}
    finally:
        engine.dispose()
    assert rows["sane"].sync_status == "up"
    assert rows["huge"].sync_status == "down"
    assert rows["huge"].down_reason == ("its facts are out of the ledger's range: total_usable_ram_mb: 1099511627776 is "
                                        "over the limit of 67108864 MiB (64 TiB)")
    assert rows["huge"].total_usable_ram_mb == 8192  # its last sane sync stays
