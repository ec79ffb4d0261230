#!/usr/bin/env python3
"""The Berth lab fleet: several real, independent libvirtd daemons on this one machine.

    python3 lab/fleet.py up [--hosts N] [--dir DIR]     # N hypervisors hv1..hvN (default 3)
        [--huge-pages N] [--cpu-dedicated-set 1 --cpu-shared-set 0]
    python3 lab/fleet.py status [--dir DIR]
    python3 lab/fleet.py stop-daemon NAME [--dir DIR]   # stop one libvirtd, keep its state
    python3 lab/fleet.py start-daemon NAME [--dir DIR]  # start it again
    python3 lab/fleet.py down [--dir DIR]               # destroy everything but the guest cache
    python3 lab/fleet.py ledger-url [--dir DIR]         # the lab's ledger (also printed by up)

DIR defaults to $BERTH_LAB_DIR, else <repo>/lab/state (git-ignored).

Each hypervisor hvN (see /work/shared/TESTBED.md) is one libvirtd started as
``libvirtd -f DIR/hvN/etc/libvirtd.conf -p DIR/hvN/libvirtd.pid`` inside its own mount and UTS
namespace (``unshare -m -u --propagation private``), hostname ``berth-hvN``, a fixed host_uuid,
under a small parent process that reaps its QEMUs and dnsmasq as soon as they exit (_ns_exec),
with private bind mounts (in-namespace path -> real path):

    /etc/libvirt       -> DIR/hvN/etc     (copy of the system's, own libvirtd.conf, qemu.conf)
    /run/libvirt       -> DIR/hvN/run     (so the socket is DIR/hvN/run/libvirt-sock)
    /var/lib/libvirt   -> DIR/hvN/lib     (pool "default" is /var/lib/libvirt/images)
    /var/log/libvirt   -> DIR/hvN/log     (serial logs: /var/log/libvirt/qemu = DIR/hvN/log/qemu)
    /var/cache/libvirt -> DIR/hvN/cache   (QEMU capabilities cache)
    /etc/passwd, /etc/group -> DIR/hvN/nss/ (the system's plus the libvirt-qemu account)
    /etc/hosts         -> DIR/hvN/nss/hosts (the system's plus berth-hvN, so getHostname asks no DNS)

URI: ``qemu+unix:///system?socket=DIR/hvN/run/libvirt-sock``.

Each hypervisor has a libvirt network NETWORK_NAME (berth-lab) with DHCP: a bridge of its own
(bridge_name()) on a free 10.2xx.y.0/24 of this machine's network namespace, which all daemons
share, forward mode 'open' so libvirt adds no firewall rules; libvirt runs its dnsmasq inside the
daemon's mount namespace (its leases under DIR/hvN/lib/dnsmasq).

``up`` also builds the guest (lab/guest.py) and writes DIR/hosts.json,
DIR/inventory/fleet.berth.yml and DIR/inventory/group_vars/all.yml, and DIR/instances/ (a
berth.fleet.instances source on the lab's ledger, with the SSH settings of the guests).

Importable (tests put lab/ on sys.path and ``import fleet``): up(), down(), status(),
stop_daemon(), start_daemon(), impersonate(), hosts(), host_root(), hypervisor_dirs(), host_path(),
log_dir(), uri(), socket_path(), host_uuid(), bridge_name(), instances_inventory_dir(), default_dir(),
ledger_path(), ledger_url(), discard().

Stdlib only. Needs root, util-linux (unshare, setsid, mount), libvirtd, virsh.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

LAB = Path(__file__).resolve().parent
sys.path.insert(0, str(LAB))
import guest  # noqa: E402  (lab/guest.py)

FLEET_PY = Path(__file__).resolve()
NAME_RE = re.compile(r"^hv[1-9][0-9]*$")
# In-namespace path -> sub directory of the host's root that is bind-mounted over it.
BIND_DIRS = {
    "/etc/libvirt": "etc",
    "/run/libvirt": "run",
    "/var/lib/libvirt": "lib",
    "/var/log/libvirt": "log",
    "/var/cache/libvirt": "cache",
}
SOCKET_NAME = "libvirt-sock"
LONGEST_SOCKET_NAME = "libvirt-admin-sock"
MAX_SOCKET_PATH = 99  # the brief's limit (< 100); sun_path itself allows 107
POOL_NAME = "default"
POOL_TARGET = "/var/lib/libvirt/images"
# Each hypervisor's libvirt network with DHCP (dnsmasq), for guests that are reached by address.
NETWORK_NAME = "berth-lab"
# Candidate /24 subnets: 10.<200..249>.<0..255>.0, picked from the lab dir and host name; one
# another lab (or anything else here) already routes is skipped (libvirt refuses it).
NETWORK_SUBNETS = 50 * 256
NETWORK_ATTEMPTS = 20
QEMU_LOG_DIR = "/var/log/libvirt/qemu"
CAPS_CACHE = "qemu-capabilities"  # DIR/qemu-capabilities: survives down, seeds new daemons
SYSTEM_ETC = Path("/etc/libvirt")
# Sub directories of the system's /etc/libvirt not copied: they hold the machine's own
# domains, pools, networks and secrets, which must not appear on every lab hypervisor.
ETC_SKIP = {"qemu", "storage", "secrets", "nodedev"}
# libvirt's QEMU driver (Debian build) looks up the user and group it was built with before
# it reads qemu.conf, and fails without them. Instead of adding them to this machine, each
# namespace gets private copies of /etc/passwd and /etc/group that have them.
QEMU_ACCOUNTS = {"passwd": ["libvirt-qemu"], "group": ["libvirt-qemu", "kvm"]}
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
DAEMON_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LC_ALL": "C",
    # Cyrus SASL reads libvirt.conf from here (in-namespace path): /etc/sasl2 is the machine's.
    "SASL_CONF_PATH": "/etc/libvirt/sasl2",
}
# With DIR/hvN/etc/passwd.db (require_password), the host's daemon asks for a SASL login.
SASL_DB = "passwd.db"
# DIR/hvN/auth.conf: the login for the lab's own virsh calls (libvirt's client auth file).
AUTH_CONF = "auth.conf"
SASL_CONF = """\
# Written by lab/fleet.py: libvirtd's SASL, used when passwd.db exists (require_password).
mech_list: scram-sha-256
sasldb_path: /etc/libvirt/passwd.db
"""

LIBVIRTD_CONF = """\
# Written by lab/fleet.py for {hostname} ({name}); in-namespace paths.
host_uuid = "{host_uuid}"
unix_sock_group = "root"
unix_sock_ro_perms = "0777"
unix_sock_rw_perms = "0770"
unix_sock_admin_perms = "0700"
auth_unix_ro = "{auth}"
auth_unix_rw = "{auth}"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
"""

QEMU_CONF = """\
# Written by lab/fleet.py for {hostname} ({name}).
user = "root"
group = "root"
# No virtlogd: QEMU writes its own log and file-backed serial ports.
stdio_handler = "file"
# Daemons share the machine's cgroup tree: without this, same-named domains collide.
cgroup_controllers = [ ]
security_driver = "none"
# The guest kernel and initrd are shared by all daemons: never chown them or tag them.
dynamic_ownership = 0
remember_owner = 0
"""

# Huge pages (up(huge_pages=N)): the lab raises this machine's count of 2 MiB pages by N at up
# and lowers it by what it added at down, under one machine-wide lock, since every lab and
# everything else on the machine share the one counter. Each daemon gets a hugetlbfs of its
# own, mounted in its namespace at DIR/hvN/HUGETLBFS_DIR, which dies with it.
HUGE_PAGE_KB = 2048
HUGE_PAGES_SYSFS = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
NODE_HUGE_PAGES = "/sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages"
HUGE_PAGES_LOCK = Path("/run/berth-lab-huge-pages.lock")
HUGE_PAGES_RECORD = "huge_pages.json"  # DIR/huge_pages.json: what this lab added, per NUMA node
HUGETLBFS_DIR = "hugepages"
QEMU_CONF_HUGETLBFS = """\
# The hugetlbfs of this hypervisor's namespace (the lab reserved huge pages).
hugetlbfs_mount = "{path}"
"""


# ----------------------------------------------------------------------------- paths

def default_dir() -> Path:
    """$BERTH_LAB_DIR, else <repo>/lab/state; absolute."""
    return Path(os.environ.get("BERTH_LAB_DIR") or LAB / "state").resolve()


def _dir(dir) -> Path:
    return Path(dir).resolve() if dir else default_dir()


def _check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ValueError(f"hypervisor names are hv1, hv2, ...: not {name!r}")
    return name


# A file in a host's directory that makes its daemon report another host UUID (impersonate()).
UUID_OVERRIDE = "host_uuid.override"


def host_names(n: int) -> list[str]:
    return [f"hv{i}" for i in range(1, n + 1)]


def host_root(dir, name: str) -> Path:
    """DIR/NAME: everything of that hypervisor lives below it."""
    return _dir(dir) / _check_name(name)


def hypervisor_dirs(dir, name: str) -> dict[str, Path]:
    """In-namespace path -> real path, for the five bind-mounted directories of NAME."""
    root = host_root(dir, name)
    return {inner: root / sub for inner, sub in BIND_DIRS.items()}


def host_path(dir, name: str, inner_path: str) -> Path:
    """Real path of a path as the hypervisor NAME sees it (e.g. /var/log/libvirt/qemu/x.log)."""
    inner = os.path.normpath(inner_path)
    for mount, real in hypervisor_dirs(dir, name).items():
        if inner == mount or inner.startswith(mount + "/"):
            return real / os.path.relpath(inner, mount)
    return Path(inner)  # not bind-mounted: the same path on the real filesystem


def log_dir(dir, name: str) -> Path:
    """Real path of NAME's /var/log/libvirt/qemu (QEMU logs, file serial consoles)."""
    return host_path(dir, name, QEMU_LOG_DIR)


