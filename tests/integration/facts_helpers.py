"""Helpers for the facts tests: run the real ansible-inventory, read its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNSAFE = "__ansible_unsafe"
# A source line for the lab's daemons, which listen on sockets of their own: Berth's URI policy
# refuses socket= unless the source allows it (as lab/fleet.py's sources do).
LAB_POLICY = "uri_policy: {allow_parameters: [socket]}\n"


def ansible_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}",
        ANSIBLE_NOCOLOR="1",
    )
    env.update(extra)
    return env


def run_inventory(source: str | Path, *args: str, env: dict[str, str] | None = None) -> dict:
    """``ansible-inventory -i SOURCE --list`` as a user runs it; the parsed JSON plus stderr."""
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "inventory.json"
        proc = subprocess.run(
            [str(REPO / ".venv" / "bin" / "ansible-inventory"), "-i", str(source), "--list",
             "--output", str(output), *args],
            cwd=REPO, env=env or ansible_env(), capture_output=True, text=True, timeout=300, check=False,
        )
        assert proc.returncode == 0, proc.stderr
        text = output.read_text()
    data = json.loads(text)
    data["_json"] = text
    data["_stderr"] = proc.stderr
    data["_stdout"] = proc.stdout
    return data


def plain(value):
    """The JSON with ansible-inventory's unsafe markers ({"__ansible_unsafe": s}) taken off."""
    if isinstance(value, dict):
        if list(value) == [UNSAFE]:
            return value[UNSAFE]
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def strings_not_unsafe(value, path="") -> list[str]:
    """Paths of strings that ansible-inventory printed without the unsafe marker."""
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        if list(value) == [UNSAFE]:
            return []
        return [p for key, item in value.items() for p in strings_not_unsafe(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in strings_not_unsafe(item, f"{path}[{i}]")]
    return []


def group_members(inventory: dict, group: str) -> set[str]:
    return set(inventory.get(group, {}).get("hosts", []))


def run_playbook(playbook: str | Path, inventory: str | Path, *extra: str, env: dict[str, str] | None = None) -> dict:
    """ansible-playbook with the test JSON callback; the parsed output plus rc and stderr."""
    env = dict(env or ansible_env())
    env.update(ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).with_name("callback_plugins")),
               ANSIBLE_STDOUT_CALLBACK="berth_test_json")
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), str(playbook), *extra],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    try:
        output = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"ansible-playbook printed no JSON (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    output.update(rc=proc.returncode, stderr=proc.stderr)
    return output


def task_results(output: dict, task: str) -> dict:
    """{host: result} of the task with that name (the last one if it ran in several plays)."""
    found = [t["hosts"] for play in output["plays"] for t in play["tasks"] if t["task"] == task]
    assert found, f"no task {task!r} in {[t['task'] for p in output['plays'] for t in p['tasks']]}"
    return found[-1]
