#!/usr/bin/env python3
"""Build the lab's tiny bootable guest: a Debian cloud kernel and a busybox initramfs.

    python3 lab/guest.py build [--dir DIR]

writes DIR/guest/vmlinuz and DIR/guest/initrd.img (DIR defaults to $BERTH_LAB_DIR, else
<repo>/lab/state). Both are cached: when both exist nothing is downloaded.

The guest is booted directly by libvirt (<kernel>, <initrd>, <cmdline>) with no disk and no
network. Its /init (PID 1, a busybox sh script) mounts proc, sys and devtmpfs, reads
``berth.instance=<value>`` from /proc/cmdline and writes

    BERTH-GUEST-BOOTED instance=<value>

to /dev/ttyS0 and /dev/console, again every 30 s, and never exits. The cloud kernel has the
8250 serial driver and its console, devtmpfs, initrd and gzip support built in.

It answers the ACPI power button as a real guest does (the graceful shutdown of
berth.fleet.power and resize): /init loads the kernel's ACPI button and evdev modules (the only
two modules shipped, taken from the same kernel package) and starts busybox's acpid, whose
action for the button writes ``BERTH-GUEST-POWEROFF`` to the consoles and powers the guest
off. With ``berth.acpi=ignore`` on the kernel command line it does not, as a guest without an
ACPI daemon: a graceful shutdown then times out.

Stdlib only; needs root (apt-get download as root, mknod), apt-get, apt-cache, dpkg-deb, cpio.
"""
from __future__ import annotations

import argparse
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
MARKER = "BERTH-GUEST-BOOTED"
POWEROFF_MARKER = "BERTH-GUEST-POWEROFF"
# The kernel modules the power button needs (built as modules in the cloud kernel), by their
# path under lib/modules/<version>/kernel.
ACPI_MODULES = ("drivers/input/evdev.ko", "drivers/acpi/button.ko")
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
# "prefer applets" setting is.
APPLETS = ("sh", "mount", "cat", "echo", "sleep", "mkdir", "insmod", "acpid", "poweroff")

INIT_SCRIPT = f"""#!/bin/sh
# Berth lab guest, PID 1: print a boot marker on the serial console, repeat it, never exit.
export PATH=/bin
trap '' HUP INT TERM QUIT USR1 USR2
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
instance=
acpi=on
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    berth.instance=*) instance="${{arg#berth.instance=}}" ;;
    berth.acpi=*) acpi="${{arg#berth.acpi=}}" ;;
  esac
done
if [ "$acpi" != ignore ]; then
  for module in /lib/modules/*.ko; do insmod "$module"; done
  acpid -l /tmp/acpid.log -p /tmp/acpid.pid
fi
while :; do
  for tty in /dev/ttyS0 /dev/console; do
    echo "{MARKER} instance=$instance" > "$tty" 2>/dev/null
  done
  sleep 30 || /bin/busybox sleep 30
done
# Not reached; PID 1 must never exit.
while :; do /bin/busybox sleep 3600; done
"""


# busybox acpid runs /etc/acpi/<event>/<value> for an event: this one is the power button.
POWER_BUTTON_ACTION = f"""#!/bin/sh
for tty in /dev/ttyS0 /dev/console; do
  echo "{POWEROFF_MARKER}" > "$tty" 2>/dev/null
done
poweroff -f
"""


def default_dir() -> Path:
    return Path(os.environ.get("BERTH_LAB_DIR") or LAB / "state").resolve()


def _env() -> dict:
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    env.setdefault("DEBIAN_FRONTEND", "noninteractive")
    return env


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=_env(), **kw)


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


def _build_initramfs(busybox: Path, out: Path, work: Path, modules: list[Path]) -> None:
    root = work / "initramfs"
    for sub in ("bin", "dev", "proc", "sys", "tmp", "etc", "root", "lib/modules", "etc/acpi/PWRF"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    # Numbered, so that /init loads them in ACPI_MODULES' order.
    for index, module in enumerate(modules):
        shutil.copyfile(module, root / "lib" / "modules" / f"{index}-{module.name}")
    action = root / "etc" / "acpi" / "PWRF" / "00000080"
    action.write_text(POWER_BUTTON_ACTION)
    os.chmod(action, 0o755)
    shutil.copy2(busybox, root / "bin" / "busybox")
    os.chmod(root / "bin" / "busybox", 0o755)
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "sbin").symlink_to("bin")
    init = root / "init"
    init.write_text(INIT_SCRIPT)
    os.chmod(init, 0o755)
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
    """Make DIR/guest/vmlinuz and DIR/guest/initrd.img (cached); return their absolute paths.

    Returns dict(kernel=..., initrd=..., cached=bool, seconds=float, packages=[...]).
    """
    start = time.monotonic()
    base = Path(dir).resolve() if dir else default_dir()
    gdir = base / "guest"
    kernel, initrd = gdir / "vmlinuz", gdir / "initrd.img"
    meta = gdir / "build.json"
    if not force and kernel.is_file() and initrd.is_file():
        info = json.loads(meta.read_text()) if meta.is_file() else {}
        return dict(kernel=str(kernel), initrd=str(initrd), cached=True,
                    seconds=round(time.monotonic() - start, 3),
                    packages=info.get("packages", []))
    gdir.mkdir(parents=True, exist_ok=True)
    kpkg = resolve_kernel_package()
    # apt-get download as root writes into a world-unreadable temp dir unsandboxed: fine here.
    with tempfile.TemporaryDirectory(prefix="berth-guest-") as tmp:
        work = Path(tmp)
        debs_dir = work / "debs"
        debs_dir.mkdir()
        debs = download([kpkg, BUSYBOX_PACKAGE], debs_dir)
        kdeb = next(d for d in debs if d.name.startswith(kpkg + "_"))
        bdeb = next(d for d in debs if d.name.startswith(BUSYBOX_PACKAGE + "_"))
        _extract(kdeb, work / "kernel")
        _extract(bdeb, work / "busybox")
        vmlinuz = sorted((work / "kernel" / "boot").glob("vmlinuz-*"))
        configs = sorted((work / "kernel" / "boot").glob("config-*"))
        if not vmlinuz:
            raise RuntimeError(f"no boot/vmlinuz-* in {kdeb.name}")
        if configs:
            _check_kernel_config(configs[0])
        busybox = work / "busybox" / "bin" / "busybox"
        if not busybox.is_file():
            raise RuntimeError(f"no bin/busybox in {bdeb.name}")
        modules = []
        for name in ACPI_MODULES:
            found = sorted((work / "kernel" / "lib" / "modules").glob(f"*/kernel/{name}"))
            if not found:
                raise RuntimeError(f"no {name} in {kdeb.name}: the guest could not answer the power button")
            modules.append(found[0])
        _build_initramfs(busybox, initrd, work, modules)
        tmpk = kernel.with_name("vmlinuz.tmp")
        shutil.copyfile(vmlinuz[0], tmpk)
        os.chmod(tmpk, 0o644)
        os.replace(tmpk, kernel)
        packages = [d.name for d in (kdeb, bdeb)]
    meta.write_text(json.dumps({"packages": packages, "kernel": vmlinuz[0].name}, indent=2) + "\n")
    return dict(kernel=str(kernel), initrd=str(initrd), cached=False,
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
        print(f"kernel: {res['kernel']}\ninitrd: {res['initrd']}")
        print(f"({how} in {res['seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
