"""power.yml and resize.yml on the real lab fleet, through ansible-playbook: each verb with the
check-mode triplet (a dry run reports the change and changes nothing, the real run does it, a
dry run again reports nothing) and an idempotent second run; the graceful shutdown answered by
the lab guest's ACPI daemon and the one that times out (a guest booted with berth.acpi=ignore);
the tracker sync following a domain stopped behind Berth's back; resizes onto the same host and
onto another, and resizes that fail half way, which leave the old size running with its old
claim; and the progress lines, printed while a task still runs."""

from __future__ import annotations

import json
import re
import sqlite3

import check
import fleet
import pytest
from conftest import changed_count, drift, failed_messages, hooks_env, task_result

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 120
POWEROFF_MARKER = "BERTH-GUEST-POWEROFF"
FLAVORS = {"m1.tiny": (1, 512, 1), "m1.small": (1, 2048, 20), "m1.medium": (2, 4096, 40)}
# Bigger than m1.medium in memory and disk, and no more vCPUs than the lab's hosts have.
LARGE = {"name": "r.large", "vcpus": 2, "memory_mb": 8192, "root_gb": 60}


def row_of(lab, name: str, ledger_path: str | None = None) -> dict:
    [row] = [r for r in rows(ledger_path or lab.ledger_path, "instances") if r["name"] == name]
    return row


def rows(ledger_path: str, table: str) -> list[dict]:
    """Rows read with sqlite3 directly, not through Berth's own ledger code."""
    with sqlite3.connect(ledger_path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(f"SELECT * FROM {table} ORDER BY 1")]


def claims_of(ledger_path: str, instance_uuid: str) -> list[dict]:
    return [c for c in rows(ledger_path, "claims") if c["instance_uuid"] == instance_uuid]


def state(lab, host: str, uuid: str) -> str:
    return lab.virsh(host, "domstate", uuid).strip()


def sizes(lab, host: str, uuid: str) -> tuple[int, int]:
    """(vCPUs, memory MiB) of the domain's definition, as virsh reads them."""
    info = lab.virsh(host, "dominfo", uuid)
    vcpus = int(re.search(r"^CPU\(s\):\s+(\d+)", info, re.M).group(1))
    memory_kib = int(re.search(r"^Max memory:\s+(\d+) KiB", info, re.M).group(1))
    return vcpus, memory_kib // 1024


def root_capacity_gb(lab, host: str, uuid: str) -> int:
    info = lab.virsh(host, "vol-info", "--pool", "default", f"berth-{uuid}-root.qcow2", "--bytes")
    return int(re.search(r"^Capacity:\s+(\d+) bytes", info, re.M).group(1)) // 1024 ** 3


def serial_log(lab, host: str, name: str):
    return fleet.log_dir(lab.dir, host) / f"{name}.serial.log"


def forget_log(lab, host: str, name: str) -> None:
    """Remove the guest's serial log, so that the next QEMU started for it writes a new one (a
    QEMU already running keeps writing to the removed file): what a boot writes is then told
    apart from what the earlier one wrote."""
    serial_log(lab, host, name).unlink(missing_ok=True)


def booted(lab, host: str, name: str, uuid: str) -> bool:
    return check.wait_for_marker(serial_log(lab, host, name), uuid, BOOT_TIMEOUT_S)


def power(lab, name: str, wanted: str, *extra: str, check_mode: bool = False) -> dict:
    output = lab.playbook("power.yml", "-e", f"name={name}", "-e", f"state={wanted}", *extra, check=check_mode)
    assert output["rc"] == 0, failed_messages(output)
    return output


def power_result(output: dict) -> dict:
    [instance] = task_result(output, "Bring the instances to the state")["instances"]
    return instance


def triplet(lab, name: str, wanted: str, host: str, uuid: str, *extra: str) -> dict:
    """Dry run, real run, dry run again and a second real run of power.yml; returns the real
    run's result for the instance. The dry run must leave the domain as it was."""
    before = state(lab, host, uuid)
    dry = power(lab, name, wanted, *extra, check_mode=True)
    assert changed_count(dry) == 1 and state(lab, host, uuid) == before
    real = power(lab, name, wanted, *extra)
    assert changed_count(real) == 1
    again = power(lab, name, wanted, *extra, check_mode=True)
    assert changed_count(again) == 0, power_result(again)
    second = power(lab, name, wanted, *extra)
    assert changed_count(second) == 0, power_result(second)
    return power_result(real)


