"""Helpers for the facts tests: run the real ansible-inventory, read its JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UNSAFE = "__ansible_unsafe"


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
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-inventory"), "-i", str(source), "--list", *args],
        cwd=REPO, env=env or ansible_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
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