def socket_path(dir, name: str) -> Path:
    return host_root(dir, name) / "run" / SOCKET_NAME


def uri(dir, name: str) -> str:
    return f"qemu+unix:///system?socket={socket_path(dir, name)}"


def host_uuid(dir, name: str) -> str:
    """Deterministic: the same lab dir and name give the same UUID on every up (unless
    impersonate() gave the host another's)."""
    override = host_root(dir, name) / UUID_OVERRIDE
    if override.is_file():
        return override.read_text().strip()
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"berth-lab:{_dir(dir)}:{_check_name(name)}"))


def impersonate(dir, name: str, host_uuid_: str | None) -> int:
    """Restart NAME's libvirtd reporting ``host_uuid_`` as its host UUID (another host's, as a
    copied SMBIOS or host_uuid would), or its own again (None); return its PID."""
    override = host_root(dir, name) / UUID_OVERRIDE
    if host_uuid_:
        override.write_text(host_uuid_ + "\n")
    else:
        override.unlink(missing_ok=True)
    stop_daemon(dir, name)
    return start_daemon(dir, name)


def hostname(name: str) -> str:
    return f"berth-{name}"


def _conf(root: Path) -> Path:
    return root / "etc" / "libvirtd.conf"


def _pidfile(root: Path) -> Path:
    return root / "libvirtd.pid"


