"""A real lab fleet of libvirt daemons and real ansible-playbook runs against it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))

import fleet  # noqa: E402  (lab/fleet.py)


def ansible_env() -> dict:
    """The environment for a real ansible-playbook run of this checkout, JSON output."""
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).with_name("callback_plugins")),
        ANSIBLE_STDOUT_CALLBACK="berth_test_json",
        PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}",
    )
    return env


# Playbooks that decide from the ledger's last tracker sync: in production gather.yml runs on a
# schedule; here Lab.playbook runs it first when the ledger they use was not synced lately.
LEDGER_PLAYBOOKS = ("launch.yml", "migrate.yml", "drain.yml", "resize.yml")
SYNC_EVERY_S = 60


class Lab:
    def __init__(self, directory: str, hosts: list[dict]) -> None:
        self.dir = directory
        self.hosts = {record["name"]: record for record in hosts}
        self.inventory = str(fleet.inventory_dir(directory))
        self.ledger_path = str(fleet.ledger_path(directory))
        self._synced: dict[tuple, float] = {}

    def playbook(self, playbook: str, *extra: str, check: bool = False, env_extra: dict | None = None) -> dict:
        """Run a playbook with the JSON callback; returns its parsed output plus rc."""
        if playbook in LEDGER_PLAYBOOKS:
            self.keep_synced(extra, env_extra)
        return self.finish(self.start_playbook(playbook, *extra, *(["--check"] if check else []), env=env_extra))

    def gather(self, *extra: str, env_extra: dict | None = None) -> dict:
        """The tracker sync (gather.yml) of the lab's hypervisors into the ledger ``extra`` names."""
        output = self.finish(self.start_playbook("gather.yml", *extra, env=env_extra))
        assert output["rc"] == 0, failed_messages(output)
        self._synced[_ledger_key(extra, env_extra)] = time.monotonic()
        return output

    def keep_synced(self, extra: tuple, env_extra: dict | None) -> None:
        """gather.yml into the ledger that ``extra`` names, unless it ran within SYNC_EVERY_S."""
        key = _ledger_key(extra, env_extra)
        if time.monotonic() - self._synced.get(key, -SYNC_EVERY_S - 1) > SYNC_EVERY_S:
            ledger_args = [arg for pair in zip(extra, extra[1:]) if pair[0] == "-e" and "berth_ledger_url" in pair[1]
                           for arg in pair]
            self.gather(*ledger_args, env_extra=env_extra)

    def stop_daemon(self, name: str) -> None:
        """Stop one hypervisor's daemon. What the ledger last synced of the fleet is stale from
        now on: the next launch gathers first, as a scheduled sync would have by then."""
        fleet.stop_daemon(self.dir, name)
        self._synced.clear()

    def start_daemon(self, name: str) -> None:
        fleet.start_daemon(self.dir, name)
        self._synced.clear()

    def start_playbook(self, playbook: str, *extra: str, inventory: str | None = None,
                       env: dict | None = None, **popen) -> subprocess.Popen:
        """Start ansible-playbook (JSON callback) without waiting; ``finish`` collects it."""
        full_env = {**ansible_env(), **(env or {})}
        command = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", inventory or self.inventory,
                   str(REPO / "playbooks" / playbook), *extra]
        return subprocess.Popen(command, cwd=REPO, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **popen)

    @staticmethod
    def finish(proc: subprocess.Popen) -> dict:
        stdout, stderr = proc.communicate(timeout=600)
        try:
            output = json.loads(stdout)
        except ValueError:
            raise AssertionError(f"ansible-playbook printed no JSON (rc {proc.returncode}):\n{stdout}\n{stderr}")
        output["rc"] = proc.returncode
        output["stderr"] = stderr
        return output

    def server_group(self, name: str, state: str, policy: str = "anti-affinity") -> None:
        """Create (present) or delete (absent) a server group in the lab's ledger, with berth.fleet.server_group."""
        proc = subprocess.run(
            [str(REPO / ".venv" / "bin" / "ansible"), "-i", self.inventory, "localhost", "-m",
             "berth.fleet.server_group", "-a",
             f"name={name} policy={policy} state={state} ledger_url={{{{ berth_ledger_url }}}}"],
            cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def virsh(self, host: str, *args: str) -> str:
        return subprocess.run(["virsh", "-c", self.hosts[host]["uri"], *args], check=True,
                              capture_output=True, text=True, timeout=60).stdout

    def inventory_copy(self, directory: Path, ledger_url: str, settings: dict | None = None,
                       aggregates: dict | None = None) -> str:
        """A copy of the lab's inventory with its own ledger, per-host ``settings`` ({host:
        {key: value}}) and ``aggregates`` ({name: {hosts, metadata}}); returns its directory."""
        inventory = directory / "inventory"
        (inventory / "group_vars").mkdir(parents=True)
        source = {"plugin": "berth.fleet.hypervisors", "storage_pool": "default",
                  "hypervisors": {host: {"uri": record["uri"], **(settings or {}).get(host, {})}
                                  for host, record in sorted(self.hosts.items())}}
        if aggregates:
            source["aggregates"] = aggregates
        # JSON is YAML: the source needs no YAML library here.
        (inventory / "fleet.berth.yml").write_text(json.dumps(source, indent=1) + "\n")
        lab_vars = (Path(self.inventory) / "group_vars" / "all.yml").read_text().splitlines()
        own = [line for line in lab_vars if not line.startswith("berth_ledger_url:")]
        own.append(f"berth_ledger_url: {json.dumps(ledger_url)}")
        (inventory / "group_vars" / "all.yml").write_text("\n".join(own) + "\n")
        return str(inventory)

    def ledger_rows(self, table: str) -> list[dict]:
        """Rows read with sqlite3 directly, not through Berth's own ledger code."""
        if not os.path.exists(self.ledger_path):
            return []
        with sqlite3.connect(self.ledger_path) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(f"SELECT * FROM {table} ORDER BY 1")]


