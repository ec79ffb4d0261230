"""A real lab fleet of libvirt daemons and real ansible-playbook runs against it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))

import fleet  # noqa: E402  (lab/fleet.py)


def ansible_env() -> dict:
    """The environment for a real ansible-playbook run of this checkout, JSON output; the test
    hooks' plugin is loaded too, inert unless a test sets its variables (``hooks_env``)."""
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_CALLBACK_PLUGINS=str(Path(__file__).with_name("callback_plugins")),
        ANSIBLE_STDOUT_CALLBACK="berth_test_json",
        PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}",
    )
    return env


def hooks_env(barrier: Path | None = None, point: str | None = None, parties: int = 1, timeout_s: float = 300,
              faults: list[str] | tuple[str, ...] = (), unsafe_claims: bool = False) -> dict:
    """The environment that makes callback_plugins/berth_test_hooks.py install test hooks in a
    run: a barrier in directory ``barrier`` at ``point`` for ``parties`` runs (``timeout_s`` at
    most), faults as "host:point" entries, and claims without their locks and re-check."""
    env = {}
    if barrier is not None:
        env.update(BERTH_TEST_HOOKS_BARRIER_DIR=str(barrier), BERTH_TEST_HOOKS_BARRIER_POINT=point or "",
                   BERTH_TEST_HOOKS_BARRIER_PARTIES=str(parties), BERTH_TEST_HOOKS_BARRIER_TIMEOUT_S=str(timeout_s))
    if faults:
        env["BERTH_TEST_HOOKS_FAULTS"] = ",".join(faults)
    if unsafe_claims:
        env["BERTH_TEST_HOOKS_UNSAFE_CLAIMS"] = "1"
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
                       aggregates: dict | None = None, guest_os: bool = True) -> str:
        """A copy of the lab's inventory with its own ledger, per-host ``settings`` ({host:
        {key: value}}) and ``aggregates`` ({name: {hosts, metadata}}); returns its directory.
        ``guest_os=False`` leaves out the lab's kernel (berth_boot_*): the domains start and run,
        but no Linux boots in them (the firmware finds no bootable disk and waits), for tests
        that only need running domains. A Linux boot under TCG takes a CPU for seconds, which
        the rest of the test (and the other guests) wait for on a two-CPU machine."""
        inventory = directory / "inventory"
        (inventory / "group_vars").mkdir(parents=True)
        source = {"plugin": "berth.fleet.hypervisors", "storage_pool": "default",
                  "uri_policy": {"allow_parameters": ["socket"]},
                  "hypervisors": {host: {"uri": record["uri"], **(settings or {}).get(host, {})}
                                  for host, record in sorted(self.hosts.items())}}
        if aggregates:
            source["aggregates"] = aggregates
        # JSON is YAML: the source needs no YAML library here.
        (inventory / "fleet.berth.yml").write_text(json.dumps(source, indent=1) + "\n")
        lab_vars = (Path(self.inventory) / "group_vars" / "all.yml").read_text().splitlines()
        own = [line for line in lab_vars if not line.startswith("berth_ledger_url:")
               and (guest_os or not line.startswith("berth_boot_"))]
        own.append(f"berth_ledger_url: {json.dumps(ledger_url)}")
        (inventory / "group_vars" / "all.yml").write_text("\n".join(own) + "\n")
        return str(inventory)

    def ledger_rows(self, table: str, path: str | None = None) -> list[dict]:
        """Rows of the lab's ledger (or the SQLite ledger at ``path``), read with sqlite3
        directly, not through Berth's own ledger code."""
        path = path or self.ledger_path
        if not os.path.exists(path):
            return []
        with sqlite3.connect(path) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(f"SELECT * FROM {table} ORDER BY 1")]

    @staticmethod
    def ledger_execute(path: str, statement: str, parameters: tuple = ()) -> None:
        """A statement run on the SQLite ledger at ``path`` behind Berth's back, as another
        writer of the ledger could."""
        with sqlite3.connect(path) as db:
            db.execute(statement, parameters)


