#!/usr/bin/env python3
"""Build the lab's tiny bootable guest: a Debian cloud kernel and a busybox initramfs.

    python3 lab/guest.py build [--dir DIR]

writes DIR/guest/vmlinuz and DIR/guest/initrd.img (DIR defaults to $BERTH_LAB_DIR, else
<repo>/lab/state), and the SSH key that logs into the guest, DIR/guest/ssh/id_ed25519. All are
cached: when they exist (built by this version of the recipe) nothing is downloaded.

The guest is booted directly by libvirt (<kernel>, <initrd>, <cmdline>) with no disk. Its /init
(PID 1, a busybox sh script) mounts proc, sys and devtmpfs, reads ``berth.instance=<value>`` from
/proc/cmdline and writes

    BERTH-GUEST-BOOTED instance=<value>

to the serial port (/dev/ttyS0), again every 30 s, and never exits. Beside that, it brings up the
network where the domain has a NIC: it loads the virtio-net driver (shipped as modules of the
kernel package), asks for an address with busybox's udhcpc (printing ``BERTH-GUEST-NET eth0
<address>`` on the serial console when it has one) and starts dropbear, an SSH server that lets
root in with DIR/guest/ssh/id_ed25519 only. On a libvirt network with DHCP that address is in
libvirt's leases, and ``ssh -i DIR/guest/ssh/id_ed25519 root@<address>`` reaches the guest.

With ``berth.agent=<address>,<address>...`` on the kernel command line the guest answers the
QEMU guest agent's channel itself, as a hostile guest would: its /init loads the virtio console
driver and answers ``guest-sync`` and ``guest-network-get-interfaces``, the latter with eth0's MAC
and those addresses verbatim (``own`` stands for eth0's DHCP address), whatever they are. Tests
use it to check that what a guest says about its addresses is only data.

It reads its NoCloud seed where the domain has one on IDE (launched with ``cdrom_bus: ide``: the
cloud kernel has no AHCI driver for the default SATA bus): it prints ``BERTH-GUEST-KEYS <count>``
for the meta-data's public keys, which it adds to root's authorized keys, and where the seed's
network-config gives eth0's MAC a static IPv4 address, it sets that address (and the default
gateway) instead of asking DHCP, and prints ``BERTH-GUEST-NET eth0 <address>`` as for a lease.

Once at boot it prints what CPU it sees in /proc/cpuinfo::

    BERTH-GUEST-CPU sockets=<distinct physical ids> cores=<per socket> threads=<per core> processors=<count> model=<model name>

It answers the ACPI power button as a real guest does (the graceful shutdown of
berth.fleet.power and resize): /init loads the kernel's ACPI button and evdev modules and starts
busybox's acpid, whose action for the button writes ``BERTH-GUEST-POWEROFF`` to the serial port and
powers the guest off. With ``berth.acpi=ignore`` on the kernel command line it does not, as a
guest without an ACPI daemon: a graceful shutdown then times out.

Once at boot it lists its disks (it loads the virtio-blk driver) and prints each with its size
in bytes, from /sys/block, on the serial console as one line: ``BERTH-GUEST-DISKS vda=<bytes>
vdb=<bytes>...`` (tests of ephemeral and swap disks read it). Where the first line of vda (its
root disk) is ``BERTH-IMAGE <name>`` - a lab test's raw image says so - it then prints
``BERTH-GUEST-IMAGE <name>``: which image the root disk was made from (tests of rebuild read it);
for any other virtio disk whose first line says so it prints ``BERTH-GUEST-DISK-IMAGE <disk>
<name>`` (a rescued guest's own root disk, its vdb: tests of rescue read it).

The cloud kernel has the 8250 serial driver and its console, devtmpfs, initrd and gzip support
built in; virtio, virtio-net, the ACPI button, evdev, the PIIX IDE driver, the SCSI CD-ROM driver
and ISO 9660 are modules, copied with what they depend on.

Stdlib only; needs root (apt-get download as root, mknod), apt-get, apt-cache, dpkg-deb, cpio,
ldd (the SSH server's libraries are this machine's, which is Debian 12 like the packages) and
ssh-keygen.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAB = Path(__file__).resolve().parent
KERNEL_METAPACKAGE = "linux-image-cloud-amd64"
BUSYBOX_PACKAGE = "busybox-static"
# The SSH server and the two libraries of it that Debian 12 does not install by default.
SSH_PACKAGES = ("dropbear-bin", "libtomcrypt1", "libtommath1")
MARKER = "BERTH-GUEST-BOOTED"
NET_MARKER = "BERTH-GUEST-NET"
POWEROFF_MARKER = "BERTH-GUEST-POWEROFF"
CPU_MARKER = "BERTH-GUEST-CPU"
DISKS_MARKER = "BERTH-GUEST-DISKS"
IMAGE_MARKER = "BERTH-GUEST-IMAGE"
DISK_IMAGE_MARKER = "BERTH-GUEST-DISK-IMAGE"
# Bump when the guest's contents change: a cached guest of another format is built again.
FORMAT = 9
# Kernel modules /init loads (with what they depend on) to see a virtio NIC.
NET_MODULES = ("virtio_pci", "virtio_net")
# Kernel modules /init loads for the guest agent's virtio-serial port (berth.agent=).
AGENT_MODULES = ("virtio_pci", "virtio_console")
# The port's name, as QEMU gives it to the guest (libvirt's channel target name).
AGENT_PORT = "org.qemu.guest_agent.0"
# Kernel modules /init loads to see virtio disks (report_disks).
DISK_MODULES = ("virtio_pci", "virtio_blk")
# Kernel modules /init loads to read the NoCloud seed: a CD-ROM on IDE (the cloud kernel has no
# AHCI driver for the default SATA bus, so lab launches give cdrom_bus=ide) and its ISO 9660
# file system.
SEED_MODULES = ("ata_piix", "sr_mod", "isofs")
KEYS_MARKER = "BERTH-GUEST-KEYS"
# Kernel modules /init loads for the ACPI power button to reach acpid (an input event device).
ACPI_MODULES = ("evdev", "button")
# DIR/guest/ssh: the key pair that logs into every lab guest as root, and the guests' host key.
SSH_KEY = "id_ed25519"
HOST_KEY = "dropbear_ed25519_host_key"
# Kernel options the guest relies on; build() checks them in the package's config file.
REQUIRED_KERNEL_CONFIG = (
    "CONFIG_BLK_DEV_INITRD",
    "CONFIG_RD_GZIP",
    "CONFIG_DEVTMPFS",
    "CONFIG_SERIAL_8250",
    "CONFIG_SERIAL_8250_CONSOLE",
    "CONFIG_PROC_FS",
    "CONFIG_SYSFS",
    "CONFIG_BINFMT_ELF",
)
# Busybox applets /init uses, linked in /bin so the script works whatever busybox's
# "prefer applets" setting is; /init links the others at boot (busybox --install).
APPLETS = ("sh", "mount", "cat", "echo", "sleep", "mkdir")

INIT_SCRIPT = f"""#!/bin/sh
# Berth lab guest, PID 1: print a boot marker on the serial console, repeat it, never exit.
export PATH=/bin
trap '' HUP INT TERM QUIT USR1 USR2
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s /bin 2>/dev/null
instance=
acpi=on
agent=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    berth.instance=*) instance="${{arg#berth.instance=}}" ;;
    berth.acpi=*) acpi="${{arg#berth.acpi=}}" ;;
    berth.agent=*) agent="${{arg#berth.agent=}}" ;;
  esac
