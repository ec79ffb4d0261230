"""`launch.yml --check --diff` as a user runs it, with Ansible's default stdout callback: at normal
verbosity it prints the domain XML of each planned instance, claims nothing and defines nothing,
and prints no task about the deprecated -e name when -e server_name is given."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import REPO, ansible_env, fleet_snapshot

pytestmark = pytest.mark.integration


def default_callback_run(lab, playbook: str, *extra: str) -> subprocess.CompletedProcess:
    """ansible-playbook with the checkout's ansible.cfg and Ansible's own default callback."""
    env = {**ansible_env(), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default", "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", lab.inventory,
                           str(REPO / "playbooks" / playbook), *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)


def planned_domains(stdout: str) -> dict[str, list[str]]:
    """{header: the added lines} of each diff whose "after" header says planned, as the default
    callback prints a unified diff: "+++ after: <name> on <host> (planned)", then "+" lines."""
    domains: dict[str, list[str]] = {}
    current = None
    for line in stdout.splitlines():
        header = re.fullmatch(r"\+\+\+ after: (.+ on .+) \(planned\)", line)
        if header:
            current = domains.setdefault(header.group(1), [])
        elif current is not None and line.startswith("+"):
            current.append(line[1:])
        elif current is not None and not line.startswith("@@"):
            current = None
    return domains


def test_check_diff_prints_each_planned_domain_and_claims_nothing(lab):
    lab.keep_synced((), None)
    before = fleet_snapshot(lab)

    run = default_callback_run(lab, "launch.yml", "--check", "--diff", "-e", "server_name=preview", "-e", "count=2")
    assert run.returncode == 0, run.stdout + run.stderr
    domains = planned_domains(run.stdout)
    by_name = {header.split(" on ")[0]: (header.split(" on ")[1], lines) for header, lines in domains.items()}
    assert sorted(by_name) == ["preview-1", "preview-2"], run.stdout
    for name, (host, lines) in by_name.items():
        assert host in lab.hosts
        xml = [line for line in lines if line.strip()]
        assert xml[0].startswith("<domain type="), lines[:3]
        assert f"  <name>{name}</name>" in xml
        assert xml[-1] == "</domain>"
    # Check mode: nothing claimed, recorded or defined.
    assert fleet_snapshot(lab) == before
    # -e server_name given: nothing about the deprecated -e name, not even a skipped task.
    assert "skipping" not in run.stdout and "-e name=" not in run.stdout, run.stdout