def _existing_names(base: Path) -> list[str]:
    names = set()
    if base.is_dir():
        names.update(p.name for p in base.iterdir() if p.is_dir() and NAME_RE.match(p.name))
    try:
        names.update(h["name"] for h in json.loads((base / "hosts.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return sorted(names, key=lambda n: int(n[2:]))


# ----------------------------------------------------------------------------- processes

def _proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _is_our_libvirtd(pid: int, root: Path) -> bool:
    argv = _proc_cmdline(pid)
    return (
        bool(argv)
        and os.path.basename(argv[0]) == "libvirtd"
        and str(_conf(root)) in argv
        and _alive(pid)
    )


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def daemon_pid(dir, name: str) -> int | None:
    """PID of NAME's libvirtd if it runs (checked against /proc), else None."""
    root = host_root(dir, name)
    pid = _read_pid(_pidfile(root))
    if pid and _is_our_libvirtd(pid, root):
        return pid
    return None


def _find_libvirtd(root: Path) -> list[int]:
    """Every live libvirtd started with this host's config (pidfile lost or not)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _is_our_libvirtd(int(entry), root):
            found.append(int(entry))
    return found


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def _terminate(pid: int, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, wait up to timeout, then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5.0)


def _leftovers(root: Path) -> list[int]:
    """QEMU and dnsmasq processes of this host: QEMU by pidfile under run/qemu (cmdline must
    name the guest), and any qemu-system or dnsmasq process whose mounts show this host's
    bind-mounted run dir (libvirtd starts both in its own mount namespace)."""
    pids = set()
    qdir = root / "run" / "qemu"
    if qdir.is_dir():
        for pidf in qdir.glob("*.pid"):
            pid = _read_pid(pidf)
            if not pid or not _alive(pid):
                continue
            argv = _proc_cmdline(pid)
            guest_arg = f"guest={pidf.stem}"
            if argv and "qemu-system" in os.path.basename(argv[0]) and any(
                a == guest_arg or a.startswith(guest_arg + ",") for a in argv
            ):
                pids.add(pid)
    marker = f" {root}/run "
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        argv = _proc_cmdline(pid)
        if not argv or not ("qemu-system" in os.path.basename(argv[0]) or os.path.basename(argv[0]) == "dnsmasq"):
            continue
        try:
            mountinfo = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
        if any(marker in f" {line} " for line in mountinfo.splitlines()) and _alive(pid):
            pids.add(pid)
    return sorted(pids)


# ----------------------------------------------------------------------------- huge pages

def _node_huge_pages() -> dict[int, int]:
    """{NUMA node: its count of 2 MiB pages}, as the kernel has them now."""
    counts = {}
    for entry in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        node = int(entry.name[4:])
        counts[node] = int(Path(NODE_HUGE_PAGES.format(node=node)).read_text())
    return counts


@contextlib.contextmanager
def _huge_pages_locked():
    with open(HUGE_PAGES_LOCK, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def huge_pages_added(dir) -> dict[int, int]:
    """{NUMA node: 2 MiB pages} this lab added to the machine's (empty: none)."""
    try:
        record = json.loads((_dir(dir) / HUGE_PAGES_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return {int(node): int(count) for node, count in record.get("added", {}).items()}


def _reserve_huge_pages(base: Path, count: int) -> dict[int, int]:
    """Raise the machine's 2 MiB pages so that this lab has added ``count`` (an up again adds
    only what is missing); record what was added per node before anything else can fail, so
    that down gives it back. RuntimeError if the kernel cannot find the memory."""
    with _huge_pages_locked():
        added = huge_pages_added(base)
        missing = count - sum(added.values())
        if missing <= 0:
            return added
        before = _node_huge_pages()
        total = int(HUGE_PAGES_SYSFS.read_text())
        HUGE_PAGES_SYSFS.write_text(str(total + missing))
        after = _node_huge_pages()
        for node in after:
            added[node] = added.get(node, 0) + max(0, after[node] - before.get(node, 0))
        _write(base / HUGE_PAGES_RECORD, json.dumps({"added": added}) + "\n")
    got = sum(added.values())
    if got < count:
        _release_huge_pages(base)
        raise RuntimeError(f"the kernel gave {got} of the {count} huge pages of {HUGE_PAGE_KB} KiB asked "
                           f"(memory too fragmented or too small): given back")
    return added


def _release_huge_pages(base: Path) -> None:
    """Give back what _reserve_huge_pages added: the machine's count lowered by it (pages still
    in use become surplus, which the kernel frees when their user ends)."""
    with _huge_pages_locked():
        added = huge_pages_added(base)
        for node, count in added.items():
            path = Path(NODE_HUGE_PAGES.format(node=node))
            path.write_text(str(max(0, int(path.read_text()) - count)))
        (base / HUGE_PAGES_RECORD).unlink(missing_ok=True)


def reserved_huge_pages(dir, hosts: int) -> list[str]:
    """Nova's ``reserved_huge_pages`` for each of the lab's ``hosts`` hypervisors: every lab
    hypervisor sees all of the machine's 2 MiB pages, so each keeps back all but its share of
    what the lab added (what else the machine holds included), node by node."""
    machine = _node_huge_pages()
    added = huge_pages_added(dir)
    return [f"node:{node},size:{HUGE_PAGE_KB},count:{machine[node] - added.get(node, 0) // hosts}"
            for node in sorted(machine)]


# ----------------------------------------------------------------------------- virsh

def _virsh_env(uri_: str) -> dict:
    """virsh's environment: with the host's auth.conf where its daemon asks for a login
    (require_password), so that the lab's own calls need no prompt."""
    env = {**os.environ, "LC_ALL": "C"}
    socket_arg = uri_.partition("socket=")[2]
    if socket_arg:
        auth = Path(socket_arg).parent.parent / AUTH_CONF
        if auth.is_file():
            env["LIBVIRT_AUTH_FILE"] = str(auth)
    return env


def virsh(uri_: str, *args: str, check: bool = True, timeout: float = 120) -> str:
    res = subprocess.run(
        ["virsh", "-q", "-c", uri_, *args],
        capture_output=True, text=True, timeout=timeout, env=_virsh_env(uri_),
    )
    if check and res.returncode != 0:
        raise RuntimeError(f"virsh -c {uri_} {' '.join(args)}: {res.stderr.strip()}")
    return res.stdout


def _virsh_ok(uri_: str, *args: str) -> bool:
    try:
        return subprocess.run(
            ["virsh", "-q", "-c", uri_, *args], capture_output=True, timeout=60, env=_virsh_env(uri_),
        ).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _domains(uri_: str) -> list[str]:
    return [d.strip() for d in virsh(uri_, "list", "--all", "--name").splitlines() if d.strip()]


# ----------------------------------------------------------------------------- daemons

def _prepare(base: Path, name: str) -> Path:
    """Create NAME's directories and configs (configs rewritten on every start)."""
    root = host_root(base, name)
    for real in hypervisor_dirs(base, name).values():
        real.mkdir(parents=True, exist_ok=True)
    etc = root / "etc"
    if SYSTEM_ETC.is_dir():
        for entry in SYSTEM_ETC.iterdir():
            if entry.name in ETC_SKIP or entry.name in ("libvirtd.conf", "qemu.conf"):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, etc / entry.name, symlinks=True, dirs_exist_ok=True)
            elif not (etc / entry.name).exists():
                shutil.copy2(entry, etc / entry.name, follow_symlinks=False)
    _write_nss(root)
    _write_hosts(root, hostname(name))
    auth = "sasl" if (etc / SASL_DB).exists() else "none"
    fmt = dict(name=name, hostname=hostname(name), host_uuid=host_uuid(base, name), auth=auth)
    _conf(root).write_text(LIBVIRTD_CONF.format(**fmt))
    (etc / "sasl2").mkdir(exist_ok=True)
    (etc / "sasl2" / "libvirt.conf").write_text(SASL_CONF)
    qemu_conf = QEMU_CONF.format(**fmt)
    hugetlbfs = root / HUGETLBFS_DIR
    if huge_pages_added(base):
        hugetlbfs.mkdir(exist_ok=True)
        qemu_conf += QEMU_CONF_HUGETLBFS.format(path=hugetlbfs)
    elif hugetlbfs.is_dir():
        hugetlbfs.rmdir()
    (etc / "qemu.conf").write_text(qemu_conf)
    (root / "log" / "qemu").mkdir(exist_ok=True)
    return root


def _write_nss(root: Path) -> None:
    """root/nss/passwd and root/nss/group: the system's plus any missing QEMU accounts."""
    nss = root / "nss"
    nss.mkdir(exist_ok=True)
    texts = {db: Path(f"/etc/{db}").read_text() for db in QEMU_ACCOUNTS}
    used = {db: {int(f[2]) for f in (l.split(":") for l in t.splitlines()) if len(f) > 3
                 and f[2].isdigit()} for db, t in texts.items()}
    free = 64055
    while free in used["passwd"] or free in used["group"]:
        free += 1
    ids = {}
    for db, names in QEMU_ACCOUNTS.items():
        present = {l.split(":", 1)[0] for l in texts[db].splitlines()}
        lines = texts[db].rstrip("\n").split("\n")
        for acct in names:
            if acct in present:
                continue
            if acct not in ids:
                ids[acct] = free
                free += 1
                while free in used["passwd"] or free in used["group"]:
                    free += 1
            if db == "passwd":
                lines.append(f"{acct}:x:{ids[acct]}:{ids[acct]}:Libvirt Qemu (Berth lab):"
                             "/var/lib/libvirt:/usr/sbin/nologin")
            else:
                lines.append(f"{acct}:x:{ids[acct]}:")
        _write(nss / db, "\n".join(lines) + "\n")


def _write_hosts(root: Path, host: str) -> None:
    """root/nss/hosts: the system's plus the hypervisor's own name, as Debian lists it.

    libvirt's getHostname() canonicalises the name through the resolver; without an entry it
    asks DNS, which on these machines (no internet) now and then takes 5 s to give up.
    """
    text = Path("/etc/hosts").read_text().rstrip("\n")
    _write(root / "nss" / "hosts", f"{text}\n127.0.1.1 {host}\n")


def _ensure_mountpoints() -> None:
    # The bind mounts need their targets on the real filesystem (no systemd made them).
    for inner in BIND_DIRS:
        os.makedirs(inner, exist_ok=True)


def _caps_dir(root: Path) -> Path:
    return root / "cache" / "qemu" / "capabilities"


def _has_caps(path: Path) -> bool:
    return path.is_dir() and any(path.glob("*.xml"))


def _seed_caps(base: Path, root: Path) -> bool:
    """Copy the saved QEMU capabilities cache into a not yet started daemon's cache."""
    src = base / CAPS_CACHE
    dst = _caps_dir(root)
    if _has_caps(dst) or not _has_caps(src):
        return False
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.glob("*.xml"):
        shutil.copy2(f, dst / f.name)
    return True


def _save_caps(base: Path, root: Path) -> None:
    src = _caps_dir(root)
    if not _has_caps(src):
        return
    dst = base / CAPS_CACHE
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.glob("*.xml"):
        tmp = dst / (f.name + ".tmp")
        shutil.copy2(f, tmp)
        os.replace(tmp, dst / f.name)


def _spawn(base: Path, name: str) -> None:
    """Start NAME's libvirtd, detached (setsid -f: it is not our child), in its namespace."""
    root = host_root(base, name)
    out = open(root / "libvirtd.out", "ab")
    try:
        subprocess.run(
            [
                "setsid", "-f",
                "unshare", "-m", "-u", "--propagation", "private", "--",
                sys.executable, "-S", "-E", str(FLEET_PY), "_ns-exec",
                "--root", str(root), "--hostname", hostname(name),
            ],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=DAEMON_ENV, check=True,
            close_fds=True,
        )
    finally:
        out.close()


# prctl(2): the orphans of this process's descendants are reparented to it, not to PID 1.
PR_SET_CHILD_SUBREAPER = 36


def _ns_exec(root: Path, host: str) -> None:
    """Runs inside the new namespaces: bind-mount, set the hostname, start libvirtd, then reap.

    libvirtd daemonizes every QEMU (and dnsmasq) it starts, so they are orphans, reaped by the
    nearest subreaper above them, else by PID 1. A VM's PID 1 may reap only every second or two
    (these machines' does), and libvirt waits for a QEMU it stops to be gone, reaped: every
    virsh destroy, delete, move or power-off took about 2 s for it. This process, libvirtd's
    parent, is their subreaper instead and reaps each at once; it exits when none is left
    (libvirtd writes its own PID to its pidfile, which is what the rest of this file reads)."""
    for inner, sub in BIND_DIRS.items():
        subprocess.run(["mount", "--bind", str(root / sub), inner], check=True)
    for db in (*QEMU_ACCOUNTS, "hosts"):
        subprocess.run(["mount", "--bind", str(root / "nss" / db), f"/etc/{db}"], check=True)
    if (root / HUGETLBFS_DIR).is_dir():
        # Private to this namespace: gone with the daemon and its QEMUs, nothing to unmount.
        subprocess.run(["mount", "-t", "hugetlbfs", "-o", f"pagesize={HUGE_PAGE_KB}k", "berth-lab",
                        str(root / HUGETLBFS_DIR)], check=True)
    socket.sethostname(host)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.fork() == 0:
        os.execvp("libvirtd", ["libvirtd", "-f", str(_conf(root)), "-p", str(_pidfile(root))])
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def _socket_answers(path: Path) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _wait_ready(base: Path, name: str, timeout: float = START_TIMEOUT) -> int:
    """Wait for the pidfile to name a live libvirtd and its socket to answer; return its PID."""
    root = host_root(base, name)
    deadline = time.monotonic() + timeout
    pid = None
    while time.monotonic() < deadline:
        pid = daemon_pid(base, name)
        if pid and _socket_answers(socket_path(base, name)):
            if _virsh_ok(uri(base, name), "uri"):
                return pid
        time.sleep(0.05)
    tail = ""
    with contextlib.suppress(OSError):
        tail = (root / "libvirtd.out").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"{name}: libvirtd not answering on {socket_path(base, name)} "
                       f"after {timeout:.0f} s (pid {pid}); output:\n{tail}")


def _clear_stale(base: Path, name: str) -> None:
    root = host_root(base, name)
    pidf = _pidfile(root)
    if pidf.exists() and daemon_pid(base, name) is None:
        pidf.unlink(missing_ok=True)
    # A libvirtd of this host whose pidfile was lost: stop it rather than start a second one.
    for pid in _find_libvirtd(root):
        _terminate(pid)


def _ensure_pool(uri_: str) -> None:
    if not _virsh_ok(uri_, "pool-info", POOL_NAME):
        virsh(uri_, "pool-define-as", POOL_NAME, "dir", "--target", POOL_TARGET)
    info = virsh(uri_, "pool-info", POOL_NAME)
    if not re.search(r"^State:\s+running", info, re.M):
        virsh(uri_, "pool-build", POOL_NAME, check=False)
        virsh(uri_, "pool-start", POOL_NAME)
    if not re.search(r"^Autostart:\s+yes", info, re.M):
        virsh(uri_, "pool-autostart", POOL_NAME)


def bridge_name(dir, name: str) -> str:
    """The Linux bridge of NAME's lab network: unique per lab and host (all labs share this
    machine's network namespace), at most 15 characters."""
    digest = uuid.uuid5(uuid.NAMESPACE_URL, f"berth-lab-net:{_dir(dir)}:{_check_name(name)}").hex
    return f"bth{digest[:8]}"


def _network_xml(bridge: str, third_octets: tuple[int, int]) -> str:
    prefix = f"10.{third_octets[0]}.{third_octets[1]}"
    # forward mode 'open': routed to the host, and libvirt adds no firewall rule on this shared
    # machine (NAT would rewrite its iptables); the controller reaches the guests on the bridge.
    return (f"<network><name>{NETWORK_NAME}</name><forward mode='open'/>"
            f"<bridge name='{bridge}' stp='off' delay='0'/>"
            f"<ip address='{prefix}.1' netmask='255.255.255.0'>"
            f"<dhcp><range start='{prefix}.10' end='{prefix}.250'/></dhcp></ip></network>")


def _ensure_network(base: Path, name: str) -> None:
    """NAME's network NETWORK_NAME defined, active and autostarted, on a free subnet."""
    uri_ = uri(base, name)
    if _virsh_ok(uri_, "net-info", NETWORK_NAME):
        if not re.search(r"^Active:\s+yes", virsh(uri_, "net-info", NETWORK_NAME), re.M):
            virsh(uri_, "net-start", NETWORK_NAME)
        return
    bridge = bridge_name(base, name)
    first = int(uuid.uuid5(uuid.NAMESPACE_URL, f"berth-lab-subnet:{base}:{name}").hex, 16) % NETWORK_SUBNETS
    errors = []
    for attempt in range(NETWORK_ATTEMPTS):
        index = (first + attempt) % NETWORK_SUBNETS
        xml = base / name / "network.xml"
        xml.write_text(_network_xml(bridge, (200 + index // 256, index % 256)))
        virsh(uri_, "net-define", str(xml))
        started = subprocess.run(["virsh", "-q", "-c", uri_, "net-start", NETWORK_NAME], capture_output=True,
                                 text=True, timeout=60, env=_virsh_env(uri_))
        if started.returncode == 0:
            virsh(uri_, "net-autostart", NETWORK_NAME)
            return
        errors.append(started.stderr.strip())
        virsh(uri_, "net-undefine", NETWORK_NAME, check=False)
        if "in use" not in started.stderr:
            break
    raise RuntimeError(f"{name}: cannot start network {NETWORK_NAME}: {errors[-1]}")


def _remove_network(base: Path, name: str) -> None:
    """NAME's network gone: stopped through its daemon (which takes the bridge and dnsmasq
    down) where it still answers, the bridge deleted if a dead daemon left it."""
    uri_ = uri(base, name)
    if daemon_pid(base, name):
        virsh(uri_, "net-destroy", NETWORK_NAME, check=False, timeout=60)
        virsh(uri_, "net-undefine", NETWORK_NAME, check=False, timeout=60)


def _remove_bridge(base: Path, name: str) -> None:
    bridge = bridge_name(base, name)
    if Path("/sys/class/net", bridge).exists():
        subprocess.run(["ip", "link", "delete", bridge], capture_output=True, check=False)


def _probe_caps(uri_: str) -> None:
    """Make the daemon probe QEMU now (about 5 s once) so its cache can be copied."""
    virsh(uri_, "domcapabilities", "--virttype", "qemu", "--arch", "x86_64", check=False)


@contextlib.contextmanager
def _locked(base: Path):
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".fleet.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _host_record(base: Path, name: str) -> dict:
    return dict(
        name=name,
        uri=uri(base, name),
        pid=daemon_pid(base, name),
        host_uuid=host_uuid(base, name),
        root=str(host_root(base, name)),
        hostname=hostname(name),
        socket=str(socket_path(base, name)),
        log_dir=str(log_dir(base, name)),
    )


def _check_socket_len(base: Path, names: list[str]) -> None:
    for name in names:
        longest = host_root(base, name) / "run" / LONGEST_SOCKET_NAME
        if len(str(longest)) > MAX_SOCKET_PATH:
            raise ValueError(f"lab dir too deep: {longest} is {len(str(longest))} chars, unix "
                             f"socket paths must stay under {MAX_SOCKET_PATH + 1}; use --dir")


def _start_one(base: Path, name: str) -> int:
    """Start NAME if it is not running; return its PID (running hosts are left alone)."""
    pid = daemon_pid(base, name)
    if pid:
        return pid
    _clear_stale(base, name)
    root = _prepare(base, name)
    _seed_caps(base, root)
    _spawn(base, name)
    pid = _wait_ready(base, name)
    _save_caps(base, root)
    return pid


# ----------------------------------------------------------------------------- inventory

def _yaml_scalar(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_./-]+", value) else json.dumps(value)


def inventory_dir(dir=None) -> Path:
    """The inventory directory to pass to ansible-playbook -i."""
    return _dir(dir) / "inventory"


def instances_inventory_dir(dir=None) -> Path:
    """The inventory of the lab's instances (berth.fleet.instances), for a second -i: each guest
    by its instance name, reached over SSH at the address libvirt's DHCP leases give it."""
    return _dir(dir) / "instances"


def ledger_path(dir=None) -> Path:
    """The lab's own ledger: it lives and dies with the lab, so a new lab starts empty."""
    return _dir(dir) / "ledger.sqlite3"


def ledger_url(dir=None) -> str:
    """The lab's ledger as Berth names it (berth_ledger_url in the lab's inventory)."""
    return "sqlite:///" + str(ledger_path(dir))


# The lab's daemons listen on sockets of their own (qemu+unix:///system?socket=...): Berth's URI
# policy refuses socket= unless the operator's source allows it, as the lab's sources do.
LAB_URI_POLICY = ["uri_policy:", "  allow_parameters: [socket]  # the lab's daemons' own sockets"]


def write_inventory(base: Path, names: list[str], boot: dict, host_settings: dict | None = None) -> Path:
    """The lab's inventory; ``host_settings`` go into every hypervisor's entry of the source."""
    inv = inventory_dir(base)
    (inv / "group_vars").mkdir(parents=True, exist_ok=True)
    lines = [
        "# Written by lab/fleet.py: the lab's hypervisors for the berth.fleet.hypervisors "
        "inventory plugin.",
        "plugin: berth.fleet.hypervisors",
        f"storage_pool: {POOL_NAME}",
        *LAB_URI_POLICY,
        "hypervisors:",
    ]
    for name in names:
        lines += [f"  {name}:", f"    uri: {json.dumps(uri(base, name))}"]
        lines += [f"    {key}: {json.dumps(value)}" for key, value in (host_settings or {}).items()]
    _write(inv / "fleet.berth.yml", "\n".join(lines) + "\n")
    all_yml = "\n".join([
        "ansible_connection: local",
        'ansible_python_interpreter: "{{ ansible_playbook_python }}"',
        "berth_domain_type: qemu          # Linux guests hang under this machine's nested KVM "
        "(TESTBED.md)",
        f"berth_boot_kernel: {_yaml_scalar(boot['kernel'])}",
        f"berth_boot_initrd: {_yaml_scalar(boot['initrd'])}",
        'berth_boot_cmdline: "console=ttyS0"',
        f"berth_serial_log_dir: {QEMU_LOG_DIR}",
        "berth_migration_address: 127.0.0.1  # every lab hypervisor is this machine",
        f"berth_ledger_url: {_yaml_scalar(ledger_url(base))}",
        "# The lab's tests make their images in their temporary directories: the lab allows uploads",
        "# from there (a real inventory names its own image directories, or none).",
        "berth_image_source_dirs: [/tmp]",
        "# Runs with these variables but without the source above (a ledger-only launch) read the",
        "# lab's URIs from the ledger: the same policy as the source's.",
        "berth_uri_policy: {allow_parameters: [socket]}",
    ]) + "\n"
    _write(inv / "group_vars" / "all.yml", all_yml)
    write_instances_inventory(base, boot)
    return inv / "fleet.berth.yml"


def write_instances_inventory(base: Path, boot: dict) -> Path:
    """DIR/instances: a berth.fleet.instances source on the lab's ledger, and how to log into
    the guests: root with the lab's key, their host key checked against the lab's known_hosts
    (every lab guest has the same host key; the lab's networks are 10.200-249.x.x)."""
    inv = instances_inventory_dir(base)
    (inv / "group_vars").mkdir(parents=True, exist_ok=True)
    source = "\n".join([
        "# Written by lab/fleet.py: the lab's instances, from its ledger (berth.fleet.instances).",
        "plugin: berth.fleet.instances",
        f"ledger_url: {_yaml_scalar(ledger_url(base))}",
        *LAB_URI_POLICY,
        "# Read right after launches: wait for booting guests' DHCP leases.",
        "wait_for_addresses: 120",
    ]) + "\n"
    _write(inv / "lab.berth_instances.yml", source)
    known_hosts = Path(boot["ssh_key"]).with_name("known_hosts")
    _write(known_hosts, f"10.2??.*.* {Path(boot['ssh_host_key']).read_text().strip()}\n")
    group_vars = "\n".join([
        "# Written by lab/fleet.py: how the controller logs into the lab's guests (busybox: raw only).",
        "ansible_connection: ssh",
        "ansible_user: root",
        f"ansible_ssh_private_key_file: {_yaml_scalar(boot['ssh_key'])}",
        f"ansible_ssh_common_args: {json.dumps('-o UserKnownHostsFile=' + str(known_hosts))}",
    ]) + "\n"
    _write(inv / "group_vars" / "berth_instances.yml", group_vars)
    return inv


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_hosts_json(base: Path, records: list[dict]) -> None:
    _write(base / "hosts.json", json.dumps(records, indent=2) + "\n")


# ----------------------------------------------------------------------------- API

def up(dir=None, hosts: int = 3, huge_pages: int = 0, cpu_dedicated_set: str | None = None,
       cpu_shared_set: str | None = None) -> list[dict]:
    """Bring up hv1..hvN (idempotent) and write hosts.json and the inventory.

    ``huge_pages``: 2 MiB pages the lab reserves on this machine (given back at down), each
    daemon's QEMU backing guests with them through a hugetlbfs of its own; every hypervisor's
    entry in the inventory source gets its share as Nova's ``reserved_huge_pages`` (the rest
    kept back). ``cpu_dedicated_set`` and ``cpu_shared_set`` go into every entry as they are.

    Returns one dict per host: name, uri, pid, host_uuid, root, hostname, socket, log_dir.
    """
    if hosts < 1:
        raise ValueError("--hosts must be at least 1")
    if huge_pages < 0:
        raise ValueError("--huge-pages must be 0 or more")
    base = _dir(dir)
    names = host_names(hosts)
    _check_socket_len(base, names)
    if os.geteuid() != 0:
        raise PermissionError("the lab fleet needs root (namespaces, bind mounts, libvirtd)")
    with _locked(base):
        _ensure_mountpoints()
        if huge_pages:
            _reserve_huge_pages(base, huge_pages)
        boot: dict = {}
        errors: list[BaseException] = []

        def build_guest():
            try:
                boot.update(guest.build(base))
            except BaseException as exc:  # re-raised below
                errors.append(exc)

        builder = threading.Thread(target=build_guest, name="guest-build")
        builder.start()
        try:
            to_start = [n for n in names if daemon_pid(base, n) is None]
            have_caps = _has_caps(base / CAPS_CACHE) or any(
                _has_caps(_caps_dir(host_root(base, n))) for n in names)
            if to_start and not have_caps:
                # Nobody has probed QEMU yet: one daemon probes, the others get its cache.
                first = to_start.pop(0)
                _start_one(base, first)
                _probe_caps(uri(base, first))
                _save_caps(base, host_root(base, first))
            elif not _has_caps(base / CAPS_CACHE):
                for n in names:
                    _save_caps(base, host_root(base, n))
            # Start the rest together, then wait for each.
            for n in to_start:
                _clear_stale(base, n)
                root = _prepare(base, n)
                _seed_caps(base, root)
                _spawn(base, n)
            for n in to_start:
                _wait_ready(base, n)
            for n in names:
                _ensure_pool(uri(base, n))
                _ensure_network(base, n)
        finally:
            builder.join()
        if errors:
            raise errors[0]
        records = [_host_record(base, n) for n in names]
        _write_hosts_json(base, records)
        settings = {key: value for key, value in (("cpu_dedicated_set", cpu_dedicated_set),
                                                  ("cpu_shared_set", cpu_shared_set)) if value is not None}
        if huge_pages:
            settings["reserved_huge_pages"] = reserved_huge_pages(base, hosts)
        write_inventory(base, names, boot, settings)
    return records


def start_daemon(dir, name: str) -> int:
    """Start NAME's libvirtd again with its existing state; return its PID."""
    base = _dir(dir)
    root = host_root(base, name)
    if not _conf(root).is_file():
        raise FileNotFoundError(f"{name} is not set up under {base}: run up first")
    with _locked(base):
        _ensure_mountpoints()
        pid = _start_one(base, name)
        _ensure_pool(uri(base, name))
        _ensure_network(base, name)
        _update_hosts_json(base, name)
    return pid


def require_password(dir, name: str, username: str, password: str) -> int:
    """From now on NAME's daemon asks for a SASL login (scram-sha-256) with this user name and
    password, as a libvirtd with auth_unix_rw = "sasl" does. Restarts it; returns its PID.

    The lab's own virsh calls log in through DIR/NAME/auth.conf; nothing else knows the password.
    """
    base = _dir(dir)
    root = host_root(base, name)
    stop_daemon(base, name)
    # The realm is the daemon's host name (in its UTS namespace), where SASL looks the user up.
    subprocess.run(["saslpasswd2", "-c", "-p", "-a", "libvirt", "-u", hostname(name),
                    "-f", str(root / "etc" / SASL_DB), username],
                   input=password, text=True, check=True, capture_output=True)
    auth = root / AUTH_CONF
    auth.touch(mode=0o600)
    auth.write_text(f"[credentials-lab]\nauthname={username}\npassword={password}\n\n"
                    "[auth-libvirt-default]\ncredentials=lab\n")
    return start_daemon(base, name)


def stop_daemon(dir, name: str) -> int | None:
    """Stop NAME's libvirtd (SIGTERM, SIGKILL after 10 s); its domains and files stay.

    Returns the PID that was stopped, or None if it was not running."""
    base = _dir(dir)
    root = host_root(base, name)
    with _locked(base):
        pid = daemon_pid(base, name)
        for p in sorted(set(([pid] if pid else []) + _find_libvirtd(root))):
            _terminate(p)
        _update_hosts_json(base, name)
    return pid


def _update_hosts_json(base: Path, name: str) -> None:
    path = base / "hosts.json"
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    for rec in records:
        if rec.get("name") == name:
            rec["pid"] = daemon_pid(base, name)
    _write_hosts_json(base, records)


def hosts(dir=None) -> list[dict]:
    """The records of hosts.json (empty if the fleet is down)."""
    try:
        return json.loads((_dir(dir) / "hosts.json").read_text())
    except (OSError, ValueError):
        return []


def status(dir=None) -> list[dict]:
    """Per known host: name, uri, running, pid, domains (count, None if not running)."""
    base = _dir(dir)
    out = []
    for name in _existing_names(base):
        pid = daemon_pid(base, name)
        domains = None
        if pid:
            with contextlib.suppress(Exception):
                domains = len(_domains(uri(base, name)))
        out.append(dict(name=name, uri=uri(base, name), running=pid is not None, pid=pid,
                        domains=domains))
    return out


def down(dir=None) -> list[str]:
    """Destroy every domain and volume, stop every daemon and leftover QEMU, remove the
    per-host dirs, hosts.json and the inventory. Keeps the guest and capabilities caches.
    Idempotent. Returns the names of the hosts it tore down."""
    base = _dir(dir)
    if not base.is_dir():
        return []
    with _locked(base):
        names = _existing_names(base)
        for name in names:
            root = host_root(base, name)
            u = uri(base, name)
            if daemon_pid(base, name):
                with contextlib.suppress(Exception):
                    for dom in _domains(u):
                        virsh(u, "destroy", dom, check=False, timeout=60)
                        if not _virsh_ok(u, "undefine", "--nvram", dom):
                            virsh(u, "undefine", dom, check=False, timeout=60)
                with contextlib.suppress(Exception):
                    for line in virsh(u, "vol-list", POOL_NAME, check=False).splitlines():
                        if line.split():
                            virsh(u, "vol-delete", "--pool", POOL_NAME, line.split()[0],
                                  check=False)
                with contextlib.suppress(Exception):
                    _remove_network(base, name)
            pid = daemon_pid(base, name)
            for p in sorted(set(([pid] if pid else []) + _find_libvirtd(root))):
                _terminate(p)
            for qpid in _leftovers(root):
                _terminate(qpid, timeout=5.0)
            _remove_bridge(base, name)
            shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(inventory_dir(base), ignore_errors=True)
        shutil.rmtree(instances_inventory_dir(base), ignore_errors=True)
        (base / "hosts.json").unlink(missing_ok=True)
        # After every QEMU is gone: the pages are free again, and the machine never keeps them.
        _release_huge_pages(base)
        for suffix in ("", "-wal", "-shm"):
            Path(str(ledger_path(base)) + suffix).unlink(missing_ok=True)
    return names


def discard(dir) -> None:
    """Down, then remove the lab dir itself with its guest and capabilities caches (17 MB): for a
    lab made for one run in a temporary directory (the tests'), which nothing will reuse."""
    if not dir:
        raise ValueError("discard removes the lab dir: name it (the default one keeps its caches)")
    down(dir)
    shutil.rmtree(_dir(dir), ignore_errors=True)


# ----------------------------------------------------------------------------- CLI

def _cli_up(args) -> int:
    t0 = time.monotonic()
    records = up(args.dir, args.hosts, args.huge_pages, args.cpu_dedicated_set, args.cpu_shared_set)
    took = time.monotonic() - t0
    base = _dir(args.dir)
    for r in records:
        print(f"{r['name']}  pid {r['pid']:<7} {r['uri']}")
    extra = [s["name"] for s in status(base)
             if s["running"] and s["name"] not in {r["name"] for r in records}]
    if extra:
        print(f"note: {', '.join(extra)} still running and not in the inventory (down stops them)")
    print(f"inventory: {base / 'inventory' / 'fleet.berth.yml'}")
    print(f"ledger: {ledger_url(base)} (berth_ledger_url in the inventory's group_vars/all.yml)")
    print(f"{len(records)} hypervisors up in {took:.1f} s (lab dir {base})")
    return 0


def _cli_down(args) -> int:
    t0 = time.monotonic()
    names = down(args.dir)
    print(f"down: {', '.join(names) or 'nothing was up'} ({time.monotonic() - t0:.1f} s)")
    return 0


def _cli_status(args) -> int:
    rows = status(args.dir)
    if not rows:
        print("no lab hypervisors")
        return 0
    for r in rows:
        state = f"running (pid {r['pid']})" if r["running"] else "stopped"
        doms = "-" if r["domains"] is None else r["domains"]
        print(f"{r['name']}  {state:<22} domains {doms:<3} {r['uri']}")
    return 0


def _cli_stop(args) -> int:
    pid = stop_daemon(args.dir, args.name)
    print(f"{args.name}: " + (f"libvirtd {pid} stopped" if pid else "was not running"))
    return 0


def _cli_start(args) -> int:
    pid = start_daemon(args.dir, args.name)
    print(f"{args.name}: libvirtd running, pid {pid}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Berth's lab fleet of namespaced libvirtd daemons.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    dir_help = "lab dir (default: $BERTH_LAB_DIR, else <repo>/lab/state)"
    p = sub.add_parser("up", help="start hv1..hvN, write the inventory")
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--huge-pages", type=int, default=0, metavar="N",
                   help="reserve N 2 MiB pages on this machine for the lab's guests (given back at down)")
    p.add_argument("--cpu-dedicated-set", help="every hypervisor's cpu_dedicated_set in the inventory (e.g. 1)")
    p.add_argument("--cpu-shared-set", help="every hypervisor's cpu_shared_set in the inventory (e.g. 0)")
    p.add_argument("--dir", help=dir_help)
    p.set_defaults(func=_cli_up)
    p = sub.add_parser("down", help="tear everything down (keeps the guest cache)")
    p.add_argument("--dir", help=dir_help)
    p.set_defaults(func=_cli_down)
    p = sub.add_parser("status", help="running or not, URI, number of domains")
    p.add_argument("--dir", help=dir_help)
    p.set_defaults(func=_cli_status)
    for cmd, func, text in (("stop-daemon", _cli_stop, "stop one libvirtd, keep its state"),
                            ("start-daemon", _cli_start, "start one stopped libvirtd again")):
        p = sub.add_parser(cmd, help=text)
        p.add_argument("name")
        p.add_argument("--dir", help=dir_help)
        p.set_defaults(func=func)
    p = sub.add_parser("inventory-path", help="print the inventory directory for ansible -i")
    p.add_argument("--dir", help=dir_help)
    p.set_defaults(func=lambda a: print(inventory_dir(a.dir)))
    p = sub.add_parser("instances-path", help="print the instances' inventory directory for a second -i")
    p.add_argument("--dir", help=dir_help)
    p.set_defaults(func=lambda a: print(instances_inventory_dir(a.dir)))
    p = sub.add_parser("ledger-url", help="print the lab's ledger URL (BERTH_LEDGER_URL for runs without -i)")
    p.add_argument("--dir", help=dir_help)
    p.set_defaults(func=lambda a: print(ledger_url(a.dir)))
    p = sub.add_parser("_ns-exec", help=argparse.SUPPRESS)
    p.add_argument("--root", required=True)
    p.add_argument("--hostname", required=True)
    p.set_defaults(func=lambda a: _ns_exec(Path(a.root), a.hostname))
    args = ap.parse_args(argv)
    try:
        return args.func(args) or 0
    except (RuntimeError, ValueError, FileNotFoundError, PermissionError) as exc:
        print(f"fleet: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
