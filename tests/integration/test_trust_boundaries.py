"""Trust boundaries on the real lab fleet (issue 22): a ledger row is not the operator's word.

- A hypervisor row whose URI someone rewrote to ``qemu+ext:///system?command=<program>`` makes
  launch, delete, power, adopt and the instances inventory refuse with the reason, and the
  program never runs.
- Two lab hypervisors made to report one host UUID are an identity conflict: the second is
  refused and named, no instance is forgotten, and delete.yml still removes the domain where it
  runs.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess

import fleet
import pytest
from conftest import REPO, ansible_env, drift, failed_messages, remove_all_domains
from test_adopt import handmade_domain

pytestmark = pytest.mark.integration

REFUSED = "its URI is refused by Berth's URI policy: the ext transport runs the program"


def run(lab, playbook: str, inventory: str, *extra: str) -> dict:
    return lab.finish(lab.start_playbook(playbook, *extra, inventory=inventory))


def ledger_only_inventory(lab, directory, url: str) -> str:
    """The operator's settings without any hypervisor source: every URI a task opens is the
    ledger's, under the policy of berth_uri_policy (the lab's sockets allowed, nothing else)."""
    inventory = directory / "ledger_only"
    (inventory / "group_vars").mkdir(parents=True)
    lab_vars = (fleet.inventory_dir(lab.dir) / "group_vars" / "all.yml").read_text().splitlines()
    own = [line for line in lab_vars if not line.startswith("berth_ledger_url:")]
    own += [f"berth_ledger_url: {json.dumps(url)}", "berth_uri_policy: {allow_parameters: [socket]}"]
    (inventory / "group_vars" / "all.yml").write_text("\n".join(own) + "\n")
    (inventory / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n")
    return str(inventory)


def marker_program(directory):
    """A program that leaves a file where it ran: what an attacker would have libvirt run."""
    marker = directory / "the-program-ran"
    program = directory / "tunnel.sh"
    program.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 5\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return program, marker


def test_a_ledger_uri_with_the_ext_transport_is_refused_everywhere_and_its_program_never_runs(lab, tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    full = lab.inventory_copy(tmp_path, url)
    only = ledger_only_inventory(lab, tmp_path, url)
    program, marker = marker_program(tmp_path)
    try:
        assert run(lab, "gather.yml", full)["rc"] == 0
        launched = run(lab, "launch.yml", full, "-e", json.dumps({"name": "trusted", "berth_force_hosts": ["hv1"]}))
        assert launched["rc"] == 0, failed_messages(launched)
        handmade_domain(lab, "hv2", "handmade")
        # Someone with write access to the shared ledger points every hypervisor at a program.
        with sqlite3.connect(f"{tmp_path}/ledger.sqlite3") as db:
            db.execute("UPDATE hypervisors SET uri = ?", (f"qemu+ext:///system?command={program}",))

        fresh = run(lab, "launch.yml", only, "-e", "name=fresh")
        assert fresh["rc"] != 0 and REFUSED in " ".join(failed_messages(fresh)), failed_messages(fresh)
        powered = run(lab, "power.yml", only, "-e", "name=trusted", "-e", "state=stopped")
        assert powered["rc"] != 0 and REFUSED in " ".join(failed_messages(powered)), failed_messages(powered)
        deleted = run(lab, "delete.yml", only, "-e", "name=trusted")
        # The role's delete loops over the instances: the reason is in the item's result.
        assert deleted["rc"] != 0 and REFUSED in json.dumps(deleted), failed_messages(deleted)
        adopted = run(lab, "adopt.yml", only, "-e", "host=hv2", "-e", "domain=handmade")
        assert adopted["rc"] != 0 and REFUSED in " ".join(failed_messages(adopted)), failed_messages(adopted)
        source = tmp_path / "lab.berth_instances.yml"
        source.write_text(f"plugin: berth.fleet.instances\nledger_url: {url}\n"
                          "uri_policy: {allow_parameters: [socket]}\n")
        listed = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-inventory"), "-i", str(source), "--list"],
                                cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=300, check=False)
        assert listed.returncode == 0, listed.stderr
        hostvars = json.loads(listed.stdout)["_meta"]["hostvars"]["trusted-1"]
        assert "ansible_host" not in hostvars and "ext transport runs the program" in " ".join(listed.stderr.split())

        assert not marker.exists(), "libvirt ran the ledger's program"
        # The domains are where they were: nothing was built, stopped or removed.
        assert lab.virsh("hv1", "domstate", "trusted-1").strip() == "running"
        assert lab.virsh("hv2", "domstate", "handmade").strip() == "running"
        # The reasons name the transport, never repeat the URI (a ledger row's may hold a secret).
        assert str(program) not in " ".join(sum((failed_messages(run) for run in (fresh, powered, adopted)), []))

        # The operator's own inventory puts the right URIs back; then delete works again.
        assert run(lab, "gather.yml", full)["rc"] == 0
        with sqlite3.connect(f"{tmp_path}/ledger.sqlite3") as db:
            assert {row[0].split("?")[0] for row in db.execute("SELECT uri FROM hypervisors")} == {"qemu+unix:///system"}
        again = run(lab, "delete.yml", only, "-e", "name=trusted")
        assert again["rc"] == 0, failed_messages(again)
        assert "trusted-1" not in lab.virsh("hv1", "list", "--all", "--name").split()
        assert not marker.exists()
    finally:
        remove_all_domains(lab)


def test_two_hypervisors_reporting_one_uuid_are_a_conflict_and_no_instance_is_forgotten(lab, tmp_path):
    url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    full = lab.inventory_copy(tmp_path, url)
    hv1_uuid = fleet.host_uuid(lab.dir, "hv1")
    hv2_uuid = fleet.host_uuid(lab.dir, "hv2")
    try:
        assert run(lab, "gather.yml", full)["rc"] == 0
        launched = run(lab, "launch.yml", full, "-e", json.dumps({"name": "twin", "berth_force_hosts": ["hv1"]}))
        assert launched["rc"] == 0, failed_messages(launched)

        fleet.impersonate(lab.dir, "hv2", hv1_uuid)
        synced = run(lab, "gather.yml", full)
        assert synced["rc"] == 0, failed_messages(synced)
        lines = drift(synced)
        conflict = [line for line in lines if "IDENTITY CONFLICT" in line]
        assert conflict and f"hv2 reports host UUID {hv1_uuid}" in conflict[0] and "hypervisor hv1" in conflict[0], lines
        assert not any("twin-1" in line and "missing" in line for line in lines), lines
        with sqlite3.connect(f"{tmp_path}/ledger.sqlite3") as db:
            rows = {row[0]: row[1:] for row in db.execute("SELECT uuid, name, uri, sync_status FROM hypervisors")}
            instance = db.execute("SELECT host, hypervisor_uuid, state, missing_since FROM instances "
                                  "WHERE name = 'twin-1'").fetchone()
        assert rows[hv1_uuid] == ("hv1", lab.hosts["hv1"]["uri"], "up")
        assert rows[hv2_uuid][2] == "down"
        assert instance == ("hv1", hv1_uuid, "ACTIVE", None)

        # delete.yml goes where the domain runs, and removes it there.
        deleted = run(lab, "delete.yml", full, "-e", "name=twin")
        assert deleted["rc"] == 0, failed_messages(deleted)
        assert "twin-1" not in lab.virsh("hv1", "list", "--all", "--name").split()
        with sqlite3.connect(f"{tmp_path}/ledger.sqlite3") as db:
            assert db.execute("SELECT COUNT(*) FROM instances WHERE name = 'twin-1'").fetchone() == (0,)
    finally:
        fleet.impersonate(lab.dir, "hv2", None)
        remove_all_domains(lab)
    assert fleet.host_uuid(lab.dir, "hv2") == hv2_uuid
    assert not os.path.exists(fleet.host_root(lab.dir, "hv2") / fleet.UUID_OVERRIDE)