def test_power_verbs_keep_the_claim_and_the_ledger_follows(lab):
    launched = lab.playbook("launch.yml", "-e", "name=pwr", "-e", "count=1")
    assert launched["rc"] == 0, failed_messages(launched)
    row = row_of(lab, "pwr-1")
    host, uuid = row["host"], row["uuid"]
    claims = claims_of(lab.ledger_path, uuid)
    # The marker comes after the guest's init started its ACPI daemon.
    assert booted(lab, host, "pwr-1", uuid), "the guest did not boot"

    stopped = triplet(lab, "pwr", "stopped", host, uuid)
    assert (stopped["action"], stopped["shutdown"], stopped["state"]) == ("shut down", "graceful", "STOPPED")
    assert state(lab, host, uuid) == "shut off"
    assert POWEROFF_MARKER in serial_log(lab, host, "pwr-1").read_text(errors="replace")
    assert row_of(lab, "pwr-1")["state"] == "STOPPED"
    assert claims_of(lab.ledger_path, uuid) == claims  # the claim stays, as in Nova

    refused = lab.playbook("power.yml", "-e", "name=pwr", "-e", "state=paused")
    assert refused["rc"] != 0 and changed_count(refused) == 0
    assert "pwr-1 is shut off: only a running instance pauses" in " ".join(failed_messages(refused))
    assert task_result(refused, "Bring the instances to the state")["field"] == "state"

    # A stopped instance moves (cold) with its claim and stays stopped where it lands.
    moved = lab.playbook("migrate.yml", "-e", "instance=pwr-1")
    assert moved["rc"] == 0, failed_messages(moved)
    migration = task_result(moved, "Migrate the instance")
    assert (migration["mode"], migration["live_refused"]) == ("cold", "the domain is not running")
    host = migration["to_host"]
    assert (row_of(lab, "pwr-1")["host"], row_of(lab, "pwr-1")["state"], state(lab, host, uuid)) == (
        host, "STOPPED", "shut off")
    claims = claims_of(lab.ledger_path, uuid)
    assert [(c["hypervisor_uuid"], c["lease_expires_at"]) for c in claims] == [(fleet.host_uuid(lab.dir, host), None)]

    forget_log(lab, host, "pwr-1")
    started = triplet(lab, "pwr-1", "running", host, uuid)
    assert (started["action"], started["state"]) == ("start", "ACTIVE")
    assert state(lab, host, uuid) == "running" and booted(lab, host, "pwr-1", uuid)

    paused = triplet(lab, "pwr", "paused", host, uuid)
    assert (paused["action"], paused["state"], state(lab, host, uuid)) == ("pause", "PAUSED", "paused")
    resumed = triplet(lab, "pwr", "running", host, uuid)
    assert (resumed["action"], resumed["state"], state(lab, host, uuid)) == ("resume", "ACTIVE", "running")
    assert row_of(lab, "pwr-1")["state"] == "ACTIVE"

    # rebooted changes something on every run (as service state=restarted): no triplet, but the
    # dry run changes nothing and the real run starts a new QEMU that boots the guest again.
    domain_id = lab.virsh(host, "domid", uuid).strip()
    forget_log(lab, host, "pwr-1")
    dry = power(lab, "pwr", "rebooted", check_mode=True)
    assert changed_count(dry) == 1 and lab.virsh(host, "domid", uuid).strip() == domain_id
    rebooted = power_result(power(lab, "pwr", "rebooted"))
    assert (rebooted["action"], rebooted["shutdown"], rebooted["state"]) == ("reboot", "graceful", "ACTIVE")
    assert lab.virsh(host, "domid", uuid).strip() != domain_id
    assert booted(lab, host, "pwr-1", uuid), "the guest did not boot again"
    assert claims_of(lab.ledger_path, uuid) == claims

    # Behind Berth's back: the sync finds the domain off and the ledger follows it.
    lab.virsh(host, "destroy", uuid)
    report = drift(lab.gather())
    assert (f"pwr-1: ACTIVE in the ledger but its domain is shutoff on {host}: now STOPPED (the ledger follows the "
            f"domain's power state)") in report
    assert row_of(lab, "pwr-1")["state"] == "STOPPED" and claims_of(lab.ledger_path, uuid) == claims

    assert lab.playbook("delete.yml", "-e", "name=pwr")["rc"] == 0