@contextlib.contextmanager
def lab_fleet(prefix: str, **options):
    """A lab fleet of its own in a temporary directory, for one test file; ``options`` are
    fleet.up's (hosts, huge_pages, cpu_dedicated_set, cpu_shared_set). Discarded after, huge
    pages given back."""
    directory = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    try:
        yield Lab(directory, fleet.up(directory, **options))
    finally:
        fleet.discard(directory)


@pytest.fixture(scope="session")
def lab():
    with lab_fleet("berth-lab-", hosts=3) as fleet_lab:
        yield fleet_lab


# The NUMA lab (issue 24): two hypervisors, each with host CPU 1 for dedicated vCPUs and CPU 0
# for shared ones, and 64 pages of 2 MiB: one lab guest of 128 MiB each.
NUMA_LAB_HOSTS = 2
NUMA_LAB_HUGE_PAGES = 128
NUMA_LAB_CPU_SETS = {"cpu_dedicated_set": "1", "cpu_shared_set": "0"}


@pytest.fixture(scope="module")
def numa_lab():
    """A lab of its own for one test file, with huge pages reserved on this machine and CPU sets
    in its inventory source (NUMA_LAB_*)."""
    with lab_fleet("berth-numa-", hosts=NUMA_LAB_HOSTS, huge_pages=NUMA_LAB_HUGE_PAGES,
                   **NUMA_LAB_CPU_SETS) as fleet_lab:
        yield fleet_lab


# A lab test's time limit (pytest-timeout; a unit test's is pyproject.toml's 60 s), so that a hang
# fails that test with its stack: the slowest take about a minute in CI (test_lifecycle's resize
# 64 s, its power verbs 58 s, test_local_disks 53 s, molecule 49 s), and the first test of a lab
# fleet pays for bringing it up. A test that needs longer says so with its own timeout mark.
LAB_TEST_TIMEOUT_S = 300


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(LAB_TEST_TIMEOUT_S))


def _ledger_key(extra: tuple, env_extra: dict | None) -> tuple:
    """Which ledger a run uses: its -e berth_ledger_url, else BERTH_LEDGER_URL, else the lab's."""
    named = [arg for arg in extra if "berth_ledger_url" in arg]
    return tuple(named) or ((env_extra or {}).get("BERTH_LEDGER_URL"),)


def changed_count(output: dict) -> int:
    return sum(stats.get("changed", 0) for stats in output["stats"].values())


def item_failed(result: dict) -> bool:
    """Whether a loop item of an ignore_errors task failed: ansible-core 2.19 keeps the item's
    ``failed``, 2.21 leaves it out of an ignored item and keeps the ``exception`` it adds."""
    return bool(result.get("failed", "exception" in result))


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
    """The lines of gather.yml's drift report: its summary and the hosts not in step as printed,
    every hypervisor's own lines (the sync's findings, in step or not), then the missing ones'."""
    printed = [line for result in task_results(output, "Drift report") for line in result["msg"]]
    own = [line for result in task_results(output, "Sync the hypervisors into the ledger")
           for lines in result.get("findings", {}).values() for line in lines]
    missing = [line for result in task_results(output, "Missing hypervisors") for line in result["msg"]]
    return printed + [line for line in own if line not in printed] + missing


def fleet_snapshot(lab) -> dict:
    """Everything a launch could change: domains and volumes on every host, ledger rows."""
    return {
        "domains": {host: lab.virsh(host, "list", "--all", "--name").split() for host in lab.hosts},
        "volumes": {host: sorted(lab.virsh(host, "vol-list", "default").split()) for host in lab.hosts},
        "instances": lab.ledger_rows("instances"),
        "claims": lab.ledger_rows("claims"),
    }


# ---- shared by the tests that race launches or kill them ------------------------------------------

