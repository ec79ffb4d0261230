"""Hypervisor.live_migrate (module_utils/libvirt_host.py) over a stand-in libvirt domain: with
disks on a shared pool it names the disks QEMU copies (VIR_MIGRATE_PARAM_MIGRATE_DISKS) - every
writable disk but the shared ones, never a CD-ROM - and without any it leaves libvirt's default."""

from __future__ import annotations

from typing import Any

import libvirt
from scripted_libvirt import ScriptedConnection, ScriptedHypervisor

UUID = "d0000000-0001-4000-8000-000000000001"
SHARED_FILE = "/mnt/nfs/berth-volume-data-1.qcow2"
DOMAIN_XML = f"""<domain type='kvm'><uuid>{UUID}</uuid><devices>
  <disk type='file' device='disk'><source file='/var/lib/libvirt/images/berth-{UUID}-root.qcow2'/>
    <target dev='vda' bus='virtio'/></disk>
  <disk type='file' device='disk'><source file='/var/lib/libvirt/images/berth-{UUID}-ephemeral.qcow2'/>
    <target dev='vdb' bus='virtio'/></disk>
  <disk type='file' device='disk'><driver name='qemu' type='qcow2' cache='none'/><source file='{SHARED_FILE}'/>
    <target dev='vde' bus='virtio'/></disk>
  <disk type='file' device='cdrom'><source file='/var/lib/libvirt/images/berth-{UUID}-seed.iso'/>
    <target dev='sda' bus='sata'/><readonly/></disk>
</devices></domain>"""


class Domain:
    def __init__(self) -> None:
        self.migrations: list[tuple[str, dict[str, Any], int]] = []

    def XMLDesc(self, flags: int) -> str:  # noqa: N802 - libvirt's name
        return DOMAIN_XML

    def migrateToURI3(self, uri: str, params: dict[str, Any], flags: int) -> int:  # noqa: N802
        self.migrations.append((uri, params, flags))
        return 0


class Connection(ScriptedConnection):
    def __init__(self, domain: Domain) -> None:
        super().__init__({})
        self.domain = domain

    def lookupByUUIDString(self, uuid: str) -> Domain:  # noqa: N802
        return self.domain


def migrate(shared_paths: tuple[str, ...]) -> tuple[str, dict[str, Any], int]:
    domain = Domain()
    with ScriptedHypervisor(Connection(domain), "hv1", "qemu+ssh://hv1/system") as src, \
            ScriptedHypervisor(Connection(Domain()), "hv2", "qemu+ssh://hv2/system") as dst:
        src.live_migrate(UUID, dst, "192.0.2.2", None, shared_paths)
    [migration] = domain.migrations
    return migration


def test_the_disks_of_a_shared_pool_are_left_out_of_the_copy():
    _uri, params, flags = migrate((SHARED_FILE,))
    assert params[libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS] == ["vda", "vdb"]
    assert flags & libvirt.VIR_MIGRATE_NON_SHARED_INC
    # Libvirt's own safety check stays on: Berth never asks for an unsafe migration.
    assert not flags & libvirt.VIR_MIGRATE_UNSAFE


def test_without_shared_disks_libvirt_copies_what_it_copies_by_default():
    _uri, params, _flags = migrate(())
    assert libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS not in params
