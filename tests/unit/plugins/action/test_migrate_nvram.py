"""What berth.fleet.migrate carries of a UEFI instance: Berth's NVRAM volume, not NVRAM elsewhere."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.plugin_utils._transfer import _repoint_disks, movable_volumes

UUID = "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
POOL = "/var/lib/libvirt/images"
ROOT = f"berth-{UUID}-root.qcow2"
NVRAM = f"berth-{UUID}-nvram.fd"


def domain(nvram_path):
    nvram = f"<nvram template='/usr/share/OVMF/OVMF_VARS_4M.fd'>{nvram_path}</nvram>" if nvram_path else ""
    return (f"<domain type='qemu'><name>efi-1</name><uuid>{UUID}</uuid><os firmware='efi'><type>hvm</type>{nvram}</os>"
            f"<devices><disk type='file' device='disk'><source file='{POOL}/{ROOT}'/><target dev='vda'/></disk>"
            f"</devices></domain>")


class FakeHost:
    """The read-only calls migrate's volume check makes, on a pool of plain files."""

    def __init__(self, host, xml, volumes):
        self.host, self.xml, self.volumes = host, xml, volumes

    def domain_xml(self, uuid, inactive=False):
        return self.xml

    def pool_path(self, pool):
        return POOL

    def volume(self, pool, name, refresh=True):
        if name not in self.volumes:
            return None
        return {"name": name, "path": f"{POOL}/{name}", "type": "file", "format": "raw", "capacity_mb": 1,
                "link": False, "backing": None}

    def volume_users(self, pool, path, uuid):
        return []


INSTANCE = {"uuid": UUID, "name": "efi-1"}


def test_berths_nvram_volume_moves_after_the_disks_with_its_contents():
    src = FakeHost("hv1", domain(f"{POOL}/{NVRAM}"), {ROOT, NVRAM})
    disks, volumes = movable_volumes(src, FakeHost("hv2", None, set()), INSTANCE, "default")
    # Disks get an empty overlay for QEMU to fill in a live move; the NVRAM is copied whole.
    assert disks == [ROOT] and volumes == [ROOT, NVRAM]


def test_an_nvram_not_made_yet_has_nothing_to_carry():
    src = FakeHost("hv1", domain(f"{POOL}/{NVRAM}"), {ROOT})
    assert movable_volumes(src, FakeHost("hv2", None, set()), INSTANCE, "default") == ([ROOT], [ROOT])


@pytest.mark.parametrize("path", ["/var/lib/libvirt/qemu/nvram/efi-1_VARS.fd", f"{POOL}/other-nvram.fd"],
                         ids=["libvirt-default", "pool-but-not-berths"])
def test_nvram_that_is_not_berths_own_volume_is_refused(path):
    src = FakeHost("hv1", domain(path), {ROOT, "other-nvram.fd"})
    with pytest.raises(InputError, match=r"storage a move cannot carry.*NVRAM"):
        movable_volumes(src, FakeHost("hv2", None, set()), INSTANCE, "default")


def test_a_cold_move_points_disks_and_nvram_at_the_destination_pool():
    moved = ET.fromstring(_repoint_disks(domain(f"{POOL}/{NVRAM}"), POOL, "/srv/pool"))
    assert moved.find("devices/disk/source").get("file") == f"/srv/pool/{ROOT}"
    assert moved.findtext("os/nvram") == f"/srv/pool/{NVRAM}"
    assert moved.find("os/nvram").get("template") == "/usr/share/OVMF/OVMF_VARS_4M.fd"
    elsewhere = ET.fromstring(_repoint_disks(domain("/var/lib/libvirt/qemu/nvram/x.fd"), POOL, "/srv/pool"))
    assert elsewhere.findtext("os/nvram") == "/var/lib/libvirt/qemu/nvram/x.fd"