def rows(url: str, table: str) -> list[dict]:
    """A ledger table read with the database's own driver, not through Berth's ledger code."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        with sqlite3.connect(parsed.database) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(f"SELECT * FROM {table}")]
    dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute(f"SELECT * FROM {table}")
        return list(cur.fetchall())


def running_domains(lab) -> dict[str, dict[str, dict]]:
    """{host: {uuid: {name, vcpus}}} for the running domains, from virsh."""
    found = {}
    for host in lab.hosts:
        found[host] = {}
        for name in lab.virsh(host, "list", "--name").split():
            uuid = lab.virsh(host, "domuuid", name).strip()
            vcpus = int(lab.virsh(host, "vcpucount", name, "--current", "--live").strip())
            found[host][uuid] = {"name": name, "vcpus": vcpus}
    return found


def remove_all_domains(lab) -> None:
    """Leave the lab as the other tests expect it: no domains, no Berth volumes. The domains are
    destroyed all at once: a virsh destroy takes about 2 s here (--graceful as long), so the
    dozen domains a race leaves took 25 s one after the other."""
    domains = {host: lab.virsh(host, "list", "--all", "--name").split() for host in lab.hosts}
    destroying = [subprocess.Popen(["virsh", "-c", lab.hosts[host]["uri"], "destroy", name],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for host, names in domains.items() for name in names]
    for proc in destroying:
        proc.wait(timeout=60)  # a domain that was not running fails to destroy: undefined below all the same
    for host, names in domains.items():
        for name in names:
            lab.virsh(host, "undefine", name)
    for host in lab.hosts:
        lab.virsh(host, "pool-refresh", "default")
        for line in lab.virsh(host, "vol-list", "default").splitlines():
            if line.strip().startswith("berth-"):
                lab.virsh(host, "vol-delete", "--pool", "default", line.split()[0])


def cpu_line(log, timeout_s: float) -> str:
    """The lab guest's BERTH-GUEST-CPU line from its serial log."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = re.search(r"BERTH-GUEST-CPU [^\r\n]*", log.read_text(errors="replace")) if log.exists() else None
        if found:
            return found.group(0)
        if time.monotonic() > deadline:
            raise AssertionError(f"no BERTH-GUEST-CPU line in {log}")
        time.sleep(0.5)


def berth_volumes(lab) -> dict[str, list[str]]:
    """{host: [volume]}: the volumes of each host's pool that builds named (berth-...), from virsh."""
    found = {}
    for host in lab.hosts:
        lab.virsh(host, "pool-refresh", "default")
        found[host] = sorted(line.split()[0] for line in lab.virsh(host, "vol-list", "default").splitlines()
                             if line.strip().startswith("berth-"))
    return found


@pytest.fixture
def clean_lab(lab):
    remove_all_domains(lab)
    yield lab
    remove_all_domains(lab)


def process_tree(root_pid: int) -> list[int]:
    """``root_pid`` and every process descending from it, read from /proc: with ansible-core 2.19
    the task workers run in sessions of their own, so no process group holds a whole run."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def kill_tree(proc: subprocess.Popen) -> list[int]:
    """Kill a run and all its processes at once, as a crash of the controller would. Each is
    stopped first, so that none forks or loses its parent while the tree is read; returns them."""
    stopped: set[int] = set()
    while True:
        new = [pid for pid in process_tree(proc.pid) if pid not in stopped]
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        stopped.update(new)
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    return sorted(stopped)


def wait_at_barrier(proc: subprocess.Popen, barrier: Path, runs: int = 1, timeout_s: float = 180) -> None:
    """Until ``runs`` runs have reached the test barrier in ``barrier`` (``hooks_env``)."""
    deadline = time.monotonic() + timeout_s
    arrived = barrier / "arrived"
    while not arrived.exists() or len(os.listdir(arrived)) < runs:
        if proc.poll() is not None or time.monotonic() > deadline:
            output = proc.communicate()[0] if proc.poll() is not None else ""
            raise AssertionError(f"the run never reached the barrier {barrier}: {output[-3000:]}")
        time.sleep(0.1)
