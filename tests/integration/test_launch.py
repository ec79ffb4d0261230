"""Launch and delete with the real playbooks on a real 3-hypervisor lab fleet."""

from __future__ import annotations

import re

import check
import fleet
import pytest
from conftest import changed_count, cpu_line, failed_messages

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 120


def domains_by_host(lab) -> dict[str, dict[str, str]]:
    """{host: {domain name: domain uuid}} as each daemon's virsh reports it."""
    found = {}
    for host in lab.hosts:
        names = lab.virsh(host, "list", "--all", "--name").split()
        found[host] = {name: lab.virsh(host, "domuuid", name).strip() for name in names}
    return found


def test_launch_is_placed_booted_idempotent_and_deleted(lab):
    launch = ("-e", "name=web", "-e", "flavor=m1.tiny", "-e", "count=3")

    first = lab.playbook("launch.yml", *launch)
    assert first["rc"] == 0, failed_messages(first) or first["stderr"]
    assert changed_count(first) > 0

    instances = lab.ledger_rows("instances")
    claims = lab.ledger_rows("claims")
    assert sorted(row["name"] for row in instances) == ["web-1", "web-2", "web-3"]
    assert all(row["state"] == "ACTIVE" for row in instances)
    assert {claim["instance_uuid"] for claim in claims} == {row["uuid"] for row in instances}
    # Three equal hosts and the RAM weigher spreading: one instance on each.
    assert sorted(row["host"] for row in instances) == sorted(lab.hosts)

    domains = domains_by_host(lab)
    for row in instances:
        on_host = domains[row["host"]]
        assert on_host.get(row["name"]) == row["uuid"], f"{row['name']} is not on {row['host']}"
        assert lab.virsh(row["host"], "domstate", row["name"]).strip() == "running"
        for other in set(lab.hosts) - {row["host"]}:
            assert row["name"] not in domains[other]
        # The ledger's hypervisor for the claim is the libvirt host UUID of that daemon.
        claim = next(c for c in claims if c["instance_uuid"] == row["uuid"])
        capabilities = lab.virsh(row["host"], "capabilities")
        assert f"<uuid>{claim['hypervisor_uuid']}</uuid>" in capabilities

    # Each guest's kernel got its own instance UUID on its command line and printed it.
    for row in instances:
        log = fleet.log_dir(lab.dir, row["host"]) / f"{row['name']}.serial.log"
        assert check.wait_for_marker(log, row["uuid"], BOOT_TIMEOUT_S), f"{row['name']} printed no boot marker"
        # Each marker line is written once: the CPU line, which the guest prints once a boot, is
        # in this boot's part of the log once (the log of a name is appended to by each guest of
        # that name; each boot begins with the kernel's banner).
        line = cpu_line(log, BOOT_TIMEOUT_S)
        this_boot = log.read_text(errors="replace").rsplit("Linux version", 1)[-1]
        assert this_boot.count(line) == 1, this_boot
    assert len({row["uuid"] for row in instances}) == 3

    second = lab.playbook("launch.yml", *launch)
    assert second["rc"] == 0, failed_messages(second)
    assert changed_count(second) == 0
    assert domains_by_host(lab) == domains
    assert lab.ledger_rows("instances") == instances
    assert lab.ledger_rows("claims") == claims

    deleted = lab.playbook("delete.yml", "-e", "name=web")
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert changed_count(deleted) > 0
    assert domains_by_host(lab) == {host: {} for host in lab.hosts}
    for host in lab.hosts:
        volumes = lab.virsh(host, "vol-list", "default")
        assert "berth-" not in volumes, volumes
    assert lab.ledger_rows("instances") == []
    assert lab.ledger_rows("claims") == []

    again = lab.playbook("delete.yml", "-e", "name=web")
    assert again["rc"] == 0 and changed_count(again) == 0


def test_request_that_cannot_fit_fails_before_anything_is_defined(lab):
    # Every lab host reports this machine's memory; ask for more than any has free (reserved
    # memory counts as used) but not more than its total, so the RAM limit is what refuses it.
    with open("/proc/meminfo") as meminfo:
        total_mb = int(re.search(r"MemTotal:\s+(\d+)", meminfo.read()).group(1)) // 1024
    flavor = f'{{"flavor": {{"vcpus": 1, "memory_mb": {total_mb - 100}, "root_gb": 1}}}}'

    result = lab.playbook("launch.yml", "-e", "name=huge", "-e", flavor)

    assert result["rc"] != 0
    message = " ".join(failed_messages(result))
    assert "0/3 hosts are available" in message
    assert re.search(r"3 insufficient RAM \(needs \d+ MB, most free -?\d+ MB\)", message), message
    for host in lab.hosts:
        assert f"{host}: insufficient RAM: needs {total_mb - 100} MB" in message
    assert domains_by_host(lab) == {host: {} for host in lab.hosts}
    assert [row for row in lab.ledger_rows("instances") if row["name"].startswith("huge")] == []
    assert lab.ledger_rows("claims") == []


def test_a_launch_that_names_no_instances_fails_saying_how_to_name_them(lab):
    claims = lab.ledger_rows("claims")
    unnamed = lab.playbook("launch.yml", "-e", "flavor=m1.tiny")
    assert unnamed["rc"] != 0
    assert any("server_name is required: -e server_name=web launches web-1 .. web-<count>" in message
               for message in failed_messages(unnamed)), failed_messages(unnamed)
    assert lab.ledger_rows("claims") == claims