def test_a_guest_that_ignores_the_power_button_is_powered_off_after_the_timeout(lab):
    ignoring = '{"berth_boot_cmdline": "console=ttyS0 berth.acpi=ignore"}'
    launched = lab.playbook("launch.yml", "-e", "name=pwi", "-e", "count=1", "-e", ignoring)
    assert launched["rc"] == 0, failed_messages(launched)
    row = row_of(lab, "pwi-1")
    host, uuid = row["host"], row["uuid"]
    assert booted(lab, host, "pwi-1", uuid), "the guest did not boot"

    stopped = triplet(lab, "pwi", "stopped", host, uuid, "-e", "shutdown_timeout=5")
    assert (stopped["shutdown"], stopped["state"], state(lab, host, uuid)) == ("powered off", "STOPPED", "shut off")
    assert POWEROFF_MARKER not in serial_log(lab, host, "pwi-1").read_text(errors="replace")
    assert lab.playbook("delete.yml", "-e", "name=pwi")["rc"] == 0


def test_progress_lines_appear_while_the_task_still_runs(lab):
    """The line announcing the wait for the guest is read while the task waits: the domain still
    runs then (this guest ignores the power button and the timeout is 120 s). The test then
    powers the domain off itself, which ends the wait as a guest shutting down would."""
    ignoring = '{"berth_boot_cmdline": "console=ttyS0 berth.acpi=ignore"}'
    launched = lab.playbook("launch.yml", "-e", "name=prg", "-e", "count=2", "-e", ignoring)
    assert launched["rc"] == 0, failed_messages(launched)
    placed = {name: row_of(lab, name) for name in ("prg-1", "prg-2")}
    # One line per instance at the default verbosity: when its domain started.
    for name, row in placed.items():
        assert f"{name} on {row['host']}: started" in launched["stderr"]
    assert "volume created" not in launched["stderr"]

    row = placed["prg-1"]
    proc = lab.start_playbook("power.yml", "-e", "name=prg-1", "-e", "state=stopped", "-e", "shutdown_timeout=120")
    try:
        waiting = f"prg-1 on {row['host']}: asking the guest to shut down (ACPI power button), waiting up to 120 s"
        seen = []
        for line in proc.stderr:
            seen.append(line.rstrip("\n"))
            if seen[-1] == waiting:
                break
        assert seen and seen[-1] == waiting, seen
        assert proc.poll() is None and state(lab, row["host"], row["uuid"]) == "running"
        lab.virsh(row["host"], "destroy", row["uuid"])
        output = lab.finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert output["rc"] == 0, failed_messages(output)
    assert f"prg-1 on {row['host']}: shut down by its guest" in output["stderr"]

    # -v prints every step of a build, in order.
    verbose = lab.playbook("launch.yml", "-e", "name=prg", "-e", "count=3", "-e", ignoring, "-v",
                           env_extra={"ANSIBLE_VERBOSE_TO_STDERR": "1"})
    assert verbose["rc"] == 0, failed_messages(verbose)
    third = row_of(lab, "prg-3")["host"]
    steps = [line.split(": ", 1)[1] for line in verbose["stderr"].splitlines()
             if line.startswith(f"prg-3 on {third}: ")]
    assert steps == ["volume created", "defined", "started"]

    moved = lab.playbook("migrate.yml", "-e", "instance=prg-2")
    assert moved["rc"] == 0, failed_messages(moved)
    result = task_result(moved, "Migrate the instance")
    source = placed["prg-2"]["host"]
    assert f"prg-2 on {source}: claimed {result['to_host']}" in moved["stderr"]
    assert f"prg-2 on {source}: moved to {result['to_host']} ({result['mode']})" in moved["stderr"]
    assert lab.playbook("delete.yml", "-e", "name=prg")["rc"] == 0


# ---- resize ----------------------------------------------------------------------------------------