@pytest.fixture(scope="session")
def lab():
    directory = tempfile.mkdtemp(prefix="berth-lab-", dir="/tmp")
    try:
        hosts = fleet.up(directory, hosts=3)
        yield Lab(directory, hosts)
    finally:
        fleet.down(directory)


def _ledger_key(extra: tuple, env_extra: dict | None) -> tuple:
    """Which ledger a run uses: its -e berth_ledger_url, else BERTH_LEDGER_URL, else the lab's."""
    named = [arg for arg in extra if "berth_ledger_url" in arg]
    return tuple(named) or ((env_extra or {}).get("BERTH_LEDGER_URL"),)


def changed_count(output: dict) -> int:
    return sum(stats.get("changed", 0) for stats in output["stats"].values())


def failed_messages(output: dict) -> list[str]:
    messages = []
    for play in output["plays"]:
        for task in play["tasks"]:
            for result in task["hosts"].values():
                if result.get("failed"):
                    messages.append(result.get("msg", ""))
    return messages


def task_result(output: dict, task: str) -> dict:
    for play in output["plays"]:
        for entry in play["tasks"]:
            if entry["task"] == task or entry["task"].endswith(f" : {task}"):
                return entry["hosts"]["localhost"]
    raise AssertionError(f"no task {task!r} in the run")


def task_results(output: dict, name: str) -> list[dict]:
    """Every host's result of the task ``name``."""
    return [result for play in output["plays"] for task in play["tasks"] if task["task"] == name
            for result in task["hosts"].values()]


def drift(output: dict) -> list[str]:
    """The lines of gather.yml's drift report: each hypervisor's, then the missing ones'."""
    return [line for task in ("Drift report", "Missing hypervisors") for result in task_results(output, task)
            for line in result["msg"]]


def fleet_snapshot(lab) -> dict:
    """Everything a launch could change: domains and volumes on every host, ledger rows."""
    return {
        "domains": {host: lab.virsh(host, "list", "--all", "--name").split() for host in lab.hosts},
        "volumes": {host: sorted(lab.virsh(host, "vol-list", "default").split()) for host in lab.hosts},
        "instances": lab.ledger_rows("instances"),
        "claims": lab.ledger_rows("claims"),
    }
