"""The AWX path without AWX: ansible-runner runs the inventory sync and then the jobs, as AWX does.

AWX's inventory update runs ``ansible-inventory -i <source from the project> --list --export``
in the execution environment and stores the JSON; a job then gets that inventory back from a
script that prints it. Both steps run here through ansible-runner with the same environment
(credentials injected as environment variables). A lab domain whose name is a Jinja2
expression must come through as a plain string and never be templated, on the direct path too.
"""

from __future__ import annotations

import json
import stat
import subprocess

import ansible_runner
import pytest
from facts_helpers import REPO, ansible_env, plain, run_playbook, task_results
from test_facts_lab import EVIL_NAME, domain_xml

pytestmark = pytest.mark.integration

PRINT_DOMAINS = REPO / "tests" / "integration" / "playbooks" / "print_domains.yml"
GATHER = REPO / "playbooks" / "gather.yml"
SECRET = "awx-injected-secret"


@pytest.fixture
def evil_domain(lab, tmp_path):
    xml = tmp_path / "evil.xml"
    xml.write_text(domain_xml(EVIL_NAME, 96, 1))
    uri = lab.hosts["hv2"]["uri"]
    subprocess.run(["virsh", "-c", uri, "define", str(xml)], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["virsh", "-c", uri, "undefine", EVIL_NAME], capture_output=True, check=False)


def awx_env() -> dict[str, str]:
    """What AWX puts in the job's environment: the project's ansible.cfg and collections, a
    credential, and inventory parsing that fails instead of silently giving nothing."""
    env = ansible_env(ANSIBLE_INVENTORY_UNPARSED_FAILED="True", BERTH_LIBVIRT_PASSWORD=SECRET)
    return {key: value for key, value in env.items() if not key.startswith("PYTEST")}


def inventory_sync(lab, directory) -> dict:
    """The inventory update: ansible-inventory --list --export through ansible-runner."""
    exported = directory / "inventory.json"
    (directory / "sync").mkdir(exist_ok=True)
    response, error, rc = ansible_runner.run_command(
        executable_cmd=str(REPO / ".venv" / "bin" / "ansible-inventory"),
        cmdline_args=["-i", lab.inventory, "--list", "--export", "--output", str(exported)],
        envvars=awx_env(), host_cwd=str(REPO), private_data_dir=str(directory / "sync"), quiet=True,
        runner_mode="subprocess",
    )
    assert rc == 0, f"{response}\n{error}"
    assert SECRET not in response + error + exported.read_text()
    return json.loads(exported.read_text())


def inventory_script(directory, data: dict):
    """AWX hands a job its stored inventory through a script that prints it."""
    (directory / "inventory_data.json").write_text(json.dumps(data))
    script = directory / "hosts"
    script.write_text(
        f"#!{REPO / '.venv' / 'bin' / 'python'}\nimport sys\n"
        f"print(open({str(directory / 'inventory_data.json')!r}).read() if '--list' in sys.argv else '{{}}')\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def job(directory, playbook, script, name: str):
    (directory / name).mkdir(exist_ok=True)
    env = awx_env()
    env["ANSIBLE_INVENTORY_ENABLED"] = "ansible.builtin.script"
    return ansible_runner.run(
        private_data_dir=str(directory / name), playbook=str(playbook), inventory=str(script),
        envvars=env, quiet=True, project_dir=str(REPO),
    )


def messages(runner) -> list[str]:
    """Every debug message of the run, as printed (a list message line by line)."""
    found = [event["event_data"]["res"]["msg"] for event in runner.events
             if event.get("event") in ("runner_on_ok", "runner_item_on_ok") and "msg" in event.get("event_data", {}).get("res", {})]
    return [line for msg in found for line in (msg if isinstance(msg, list) else [msg])]


def test_awx_inventory_sync_and_job_with_a_domain_named_like_a_template(lab, evil_domain, tmp_path):
    data = inventory_sync(lab, tmp_path)
    assert set(data["hypervisors"]["hosts"]) == set(lab.hosts)
    hv2 = plain(data["_meta"]["hostvars"]["hv2"]["berth_host_state"])
    assert hv2["orphans"] == [EVIL_NAME]
    # Exported as unsafe: the stored inventory keeps the marking.
    assert data["_meta"]["hostvars"]["hv2"]["berth_host_state"]["orphans"] == [{"__ansible_unsafe": EVIL_NAME}]

    script = inventory_script(tmp_path, data)
    printed = job(tmp_path, PRINT_DOMAINS, script, "print")
    assert printed.rc == 0, printed.stdout.read()
    output = messages(printed)
    assert f"orphan {EVIL_NAME}" in output
    assert f"hv2 runs {[EVIL_NAME]!r}" in output
    uid_line = subprocess.run(["id"], capture_output=True, text=True, check=False).stdout.strip()
    assert not any(uid_line in message or "uid=" in message for message in output)


def test_awx_gather_job_runs_on_the_synced_inventory(lab, evil_domain, tmp_path):
    script = inventory_script(tmp_path, inventory_sync(lab, tmp_path))
    gathered = job(tmp_path, GATHER, script, "gather")
    assert gathered.rc == 0, gathered.stdout.read()
    assert gathered.status == "successful"
    # The drift report names the orphan on hv2 by its name, as a plain string.
    drift = [line for line in messages(gathered) if line.startswith("hv2:")]
    assert drift and EVIL_NAME in drift[0], drift
    assert not any("uid=" in line for line in messages(gathered))


def test_direct_playbook_prints_the_name_untemplated(lab, evil_domain):
    output = run_playbook(PRINT_DOMAINS, lab.inventory)
    assert output["rc"] == 0, output["stderr"]
    assert task_results(output, "Domain names")["hv2"]["msg"] == f"hv2 runs {[EVIL_NAME]!r}"
    loop = task_results(output, "Orphans one by one")["hv2"]
    assert [item["msg"] for item in loop["results"]] == [f"orphan {EVIL_NAME}"]
