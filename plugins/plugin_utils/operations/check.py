"""Check a hypervisor's prerequisites through libvirt and say what is missing, each with how to
mend it (berth.fleet.hypervisor_check, playbooks/check.yml). Private to the collection.

It reads only; it connects as a launch and a tracker sync would (the inventory source's URI,
timeout and credentials), so a refused connection is itself the first finding.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError
from ansible_collections.berth.fleet.plugins.module_utils.hypervisor_driver import Connect
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Target, open_hypervisor

# The oldest libvirt Berth is tested with (Debian 12's); older ones are not claimed.
MIN_LIBVIRT_VERSION = (9, 0, 0)
# Guest domain types Berth defines (berth_domain_type): KVM, or plain QEMU emulation.
DOMAIN_TYPES = ("kvm", "qemu")

GUIDE = "the install guide's 'On each hypervisor' (docs/docsite/rst/install.rst)"


def check_hypervisor(target: Target, networks: Sequence[str] = (), connect: Connect = Hypervisor) -> dict[str, Any]:
    """{host, ready, checks, missing}: each check {check, ok, detail}; ``missing`` the details
    of those that failed. ``networks``: the libvirt networks launches will name. ``connect``
    opens the hypervisor (libvirt's by default)."""
    try:
        with open_hypervisor(target, False, connect) as hv:
            readiness = hv.readiness()
    except HypervisorError as exc:
        checks = [{"check": "connection", "ok": False, "detail": _connection_advice(target.uri, str(exc))}]
    else:
        # The inventory source refuses a URI that holds a password, so the URI may be shown.
        checks = [{"check": "connection", "ok": True, "detail": f"connected to {target.uri}"},
                  *judge(readiness, target.storage_pool, networks)]
    missing = [f"{check['check']}: {check['detail']}" for check in checks if not check["ok"]]
    return {"host": target.host, "ready": not missing, "checks": checks, "missing": missing}


def judge(readiness: Mapping[str, Any], storage_pool: str, networks: Sequence[str]) -> list[dict[str, Any]]:
    """The checks of what an open connection reports (HypervisorDriver.readiness())."""
    return [_libvirt_version(readiness["libvirt_version"]),
            _driver(readiness["hypervisor_type"], readiness["domain_types"]),
            _storage_pool(readiness["pools"], storage_pool),
            *_networks(readiness["networks"], networks)]


def version_text(version: int) -> str:
    """libvirt's integer version (major * 1,000,000 + minor * 1,000 + release) as 9.0.0."""
    return f"{version // 1_000_000}.{version // 1_000 % 1_000}.{version % 1_000}"


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"check": name, "ok": ok, "detail": detail}


def _libvirt_version(version: int) -> dict[str, Any]:
    oldest = MIN_LIBVIRT_VERSION[0] * 1_000_000 + MIN_LIBVIRT_VERSION[1] * 1_000 + MIN_LIBVIRT_VERSION[2]
    if version >= oldest:
        return _check("libvirt", True, f"libvirt {version_text(version)}")
    return _check("libvirt", False, f"libvirt {version_text(version)} is older than {version_text(oldest)}, "
                                    f"the oldest Berth is tested with: upgrade libvirt")


def _driver(hypervisor_type: str, domain_types: Sequence[str]) -> dict[str, Any]:
    usable = [kind for kind in DOMAIN_TYPES if kind in domain_types]
    if hypervisor_type == "QEMU" and usable:
        return _check("driver", True, f"QEMU driver, guest domain types {', '.join(usable)}")
    if hypervisor_type != "QEMU":
        return _check("driver", False, f"the URI reaches libvirt's {hypervisor_type} driver: Berth needs QEMU "
                                       f"(qemu:///system, qemu+ssh://USER@HOST/system)")
    return _check("driver", False, f"QEMU offers no kvm or qemu guests (domain types: "
                                   f"{', '.join(domain_types) or 'none'}): install the QEMU system emulator "
                                   f"for the host's architecture (qemu-system-x86 on Debian, qemu-kvm on RHEL)")


def _storage_pool(pools: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    pool = next((pool for pool in pools if pool["name"] == name), None)
    known = ", ".join(pool["name"] for pool in pools) or "none"
    if pool is None:
        return _check("storage_pool", False,
                      f"storage pool {name!r} not found (pools: {known}): virsh pool-define-as {name} dir "
                      f"--target /var/lib/libvirt/images, then virsh pool-build, pool-start and pool-autostart "
                      f"{name} (or name another pool in the inventory source's storage_pool)")
    if not pool["active"]:
        return _check("storage_pool", False, f"storage pool {name!r} is not active: virsh pool-start {name}, "
                                             f"and virsh pool-autostart {name} so that it stays so")
    if not pool["autostart"]:
        return _check("storage_pool", False, f"storage pool {name!r} is active but not autostarted, so it "
                                             f"is gone after libvirt restarts: virsh pool-autostart {name}")
    return _check("storage_pool", True, f"storage pool {name!r} active and autostarted, "
                                        f"{pool['capacity_mb'] / 1024:.0f} GiB")


def _networks(found: Sequence[Mapping[str, Any]], wanted: Sequence[str]) -> list[dict[str, Any]]:
    """One check per network launches will name; without any named, the active ones listed."""
    by_name = {network["name"]: network for network in found}
    active = [network["name"] for network in found if network["active"]]
    if not wanted:
        return [_check("networks", True, f"active networks: {', '.join(active) or 'none'} "
                                         f"(name those launches use in networks to check them)")]
    checks = []
    for name in wanted:
        network = by_name.get(name)
        if network is None:
            checks.append(_check(f"network {name}", False, f"network {name!r} not found (networks: "
                                                           f"{', '.join(sorted(by_name)) or 'none'}): define it "
                                                           f"with virsh net-define, then net-start and net-autostart"))
        elif not network["active"]:
            checks.append(_check(f"network {name}", False, f"network {name!r} is not active: virsh net-start {name}, "
                                                           f"and virsh net-autostart {name}"))
        else:
            checks.append(_check(f"network {name}", True, f"network {name!r} active"
                                                          + ("" if network["autostart"] else " (not autostarted)")))
    return checks


def _connection_advice(uri: str, error: str) -> str:
    """The connection's error, and what to look at for this kind of URI."""
    scheme = urlsplit(uri).scheme
    if "ssh" in scheme:
        where = ("the SSH user: its key, the hypervisor's host key in known_hosts (checked by default), and "
                 "its right to manage libvirt (the libvirt group, or a polkit rule for org.libvirt.unix.manage)")
    elif "+" in scheme and not scheme.endswith("+unix"):
        where = "the address and port, the libvirtd listener and its authentication (BERTH_LIBVIRT_USERNAME)"
    else:
        where = ("libvirtd (or virtqemud) running, and this user's right to manage it (the libvirt group, or a "
                 "polkit rule for org.libvirt.unix.manage)")
    return f"cannot connect: {error}; check {where}: see {GUIDE}"