class Fleet:
    """The lab with its own ledger and per-host reserved memory, through an inventory copy."""

    def __init__(self, lab, tmp_path, reserved_mb: dict[str, int]):
        self.lab, self.ledger_path = lab, str(tmp_path / "ledger.sqlite3")
        self.url = f"sqlite:///{self.ledger_path}"
        plain = lab.inventory_copy(tmp_path / "plain", self.url)
        self.run("gather.yml", inventory=plain)
        totals = {hv["name"]: hv["total_usable_ram_mb"] for hv in rows(self.ledger_path, "hypervisors")}
        self.reserve({host: totals[host] - free_mb for host, free_mb in reserved_mb.items()}, tmp_path / "shaped")

    def reserve(self, reserved: dict[str, int], directory) -> None:
        """Each host of ``reserved`` keeps that much memory back, synced into the ledger."""
        settings = {host: {"reserved_host_memory_mb": mb} for host, mb in reserved.items()}
        self.inventory = self.lab.inventory_copy(directory, self.url, settings)
        self.run("gather.yml")

    def run(self, playbook: str, *extra: str, check: bool = False, env: dict | None = None,
            inventory: str | None = None, ok: bool = True) -> dict:
        output = self.lab.finish(self.lab.start_playbook(playbook, *extra, *(["--check"] if check else []),
                                                         inventory=inventory or self.inventory, env=env))
        if ok:
            assert output["rc"] == 0, failed_messages(output)
        return output

    def resize(self, name: str, flavor: str | dict, check: bool = False, env: dict | None = None,
               ok: bool = True) -> dict:
        return self.run("resize.yml", "-e", json.dumps({"name": name, "flavor": flavor}), check=check, env=env, ok=ok)

    def row(self, name: str) -> dict:
        return row_of(self.lab, name, self.ledger_path)


def resized(output: dict) -> dict:
    [result] = task_result(output, "Resize each instance")["results"]
    return result


def assert_runs_as(fleet_: Fleet, name: str, flavor: str, host: str) -> dict:
    """The instance runs on ``host`` with ``flavor``'s sizes, the ledger agrees, its one claim
    holds the flavor's amounts without a lease, and no other host has a domain of it."""
    lab, row = fleet_.lab, fleet_.row(name)
    vcpus, memory_mb, root_gb = FLAVORS[flavor]
    assert (row["host"], row["flavor_name"], row["vcpus"], row["memory_mb"]) == (host, flavor, vcpus, memory_mb)
    assert state(lab, host, row["uuid"]) == "running"
    assert sizes(lab, host, row["uuid"]) == (vcpus, memory_mb)
    assert root_capacity_gb(lab, host, row["uuid"]) >= root_gb
    [claim] = claims_of(fleet_.ledger_path, row["uuid"])
    assert (claim["hypervisor_uuid"], claim["vcpus"], claim["memory_mb"], claim["disk_mb"],
            claim["lease_expires_at"]) == (fleet.host_uuid(lab.dir, host), vcpus, memory_mb, root_gb * 1024, None)
    for other in set(lab.hosts) - {host}:
        assert row["uuid"] not in lab.virsh(other, "list", "--all", "--uuid")
        assert row["uuid"] not in lab.virsh(other, "vol-list", "default")
    return row


def resize_triplet(fleet_: Fleet, name: str, flavor: str) -> tuple[dict, dict]:
    """Dry run (reports the change, predicts the host, changes nothing), real run, dry run again
    and a second real run (no change); returns (the dry run's result, the real run's)."""
    before = (fleet_.row(name), claims_of(fleet_.ledger_path, fleet_.row(name)["uuid"]))
    dry = fleet_.resize(name, flavor, check=True)
    assert changed_count(dry) == 1
    assert (fleet_.row(name), claims_of(fleet_.ledger_path, fleet_.row(name)["uuid"])) == before
    real = fleet_.resize(name, flavor)
    assert changed_count(real) == 1
    assert changed_count(fleet_.resize(name, flavor, check=True)) == 0
    assert changed_count(fleet_.resize(name, flavor)) == 0
    return resized(dry), resized(real)


def test_resize_on_its_own_host_then_onto_another_and_failures_leave_the_old_size(lab, tmp_path):
    # hv1 keeps 3072 MB for instances: an m1.tiny and then an m1.small (its own 512 MB given back)
    # fit there, an m1.medium does not.
    shaped = Fleet(lab, tmp_path, {"hv1": 3072})
    try:
        _resizes(lab, shaped, tmp_path)
    finally:
        shaped.run("delete.yml", "-e", "name=rsz", ok=False)
    assert not any(row["name"].startswith("rsz") for row in rows(shaped.ledger_path, "instances"))


