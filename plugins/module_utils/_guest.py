"""A guest's virtual hardware as a launch asks for it: firmware, disk bus, NIC model, the guest
agent's channel and graphics, checked against what Berth offers, with the device names the
domain template uses. Pure: no libvirt, no Ansible."""

from __future__ import annotations

import ipaddress
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

FIRMWARES = ("bios", "uefi")
# Buses QEMU's x86 machines offer for a disk, each with the device name prefix libvirt expects.
DISK_BUSES = {"virtio": "vd", "scsi": "sd", "sata": "sd", "ide": "hd"}
# NIC models QEMU's x86 machines emulate (Nova's list for QEMU/KVM, less the ones without a
# driver in current guests).
NIC_MODELS = ("virtio", "e1000", "e1000e", "rtl8139", "vmxnet3", "ne2k_pci", "pcnet")
GRAPHICS_TYPES = ("none", "vnc", "spice")
# A console nobody asked to expose stays on the hypervisor: graphics listen on loopback unless
# the launch names another address.
DEFAULT_GRAPHICS_LISTEN = "127.0.0.1"
DEFAULTS = {"firmware": "bios", "disk_bus": "virtio", "nic_model": "virtio", "guest_agent": True}
# Nova's image properties for the same choices: an image that needs UEFI or an e1000 NIC says
# so once, and every launch of it follows unless the launch itself says otherwise.
IMAGE_PROPERTIES = {"firmware": "hw_firmware_type", "disk_bus": "hw_disk_bus", "nic_model": "hw_vif_model",
                    "guest_agent": "hw_qemu_guest_agent"}
_TRUE = ("yes", "true", "1", "on")
_FALSE = ("no", "false", "0", "off")