done
if [ "$acpi" != ignore ]; then
  for module in $(cat /lib/modules/acpi/load.order); do insmod "/lib/modules/acpi/$module.ko"; done
  acpid -l /tmp/acpid.log -p /tmp/acpid.pid
fi

# The NoCloud seed, as far as Berth writes it (JSON, one value a line): its meta-data's public keys
# counted, printed and let into root's authorized_keys; its network-config's static IPv4 address
# and default gateway for eth0's MAC set by seed_static, which network() asks before DHCP (defined
# before network() starts: a background shell knows only the functions defined before it).
read_seed() {{
  for module in $(cat /lib/modules/seed/load.order); do insmod "/lib/modules/seed/$module.ko"; done
  mkdir -p /seed
  # A CD-ROM shows within a second of its driver; a guest without one waits no longer than this.
  for second in 1 2 3 4 5; do
    [ -b /dev/sr0 ] && mount -t iso9660 -o ro /dev/sr0 /seed && break
    sleep 1
  done
  if [ -f /seed/meta-data ]; then
    keys=$(grep -cE '^    "(ssh-|ecdsa-|sk-)' /seed/meta-data)
    sed -nE 's/^    "((ssh-|ecdsa-|sk-)[^"]*)",?$/\\1/p' /seed/meta-data >> /root/.ssh/authorized_keys
    echo "{KEYS_MARKER} $keys" > /dev/ttyS0
  fi
  touch /tmp/seed.read
}}
seed_static() {{
  for second in 1 2 3 4 5 6 7 8 9 10; do
    [ -e /tmp/seed.read ] && break
    sleep 1
  done
  [ -f /seed/network-config ] || return 1
  mac=$(cat "/sys/class/net/$1/address")
  set -- "$1" $(awk -v mac="$mac" '
    /"macaddress"/ {{ gsub(/[",]/, "", $2); mine = ($2 == mac); next }}
    mine && /^      "addresses"/ {{ listed = 1; next }}
    listed && /\\]/ {{ listed = 0 }}
    listed && address == "" && /\\./ {{ gsub(/[",]/, "", $1); address = $1 }}
    mine && /"to": "0\\.0\\.0\\.0\\/0"/ {{ route = 1; next }}
    route {{ gsub(/[",]/, "", $2); gateway = $2; route = 0 }}
    END {{ if (address != "") print address, gateway }}' /seed/network-config)
  [ -n "$2" ] || return 1
  ip addr add "$2" dev "$1"
  [ -n "$3" ] && ip route replace default via "$3" dev "$1"
  echo "{NET_MARKER} $1 ${{2%/*}}" > /dev/ttyS0
}}
read_seed </dev/null >/dev/null 2>&1 &

# The network, beside the marker loop: the NIC driver, DHCP (udhcpc keeps renewing), SSH.
network() {{
  for module in $(cat /lib/modules/net/load.order); do insmod "/lib/modules/net/$module.ko"; done
  ip link set lo up
  for second in 1 2 3 4 5 6 7 8 9 10; do
    [ -e /sys/class/net/eth0 ] && break
    sleep 1
  done
  [ -e /sys/class/net/eth0 ] || return 0
  ip link set eth0 up
  mkdir -p /dev/pts /var/run
  mount -t devpts devpts /dev/pts
  dropbear -s -r /etc/dropbear/{HOST_KEY} -p 22
  seed_static eth0 || udhcpc -i eth0 -s /etc/udhcpc.script -b -t 30 -T 2
}}
network </dev/null >/dev/null 2>&1 &

# berth.agent=: answer the guest agent's channel with the command line's addresses, unchecked.
answer_agent() {{
  for module in $(cat /lib/modules/agent/load.order); do insmod "/lib/modules/agent/$module.ko"; done
  port=
  for second in 1 2 3 4 5 6 7 8 9 10; do
    for path in /sys/class/virtio-ports/*; do
      [ "$(cat "$path/name" 2>/dev/null)" = {AGENT_PORT} ] && port="/dev/${{path##*/}}"
    done
    [ -n "$port" ] && [ -e "$port" ] && break
    sleep 1
  done
  [ -n "$port" ] || return 0
  exec 3<>"$port"
  # The port reads as at its end while no host program is connected to it (libvirt connects
  # only once the guest has opened it): wait, keeping the port open, and read again.
  while :; do
    read -r line <&3 || {{ sleep 1; continue; }}
    case "$line" in
      *guest-sync*)
        echo "{{\\"return\\": $(echo "$line" | sed -n 's/.*"id" *: *\\([0-9]*\\).*/\\1/p')}}" >&3 ;;
      *guest-network-get-interfaces*)
        mac=$(cat /sys/class/net/eth0/address 2>/dev/null)
        own=$(ip -4 addr show eth0 2>/dev/null | sed -n 's/.*inet \\([0-9.]*\\)\\/.*/\\1/p')
        listed=
        for address in $(echo "$agent" | tr ',' ' '); do
          [ "$address" = own ] && address="$own"
          [ -n "$address" ] || continue
          listed="$listed${{listed:+, }}{{\\"ip-address-type\\": \\"ipv4\\", \\"ip-address\\": \\"$address\\", \\"prefix\\": 24}}"
        done
        echo "{{\\"return\\": [{{\\"name\\": \\"eth0\\", \\"hardware-address\\": \\"$mac\\", \\"ip-addresses\\": [$listed]}}]}}" >&3 ;;
      *)
        echo '{{"error": {{"class": "CommandNotFound", "desc": "the lab guest answers two commands"}}}}' >&3 ;;
    esac
  done
}}
[ -n "$agent" ] && answer_agent </dev/null >/dev/null 2>&1 &

# {CPU_MARKER}: the CPU model and the topology the guest sees, once: sockets are distinct
# physical ids, cores per socket and siblings (threads) per socket as the kernel reports them.
report_cpu() {{
  info=/proc/cpuinfo
  processors=$(grep -c '^processor' $info)
  sockets=$(sed -n 's/^physical id[[:space:]]*: //p' $info | sort -u | wc -l)
  cores=$(sed -n 's/^cpu cores[[:space:]]*: //p' $info | head -n 1)
  siblings=$(sed -n 's/^siblings[[:space:]]*: //p' $info | head -n 1)
  threads=$(( ${{siblings:-1}} / ${{cores:-1}} ))
  model=$(sed -n 's/^model name[[:space:]]*: //p' $info | head -n 1)
  echo "{CPU_MARKER} sockets=$sockets cores=${{cores:-1}} threads=$threads processors=$processors model=$model" > /dev/ttyS0
}}
report_cpu </dev/null >/dev/null 2>&1 &

# Each disk and its size in bytes, once, as one line (/sys/block counts 512-byte sectors).
report_disks() {{
  for module in $(cat /lib/modules/disks/load.order); do insmod "/lib/modules/disks/$module.ko"; done
  for second in 1 2 3 4 5 6 7 8 9 10; do
    ls /sys/block | grep -q '^[vsh]d' && break
    sleep 1
  done
  sleep 1
  line=
  for path in /sys/block/*; do
    name="${{path##*/}}"
    case "$name" in
      vd*|sd*|hd*) line="$line $name=$(( $(cat "$path/size") * 512 ))" ;;
    esac
  done
  echo "{DISKS_MARKER}$line" > /dev/ttyS0
  # A lab image says which it is on its first line: the root disk made from it shows it, and so
  # does any other disk made from one (a rescued guest's own root disk, its second disk).
  for path in /sys/block/vd*; do
    name="${{path##*/}}"
    first=$(dd if="/dev/$name" bs=64 count=1 2>/dev/null | tr -d '\\000' | head -n 1)
    case "$name:$first" in
      "vda:BERTH-IMAGE "*) echo "{IMAGE_MARKER} ${{first#BERTH-IMAGE }}" > /dev/ttyS0 ;;
      *":BERTH-IMAGE "*) echo "{DISK_IMAGE_MARKER} $name ${{first#BERTH-IMAGE }}" > /dev/ttyS0 ;;
    esac
  done
}}
report_disks </dev/null >/dev/null 2>&1 &

# Each marker goes to the serial port alone: with console=ttyS0 (Berth's boot command line)
# /dev/console is that same port, and a line written to both would be logged twice.
while :; do
  echo "{MARKER} instance=$instance" > /dev/ttyS0 2>/dev/null
  sleep 30 || /bin/busybox sleep 30
done
# Not reached; PID 1 must never exit.
while :; do /bin/busybox sleep 3600; done
"""

# busybox udhcpc runs this with the lease in its environment ($mask is the prefix length).
UDHCPC_SCRIPT = f"""#!/bin/sh
case "$1" in
  deconfig)
    ip addr flush dev "$interface"
    ip link set "$interface" up
    ;;
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/$mask" dev "$interface"
    [ -n "$router" ] && ip route replace default via "${{router%% *}}" dev "$interface"
    echo "{NET_MARKER} $interface $ip" > /dev/ttyS0
    ;;
esac
exit 0
"""

# busybox acpid runs /etc/acpi/<event>/<value> for an event: this one is the power button.
POWER_BUTTON_ACTION = f"""#!/bin/sh
echo "{POWEROFF_MARKER}" > /dev/ttyS0 2>/dev/null
poweroff -f
"""


def default_dir() -> Path:
    return Path(os.environ.get("BERTH_LAB_DIR") or LAB / "state").resolve()


def _env() -> dict:
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    env.setdefault("DEBIAN_FRONTEND", "noninteractive")
    return env


def _run(argv: list[str], env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env or _env(), **kw)


def resolve_kernel_package() -> str:
    """The real package behind linux-image-cloud-amd64, e.g. linux-image-6.1.0-56-cloud-amd64."""
    for attempt in range(2):
        res = _run(["apt-cache", "depends", KERNEL_METAPACKAGE])
        if res.returncode == 0:
            for line in res.stdout.splitlines():
                m = re.match(r"\s*(?:\|)?Depends:\s*(linux-image-\S+)", line)
                if m and m.group(1) != KERNEL_METAPACKAGE:
                    return m.group(1)
        if attempt == 0:
            _apt_update()
    raise RuntimeError(
        f"cannot resolve the package behind {KERNEL_METAPACKAGE}: "
        f"{res.stdout.strip()} {res.stderr.strip()}"
    )


def _apt_update() -> None:
    res = _run(["apt-get", "update"])
    if res.returncode != 0:
        raise RuntimeError(f"apt-get update failed: {res.stderr.strip()}")


def download(packages: list[str], dest: Path) -> list[Path]:
    """apt-get download into dest; one apt-get update and a retry if the lists are missing."""
    for attempt in range(2):
        res = _run(["apt-get", "download", *packages], cwd=dest)
        if res.returncode == 0:
            break
        if attempt == 0:
            _apt_update()
    else:
        raise RuntimeError(f"apt-get download {' '.join(packages)} failed: {res.stderr.strip()}")
    debs = sorted(dest.glob("*.deb"))
    if len(debs) < len(packages):
        raise RuntimeError(f"apt-get download gave {debs}, wanted {packages}")
    return debs


def _extract(deb: Path, dest: Path) -> None:
    res = _run(["dpkg-deb", "-x", str(deb), str(dest)])
    if res.returncode != 0:
        raise RuntimeError(f"dpkg-deb -x {deb} failed: {res.stderr.strip()}")


def _check_kernel_config(config: Path) -> None:
    text = config.read_text()
    missing = [opt for opt in REQUIRED_KERNEL_CONFIG if f"\n{opt}=y" not in f"\n{text}"]
    if missing:
        raise RuntimeError(f"{config.name} lacks built-in {missing}; the guest needs them")


def _module_closure(tree: Path, wanted: tuple[str, ...]) -> list[Path]:
    """The .ko files of ``wanted`` and of every module they depend on, dependencies first.

    The package has no modules.dep (depmod makes it at install): each module's own ``depends=``
    in its .modinfo section says it.
    """
    paths = {ko.name[:-3].replace("-", "_"): ko for ko in tree.rglob("*.ko")}
    ordered: list[Path] = []

    def visit(name: str) -> None:
        if name not in paths:
            raise RuntimeError(f"kernel module {name} is not in the kernel package (compressed, or built in?)")
        if paths[name] in ordered:
            return
        found = re.search(rb"depends=([^\0]*)\0", paths[name].read_bytes())
        for dependency in filter(None, (found.group(1).decode() if found else "").split(",")):
            visit(dependency.replace("-", "_"))
        ordered.append(paths[name])

    for name in wanted:
        visit(name)
    return ordered


def _shared_libraries(binary: Path, extra_lib_dir: Path) -> list[Path]:
    """The shared libraries ``binary`` loads (and its loader), as ldd resolves them here, with
    ``extra_lib_dir`` searched first."""
    res = _run(["ldd", str(binary)], env={**_env(), "LD_LIBRARY_PATH": str(extra_lib_dir)})
    if res.returncode != 0:
        raise RuntimeError(f"ldd {binary} failed: {res.stderr.strip()}")
    libraries = []
    for line in res.stdout.splitlines():
        if "not found" in line:
            raise RuntimeError(f"{binary.name} needs a library this machine lacks: {line.strip()}")
        found = re.search(r"(/\S+)\s+\(0x", line)
        if found:
            libraries.append(Path(found.group(1)))
    return libraries


def ssh_keys(gdir: Path, dropbearkey: Path | None = None, lib_dir: Path | None = None) -> dict:
    """DIR/guest/ssh: the key that logs into the guests (made with ssh-keygen) and, given the
    extracted dropbearkey, the guests' host key in dropbear's format. Made once, then kept."""
    sdir = gdir / "ssh"
    sdir.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = sdir / SSH_KEY
    if not key.is_file():
        res = _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "berth-lab", "-f", str(key)])
        if res.returncode != 0:
            raise RuntimeError(f"ssh-keygen failed: {res.stderr.strip()}")
    host_key = sdir / HOST_KEY
    if dropbearkey is not None and not host_key.is_file():
        res = _run([str(dropbearkey), "-t", "ed25519", "-f", str(host_key)],
                   env={**_env(), "LD_LIBRARY_PATH": str(lib_dir)})
        if res.returncode != 0:
            raise RuntimeError(f"dropbearkey failed: {res.stderr.strip()}")
    host_public_key = sdir / (HOST_KEY + ".pub")
    if dropbearkey is not None and not host_public_key.is_file():
        res = _run([str(dropbearkey), "-y", "-f", str(host_key)], env={**_env(), "LD_LIBRARY_PATH": str(lib_dir)})
        line = next((line for line in res.stdout.splitlines() if line.startswith("ssh-")), None)
        if res.returncode != 0 or line is None:
            raise RuntimeError(f"dropbearkey -y failed: {res.stderr.strip()}")
        # "type key": the comment dropbear adds names this machine, not the guests.
        host_public_key.write_text(" ".join(line.split()[:2]) + "\n")
    return {"key": key, "public_key": key.with_name(SSH_KEY + ".pub"), "host_key": host_key,
            "host_public_key": host_public_key}


def _add_network(root: Path, modules: list[Path], dropbear: Path, libraries: list[Path], keys: dict) -> None:
    """The NIC driver, the DHCP script and the SSH server with its libraries, host key and
    root's authorized key."""
    mdir = root / "lib" / "modules" / "net"
    mdir.mkdir(parents=True, exist_ok=True)
    for module in modules:
        shutil.copy2(module, mdir / module.name)
    (mdir / "load.order").write_text("".join(module.name[:-3] + "\n" for module in modules))
    for library in libraries:
        # The loader where the binary names it; the rest where the loader looks by default.
        target = (root / library.relative_to("/") if library.name.startswith("ld-linux")
                  else root / "lib" / "x86_64-linux-gnu" / library.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(library.resolve(), target)
        os.chmod(target, 0o755)
    shutil.copy2(dropbear, root / "bin" / "dropbear")
    os.chmod(root / "bin" / "dropbear", 0o755)
    script = root / "etc" / "udhcpc.script"
    script.write_text(UDHCPC_SCRIPT)
    os.chmod(script, 0o755)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    (root / "etc" / "shells").write_text("/bin/sh\n")
    (root / "etc" / "dropbear").mkdir(exist_ok=True)
    shutil.copyfile(keys["host_key"], root / "etc" / "dropbear" / HOST_KEY)
    os.chmod(root / "etc" / "dropbear" / HOST_KEY, 0o600)
    ssh_dir = root / "root" / ".ssh"
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(ssh_dir, 0o700)
    shutil.copyfile(keys["public_key"], ssh_dir / "authorized_keys")
    os.chmod(ssh_dir / "authorized_keys", 0o600)


def _add_modules(root: Path, name: str, modules: list[Path]) -> None:
    """Kernel modules in /lib/modules/<name>, with the order /init loads them in."""
    mdir = root / "lib" / "modules" / name
    mdir.mkdir(parents=True, exist_ok=True)
    for module in modules:
        shutil.copy2(module, mdir / module.name)
    (mdir / "load.order").write_text("".join(module.name[:-3] + "\n" for module in modules))


def _add_power_button(root: Path, modules: list[Path]) -> None:
    """The modules that bring the ACPI power button to acpid, and acpid's action for it."""
    mdir = root / "lib" / "modules" / "acpi"
    mdir.mkdir(parents=True, exist_ok=True)
    for module in modules:
        shutil.copy2(module, mdir / module.name)
    (mdir / "load.order").write_text("".join(module.name[:-3] + "\n" for module in modules))
    action = root / "etc" / "acpi" / "PWRF" / "00000080"
    action.parent.mkdir(parents=True, exist_ok=True)
    action.write_text(POWER_BUTTON_ACTION)
    os.chmod(action, 0o755)


def _build_initramfs(busybox: Path, out: Path, work: Path, network: dict, acpi_modules: list[Path],
                     agent_modules: list[Path], disk_modules: list[Path], seed_modules: list[Path]) -> None:
    root = work / "initramfs"
    for sub in ("bin", "dev", "proc", "sys", "tmp", "etc", "root"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy2(busybox, root / "bin" / "busybox")
    os.chmod(root / "bin" / "busybox", 0o755)
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "sbin").symlink_to("bin")
    init = root / "init"
    init.write_text(INIT_SCRIPT)
    os.chmod(init, 0o755)
    _add_network(root, **network)
    _add_power_button(root, acpi_modules)
    _add_modules(root, "agent", agent_modules)
    _add_modules(root, "disks", disk_modules)
    _add_modules(root, "seed", seed_modules)
    # The kernel opens /dev/console for PID 1 before /init mounts devtmpfs.
    try:
        os.mknod(root / "dev" / "console", 0o600 | stat.S_IFCHR, os.makedev(5, 1))
    except PermissionError:
        print("warning: not root, initramfs has no /dev/console node", file=sys.stderr)
    names = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            names.append(rel)
        names.extend(os.path.normpath(os.path.join(rel, f)) for f in sorted(filenames))
        # Symlinks to directories are listed by os.walk in dirnames; cpio stores them as links.
        names.extend(
            os.path.normpath(os.path.join(rel, d))
            for d in dirnames
            if os.path.islink(os.path.join(dirpath, d))
        )
    res = subprocess.run(
        ["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"],
        input=("\n".join(names) + "\n").encode(),
        capture_output=True,
        cwd=root,
    )
    if res.returncode != 0:
        raise RuntimeError(f"cpio failed: {res.stderr.decode(errors='replace').strip()}")
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
        gz.write(res.stdout)
    os.replace(tmp, out)


def build(dir: str | os.PathLike | None = None, force: bool = False) -> dict:
    """Make DIR/guest/vmlinuz, DIR/guest/initrd.img and the SSH keys (cached); return their
    absolute paths.

    Returns dict(kernel=..., initrd=..., ssh_key=..., ssh_host_key=... (the guests' public host
    key), cached=bool, seconds=float, packages=[...]).
    """
    start = time.monotonic()
    base = Path(dir).resolve() if dir else default_dir()
    gdir = base / "guest"
    kernel, initrd = gdir / "vmlinuz", gdir / "initrd.img"
    meta = gdir / "build.json"
    info = {}
    if meta.is_file():
        with contextlib.suppress(ValueError):
            info = json.loads(meta.read_text())
    ssh_key, host_public_key = gdir / "ssh" / SSH_KEY, gdir / "ssh" / (HOST_KEY + ".pub")
    if not force and kernel.is_file() and initrd.is_file() and ssh_key.is_file() and host_public_key.is_file() \
            and info.get("format") == FORMAT:
        return dict(kernel=str(kernel), initrd=str(initrd), ssh_key=str(ssh_key), ssh_host_key=str(host_public_key),
                    cached=True, seconds=round(time.monotonic() - start, 3), packages=info.get("packages", []))
    gdir.mkdir(parents=True, exist_ok=True)
    kpkg = resolve_kernel_package()
    # apt-get download as root writes into a world-unreadable temp dir unsandboxed: fine here.
    with tempfile.TemporaryDirectory(prefix="berth-guest-") as tmp:
        work = Path(tmp)
        debs_dir = work / "debs"
        debs_dir.mkdir()
        debs = download([kpkg, BUSYBOX_PACKAGE, *SSH_PACKAGES], debs_dir)
        kdeb = next(d for d in debs if d.name.startswith(kpkg + "_"))
        bdeb = next(d for d in debs if d.name.startswith(BUSYBOX_PACKAGE + "_"))
        _extract(kdeb, work / "kernel")
        _extract(bdeb, work / "busybox")
        ssh_debs = [d for d in debs if d.name.startswith(tuple(f"{pkg}_" for pkg in SSH_PACKAGES))]
        for deb in ssh_debs:
            _extract(deb, work / "ssh")
        vmlinuz = sorted((work / "kernel" / "boot").glob("vmlinuz-*"))
        configs = sorted((work / "kernel" / "boot").glob("config-*"))
        if not vmlinuz:
            raise RuntimeError(f"no boot/vmlinuz-* in {kdeb.name}")
        if configs:
            _check_kernel_config(configs[0])
        busybox = work / "busybox" / "bin" / "busybox"
        if not busybox.is_file():
            raise RuntimeError(f"no bin/busybox in {bdeb.name}")
        lib_dir = work / "ssh" / "usr" / "lib" / "x86_64-linux-gnu"
        dropbear = work / "ssh" / "usr" / "sbin" / "dropbear"
        keys = ssh_keys(gdir, work / "ssh" / "usr" / "bin" / "dropbearkey", lib_dir)
        network = dict(modules=_module_closure(work / "kernel" / "lib" / "modules", NET_MODULES),
                       dropbear=dropbear, libraries=_shared_libraries(dropbear, lib_dir), keys=keys)
        acpi_modules = _module_closure(work / "kernel" / "lib" / "modules", ACPI_MODULES)
        agent_modules = _module_closure(work / "kernel" / "lib" / "modules", AGENT_MODULES)
        disk_modules = _module_closure(work / "kernel" / "lib" / "modules", DISK_MODULES)
        seed_modules = _module_closure(work / "kernel" / "lib" / "modules", SEED_MODULES)
        _build_initramfs(busybox, initrd, work, network, acpi_modules, agent_modules, disk_modules, seed_modules)
        tmpk = kernel.with_name("vmlinuz.tmp")
        shutil.copyfile(vmlinuz[0], tmpk)
        os.chmod(tmpk, 0o644)
        os.replace(tmpk, kernel)
        packages = [d.name for d in (kdeb, bdeb, *ssh_debs)]
    meta.write_text(json.dumps({"format": FORMAT, "packages": packages, "kernel": vmlinuz[0].name}, indent=2) + "\n")
    return dict(kernel=str(kernel), initrd=str(initrd), ssh_key=str(keys["key"]),
                ssh_host_key=str(keys["host_public_key"]), cached=False,
                seconds=round(time.monotonic() - start, 3), packages=packages)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build DIR/guest/vmlinuz and initrd.img (cached)")
    b.add_argument("--dir", help="lab dir (default: $BERTH_LAB_DIR, else <repo>/lab/state)")
    b.add_argument("--force", action="store_true", help="rebuild even if cached")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        res = build(args.dir, force=args.force)
        how = "cached" if res["cached"] else f"built from {', '.join(res['packages'])}"
        print(f"kernel: {res['kernel']}\ninitrd: {res['initrd']}\nssh key: {res['ssh_key']}")
        print(f"({how} in {res['seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