def _resizes(lab, shaped: Fleet, tmp_path) -> None:
    launched = shaped.run("launch.yml", "-e", json.dumps({"name": "rsz", "flavor": "m1.tiny",
                                                          "berth_force_hosts": ["hv1"]}))
    row = assert_runs_as(shaped, "rsz-1", "m1.tiny", "hv1")
    assert booted(lab, "hv1", "rsz-1", row["uuid"]) and changed_count(launched) > 0

    forget_log(lab, "hv1", "rsz-1")
    dry, real = resize_triplet(shaped, "rsz-1", "m1.small")
    assert (dry["to_host"], dry["same_host"], real["to_host"], real["same_host"]) == ("hv1", True, "hv1", True)
    assert real["shutdown"] == "graceful"
    assert_runs_as(shaped, "rsz-1", "m1.small", "hv1")
    assert root_capacity_gb(lab, "hv1", row["uuid"]) == 20
    assert booted(lab, "hv1", "rsz-1", row["uuid"]), "the resized guest did not boot"

    dry, real = resize_triplet(shaped, "rsz-1", "m1.medium")
    assert dry["to_host"] != "hv1" and not dry["same_host"]
    assert dry["why"].startswith("hv1 has no room (insufficient RAM: needs 4096 MB")
    target = real["to_host"]
    assert target == dry["to_host"], "the dry run predicted the host"
    assert real["shutdown"] == "graceful"
    assert_runs_as(shaped, "rsz-1", "m1.medium", target)
    assert booted(lab, target, "rsz-1", row["uuid"]), "the guest did not boot on its new host"

    shrink = shaped.resize("rsz-1", "m1.small", ok=False)
    assert shrink["rc"] != 0 and changed_count(shrink) == 0
    assert "root_gb 20, less than rsz-1's 40 (m1.medium): a disk is never shrunk" in resized(shrink)["msg"]
    assert resized(shrink)["field"] == "flavor.root_gb"

    # A fault where the resized domain would start, on its own host: the old size runs again.
    failed = shaped.resize("rsz-1", LARGE, env=hooks_env(faults=[f"{target}:before-resize-start"]), ok=False)
    assert failed["rc"] != 0
    assert resized(failed)["msg"] == f"resize of rsz-1 failed and it has m1.medium again: {target}: injected fault " \
                                     f"at before-resize-start"
    assert_runs_as(shaped, "rsz-1", "m1.medium", target)
    assert root_capacity_gb(lab, target, row["uuid"]) == 40

    # The same onto another host: every other host but one keeps the large flavor out, and the
    # fault is where it would start there. The domain stays, running, where it was.
    others = sorted(set(lab.hosts) - {target})
    shaped.reserve({target: totals_less(shaped, target, 6000), others[0]: totals_less(shaped, others[0], 1024)},
                   tmp_path / "narrow")
    failed = shaped.resize("rsz-1", LARGE, env=hooks_env(faults=[f"{others[1]}:before-resize-start"]), ok=False)
    assert failed["rc"] != 0
    assert resized(failed)["msg"] == (f"resize of rsz-1 onto {others[1]} failed, it stays on {target} with m1.medium: "
                                      f"{others[1]}: injected fault at before-resize-start")
    assert_runs_as(shaped, "rsz-1", "m1.medium", target)

    deleted = shaped.run("delete.yml", "-e", "name=rsz")
    assert changed_count(deleted) > 0
    assert all(row["uuid"] not in lab.virsh(host, "list", "--all", "--uuid") for host in lab.hosts)


def totals_less(fleet_: Fleet, host: str, free_mb: int) -> int:
    """The reserved memory that leaves ``free_mb`` of ``host``'s memory for instances."""
    [hv] = [hv for hv in rows(fleet_.ledger_path, "hypervisors") if hv["name"] == host]
    return hv["total_usable_ram_mb"] - free_mb


@pytest.fixture(autouse=True)
def _no_leftovers(lab):
    """What a failed assertion left behind in the lab's ledger is deleted, so later tests start clean."""
    yield
    for name in ("pwr", "pwi", "prg"):
        lab.playbook("delete.yml", "-e", f"name={name}")