def _choice(field: str, value: Any, allowed: tuple[str, ...] | list[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InputError(field, f"{field} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _flag(field: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InputError(field, f"{field} must be true or false, got {value!r}")


def graphics_spec(graphics: Any) -> dict[str, str] | None:
    """``graphics``: none (default), vnc, spice, or {type, listen}; None for no graphics.

    ``listen`` must be an IP address: a console has no password here, so where it listens is
    the user's explicit choice, and 0.0.0.0 is never a default.
    """
    if graphics in (None, "", "none"):
        return None
    if isinstance(graphics, str):
        graphics = {"type": graphics}
    if not isinstance(graphics, Mapping):
        raise InputError("graphics", f"graphics must be none, vnc, spice or a dict with type and listen, got {graphics!r}")
    unknown = set(graphics) - {"type", "listen"}
    if unknown:
        raise InputError("graphics", f"graphics has unknown keys {sorted(unknown)} (allowed: type, listen)")
    kind = _choice("graphics.type", graphics.get("type") or "none", GRAPHICS_TYPES)
    if kind == "none":
        return None
    listen = graphics.get("listen") or DEFAULT_GRAPHICS_LISTEN
    try:
        address = str(ipaddress.ip_address(listen))
    except ValueError:
        raise InputError("graphics.listen", f"graphics.listen must be an IP address of the hypervisor "
                         f"(default {DEFAULT_GRAPHICS_LISTEN}), got {listen!r}") from None
    return {"type": kind, "listen": address}


def guest_spec(options: Mapping[str, Any], image_properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The guest's hardware from the launch's ``options`` (firmware, disk_bus, nic_model,
    guest_agent, graphics; None or missing means "not said"), else the image's Nova properties
    (hw_firmware_type, hw_disk_bus, hw_vif_model, hw_qemu_guest_agent), else Berth's defaults.

    Returns the choices and the names the domain template needs: the target devices of the root,
    ephemeral and swap disks (DISK_SLOTS) and of the NoCloud seed (a SATA CD-ROM, after the
    disks' slots where they use sdX names too).
    """
    properties = image_properties or {}
    chosen: dict[str, Any] = {}
    fields: dict[str, str] = {}
    for key, default in DEFAULTS.items():
        value, field = options.get(key), key
        if value in (None, ""):
            value, field = properties.get(IMAGE_PROPERTIES[key]), f"image.properties.{IMAGE_PROPERTIES[key]}"
        if value in (None, ""):
            value, field = default, key
        chosen[key], fields[key] = value, field
    spec: dict[str, Any] = {
        "firmware": _choice(fields["firmware"], chosen["firmware"], FIRMWARES),
        "disk_bus": _choice(fields["disk_bus"], chosen["disk_bus"], tuple(DISK_BUSES)),
        "nic_model": _choice(fields["nic_model"], chosen["nic_model"], NIC_MODELS),
        "guest_agent": _flag(fields["guest_agent"], chosen["guest_agent"]),
        "graphics": graphics_spec(options.get("graphics")),
    }
    prefix = DISK_BUSES[spec["disk_bus"]]
    for slot, disk in enumerate(DISK_SLOTS):
        spec[f"{disk}_dev"] = prefix + chr(ord("a") + slot)
    # The seed is a SATA CD-ROM: after every disk slot where the disks have sdX names too (libvirt
    # refuses two devices of one name, whatever their buses).
    spec["seed_dev"] = "sd" + chr(ord("a") + (len(DISK_SLOTS) if prefix == "sd" else 0))
    return spec


# The disks a flavor gives, in Nova's order on the guest's disk bus (its blockinfo: root, then
# ephemeral, then swap), each in a slot of its own whatever the flavor: a resize that adds one
# renames none of the others in the definition.
DISK_SLOTS = ("disk", "ephemeral", "swap")
# The guest kernel names the disks by their order on the bus, with no gaps: virtio-blk as vdX, and
# SCSI, SATA and (through libata) IDE disks as sdX. The seed CD-ROM is srX, outside both.
_GUEST_KERNEL_PREFIXES = {"virtio": "vd", "scsi": "sd", "sata": "sd", "ide": "sd"}
# The file system Nova's libvirt driver gives an ephemeral disk, by the image's os_type property
# (nova/privsep/fs.py): ext4 for Linux, NTFS for Windows, VFAT for anything else.
EPHEMERAL_FILE_SYSTEMS = {"linux": "ext4", "windows": "ntfs"}
DEFAULT_EPHEMERAL_FILE_SYSTEM = "vfat"
EPHEMERAL_LABEL = "ephemeral0"
# Where cloud-init mounts ephemeral0 on Nova's guests (its default mounts).
EPHEMERAL_MOUNT_POINT = "/mnt"
# Run at every boot by cloud-init's bootcmd, with the swap disk as $1: a disk with no signature at
# all (just made: at the first boot, or recreated by a resize, as Nova recreates swap) becomes
# swap space; a disk holding anything else is never touched.
_SWAP_SCRIPT = ('[ -n "$(blkid -p -o value -s TYPE "$1")" ] || mkswap "$1"; '
                'grep -q "^$1 " /proc/swaps || swapon "$1" || true')


def local_disks_vendor_data(disk_bus: str, ephemeral_gb: int, swap_mb: int,
                            image_properties: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The cloud-config (a NoCloud vendor-data) that does in the guest what Nova's libvirt driver
    does on the host and Berth cannot: the ephemeral disk formatted and labelled ephemeral0 and
    mounted at /mnt, the swap disk made swap space and enabled. The user's user-data overrides
    any of it (cloud-init merges vendor-data under user-data). None without such disks."""
    if not ephemeral_gb and not swap_mb:
        return None
    prefix = "/dev/" + _GUEST_KERNEL_PREFIXES[disk_bus]
    devices = [name for name, size in (("ephemeral", ephemeral_gb), ("swap", swap_mb)) if size]
    # After the root disk (a), in order.
    path = {name: prefix + chr(ord("b") + index) for index, name in enumerate(devices)}
    config: dict[str, Any] = {"mounts": []}
    if ephemeral_gb:
        os_type = str((image_properties or {}).get("os_type") or "").lower()
        config["fs_setup"] = [{"device": path["ephemeral"], "partition": "none", "label": EPHEMERAL_LABEL,
                               "filesystem": EPHEMERAL_FILE_SYSTEMS.get(os_type, DEFAULT_EPHEMERAL_FILE_SYSTEM)}]
        config["mounts"].append([path["ephemeral"], EPHEMERAL_MOUNT_POINT, "auto", "defaults,nofail", "0", "2"])
    if swap_mb:
        config["bootcmd"] = [["sh", "-c", _SWAP_SCRIPT, "berth-swap", path["swap"]]]
        config["mounts"].append([path["swap"], "none", "swap", "sw", "0", "0"])
    return config
