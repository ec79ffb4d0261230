"""berth.fleet as a user installs it: the built tarball, `ansible-galaxy collection install`
into an empty collections path, in a fresh virtual environment holding only ansible-core and the
Python packages the installed collection lists (meta/ee-requirements.txt); then the collection's
own playbooks, by name, against the lab fleet: the hypervisors' check, a tracker sync, a
check-mode launch and the instances' list.

Nothing of this checkout is on the way: no .venv, no .cache link, no ansible.cfg.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, failed_messages, rows, running_domains, task_result, task_results

pytestmark = pytest.mark.integration

CALLBACKS = Path(__file__).with_name("callback_plugins")


def _pinned_ansible_core() -> str:
    """The ansible-core requirements.txt pins: the newest supported, within requires_ansible."""
    return re.search(r"^(ansible-core==[^\s#]+)", (REPO / "requirements.txt").read_text(), re.M).group(1)


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    run = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert run.returncode == 0, f"{command}:\n{run.stdout}\n{run.stderr}"
    return run


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """{venv, collections, env, collection}: the tarball installed as the README says."""
    work = tmp_path_factory.mktemp("installed")
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    _run([str(Path(sys.executable).with_name("ansible-galaxy")), "collection", "build",
          "--output-path", str(work / "dist"), str(REPO)])
    tarball = work / "dist" / f"berth-fleet-{galaxy['version']}.tar.gz"

    venv = work / "venv"
    # The Python of .venv itself (the newest Berth supports), not .venv.
    _run([str(Path(sys.base_prefix) / "bin" / "python3"), "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, _pinned_ansible_core()])

    collections = work / "collections"
    collections.mkdir()
    # Only the new environment's commands, no configuration file, the empty collections path.
    env = {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": os.environ["HOME"],
           "LANG": "C.UTF-8", "ANSIBLE_COLLECTIONS_PATH": str(collections)}
    _run([str(venv / "bin" / "ansible-galaxy"), "collection", "install", str(tarball),
          "-p", str(collections)], cwd=work, env=env)
    collection = collections / "ansible_collections" / "berth" / "fleet"
    _run([*pip, "-r", str(collection / "meta" / "ee-requirements.txt")])
    return {"work": work, "venv": venv, "env": env, "collection": collection}


def test_the_installed_collection_is_the_one_used(installed):
    listed = _run([str(installed["venv"] / "bin" / "ansible-galaxy"), "collection", "list",
                   "berth.fleet", "--format", "json"], cwd=installed["work"], env=installed["env"]).stdout
    paths = json.loads(listed)
    assert list(paths) == [str(installed["collection"].parents[1])]


def test_a_check_mode_launch_from_the_installed_collection(lab, installed, tmp_path):
    ledger_url = f"sqlite:///{tmp_path}/ledger.sqlite3"
    inventory = lab.inventory_copy(tmp_path, ledger_url)
    env = {**installed["env"], "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
           "ANSIBLE_STDOUT_CALLBACK": "berth_test_json"}
    playbook = str(installed["venv"] / "bin" / "ansible-playbook")

    def run(*args: str) -> dict:
        proc = subprocess.run([playbook, "-i", inventory, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        output = json.loads(proc.stdout)
        output.update(rc=proc.returncode, stderr=proc.stderr)
        return output

    checked = run("berth.fleet.check")
    assert checked["rc"] == 0, failed_messages(checked)
    # No ledger yet: a launch, which decides from the ledger's last sync, is refused and makes none.
    early = run("berth.fleet.launch", "--check", "-e", "server_name=inst", "-e", "flavor=m1.tiny")
    assert early["rc"] != 0
    assert failed_messages(early)[0].startswith(f"no ledger at {tmp_path / 'ledger.sqlite3'} ")
    assert not (tmp_path / "ledger.sqlite3").exists()
    synced = run("berth.fleet.gather")
    assert synced["rc"] == 0, failed_messages(synced)
    # The first sync made the ledger, and said so.
    assert task_results(synced, "Drift report")[0]["msg"][0] == f"created a new ledger: {ledger_url}"
    before = running_domains(lab)

    planned = run("berth.fleet.launch", "--check", "-e", "server_name=inst", "-e", "flavor=m1.tiny", "-e", "count=2")
    assert planned["rc"] == 0, failed_messages(planned)
    plan = task_result(planned, "Launch the instances")
    assert [(instance["name"], instance["state"]) for instance in plan["instances"]] == [
        ("inst-1", "PLANNED"), ("inst-2", "PLANNED")]
    assert {instance["host"] for instance in plan["instances"]} <= set(lab.hosts)
    # Check mode: nothing claimed, nothing defined.
    assert rows(ledger_url, "instances") == []
    assert running_domains(lab) == before

    # The everyday commands from the installed collection: list.yml reads the ledger, which a
    # check-mode launch left without instances.
    listed = run("berth.fleet.list")
    assert listed["rc"] == 0, failed_messages(listed)
    assert task_result(listed, "Read the instances from the ledger")["instances"] == []
    shown = task_result(listed, "Show the instances")["msg"]
    assert shown[0] == f"0 instance(s) in the ledger at {ledger_url}"

    # Installed as the README says, on the ansible-core CI runs: Ansible warns of nothing
    # about the collection (a requires_ansible that excludes it would).
    stderr = "".join(output["stderr"] for output in (checked, synced, planned, listed))
    assert "does not support Ansible version" not in stderr
