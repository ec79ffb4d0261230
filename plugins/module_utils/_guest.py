"""A guest's virtual hardware as a launch asks for it: firmware, disk bus, NIC model, the guest
agent's channel and graphics, checked against what Berth offers, with the device names the
domain template uses. Pure: no libvirt, no Ansible."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Callable, Mapping

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
# Buses a CD-ROM (the NoCloud seed) can be on, each with the device name prefix libvirt expects.
CDROM_BUSES = {"sata": "sd", "scsi": "sd", "ide": "hd"}
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


def graphics_spec(graphics: Any, field: str = "graphics") -> dict[str, str] | None:
    """``graphics``: none (default), vnc, spice, or {type, listen}; None for no graphics.

    ``listen`` must be an IP address: a console has no password here, so where it listens is
    the user's explicit choice, and 0.0.0.0 is never a default.
    """
    if graphics in (None, "", "none"):
        return None
    if isinstance(graphics, str):
        graphics = {"type": graphics}
    if not isinstance(graphics, Mapping):
        raise InputError(field, f"{field} must be none, vnc, spice or a dict with type and listen, got {graphics!r}")
    unknown = set(graphics) - {"type", "listen"}
    if unknown:
        raise InputError(field, f"{field} has unknown keys {sorted(unknown)} (allowed: type, listen)")
    kind = _choice(f"{field}.type", graphics.get("type") or "none", GRAPHICS_TYPES)
    if kind == "none":
        return None
    listen = graphics.get("listen") or DEFAULT_GRAPHICS_LISTEN
    try:
        address = str(ipaddress.ip_address(listen))
    except ValueError:
        raise InputError(f"{field}.listen", f"{field}.listen must be an IP address of the hypervisor "
                         f"(default {DEFAULT_GRAPHICS_LISTEN}), got {listen!r}") from None
    return {"type": kind, "listen": address}


@dataclass(frozen=True)
class GuestOption:
    """One guest hardware option, declared once: its argument spec and ansible-doc text
    (``documentation``), its check, where its value comes from when the launch does not say
    (``image_property``, else ``default``), and its place in the instance's recorded request are
    all derived from this row. The domain template reads the chosen value as ``guest.<name>``
    (``template`` says where, for the reader)."""

    name: str
    type: str  # the argument spec's type: str, bool or raw
    description: tuple[str, ...]
    default: Any
    template: str
    choices: tuple[str, ...] = ()
    image_property: str | None = None
    # The check of a raw value (a choice or flag is checked by its type): (value, field) -> value.
    check: Callable[[Any, str], Any] | None = None

    def parse(self, field: str, value: Any) -> Any:
        """The value checked, as the template takes it; ``field`` names where it came from."""
        if self.check is not None:
            return self.check(value, field)
        if self.type == "bool":
            return _flag(field, value)
        return _choice(field, value, self.choices)

    def documentation(self) -> dict[str, Any]:
        """The option as ansible-doc documents it: its prose, then where its value comes from."""
        said = list(self.description)
        shown = str(self.default).lower() if isinstance(self.default, bool) else self.default
        if self.image_property:
            said.append(f"Not given, the image's C({self.image_property}) property decides, else V({shown}).")
        entry: dict[str, Any] = {"description": said, "type": self.type}
        if self.choices:
            entry["choices"] = list(self.choices)
        return entry


# The guest's hardware a launch may choose. Adding an option is a row here, its use in the domain
# template (roles/instance/templates/domain.xml.j2, as guest.<name>) and nothing else: the modules'
# options, their documentation, the check, the instance's recorded request and every move's
# definition follow. Its default must render what the template rendered before the option
# existed: instances recorded before it get the default when they move.
GUEST_OPTIONS: tuple[GuestOption, ...] = (
    GuestOption(
        "firmware", "str", choices=FIRMWARES, default="bios", image_property="hw_firmware_type",
        template="<os firmware='efi'> and <nvram> for uefi",
        description=(
            "V(bios) (SeaBIOS) or V(uefi) (OVMF, without Secure Boot, from the firmware descriptors of the "
            "hypervisor's C(ovmf) package).",
            "A UEFI guest gets its own variable store, copied by libvirt from OVMF's template at its first start "
            "into the volume C(berth-<uuid>-nvram.fd) of the storage pool; it is deleted with the instance and "
            "moved by M(berth.fleet.migrate) with the disks.")),
    GuestOption(
        "disk_bus", "str", choices=tuple(DISK_BUSES), default="virtio", image_property="hw_disk_bus",
        template="<target bus> of every disk",
        description=("Bus of the root disk, V(virtio) (C(vda)), V(scsi) (virtio-scsi, C(sda)), V(sata) (C(sda)) or "
                     "V(ide) (C(hda)).",)),
    GuestOption(
        "nic_model", "str", choices=NIC_MODELS, default="virtio", image_property="hw_vif_model",
        template="<model type> of every interface",
        description=("Model of every network interface.",)),
    GuestOption(
        "cdrom_bus", "str", choices=tuple(CDROM_BUSES), default="sata", image_property="hw_cdrom_bus",
        template="<target bus> of the seed's CD-ROM",
        description=(
            "Bus of the CD-ROM that carries the instance's NoCloud seed, V(sata) (C(sda), or C(sdb) after a "
            "C(sda) root disk), V(scsi) (virtio-scsi) or V(ide) (C(hda), or C(hdb)), as Nova's C(hw_cdrom_bus); a "
            "guest kernel without an AHCI driver reads its seed on V(ide) or V(scsi).",)),
    GuestOption(
        "guest_agent", "bool", default=True, image_property="hw_qemu_guest_agent",
        template="the <channel> org.qemu.guest_agent.0",
        description=("Give the guest a virtio-serial channel C(org.qemu.guest_agent.0) for the QEMU guest agent.",)),
    GuestOption(
        "graphics", "raw", default=None, check=graphics_spec, template="<graphics> and its <listen>",
        description=(
            "V(none), V(vnc), V(spice), or a dict with C(type) and C(listen), an IP address of the hypervisor. "
            "C(listen) defaults to V(127.0.0.1), so that a console without a password is reached only through the "
            "hypervisor (an SSH tunnel); any other address must be given.",
            "The first serial port is always a pty (C(virsh console)) whose output is also written to the serial "
            "log file.")),
    GuestOption(
        "cpu_baseline", "bool", default=False, template="<cpu>: the host's CPU baseline group's model and features",
        description=(
            "Give the guest its host's CPU baseline, the CPU every member of the host's CPU baseline group can run "
            "(the operator's C(berth_cpu_baseline_groups); see the O(berth.fleet.hypervisors#inventory:cpu_mode) "
            "V(group-baseline) of the inventory source), whatever the host's own C(cpu_mode), so that the guest can "
            "live-migrate anywhere in the group.",
            "A host without a recorded baseline for the guest's domain type is passed over by the launch, naming "
            "it. The guest keeps the CPU it was built with wherever it moves.")),
)
GUEST_OPTION_NAMES = tuple(option.name for option in GUEST_OPTIONS)


def guest_documentation() -> dict[str, Any]:
    """The doc fragment berth.fleet.guest's options: every row of GUEST_OPTIONS as ansible-doc
    shows it (scripts/guest_fragment writes plugins/doc_fragments/guest.py from it)."""
    return {option.name: option.documentation() for option in GUEST_OPTIONS}


@dataclass(frozen=True)
class Guest:
    """The guest's hardware as chosen: each GUEST_OPTIONS value (``values``), with the device
    names the domain template gives its disks and its seed's CD-ROM."""

    values: Mapping[str, Any]

    @classmethod
    def from_options(cls, options: Mapping[str, Any], image_properties: Mapping[str, Any] | None = None) -> Guest:
        """The launch's ``options`` (None or missing means "not said"), else the image's Nova
        properties, else Berth's defaults; each GUEST_OPTIONS row checked, naming where its value
        came from."""
        properties = image_properties or {}
        values = {}
        for option in GUEST_OPTIONS:
            value, field = options.get(option.name), option.name
            if value in (None, "") and option.image_property:
                value, field = properties.get(option.image_property), f"image.properties.{option.image_property}"
            if value in (None, ""):
                value, field = option.default, option.name
            values[option.name] = option.parse(field, value) if value is not None else None
        return cls(values)

    @classmethod
    def from_record(cls, record: Any) -> Guest:
        """The guest an instance recorded (``to_record``), checked again: the ledger is not
        trusted. An option the record lacks (recorded before it existed) takes its default."""
        if not isinstance(record, Mapping):
            raise InputError("guest", f"the recorded guest must be a mapping, got {record!r}")
        known = {option.name for option in GUEST_OPTIONS}
        return cls.from_options({name: value for name, value in record.items() if name in known})

    def to_record(self) -> dict[str, Any]:
        return {name: (dict(value) if isinstance(value, Mapping) else value) for name, value in self.values.items()}

    def template_context(self) -> dict[str, Any]:
        """The values and the device names, as the domain template reads them (guest.disk_dev...):
        the root, ephemeral and swap disks in slots of their own on the disk bus (DISK_SLOTS), and
        the seed's CD-ROM after them where it uses their names too."""
        context = dict(self.values)
        prefix = DISK_BUSES[self.values["disk_bus"]]
        for slot, disk in enumerate(DISK_SLOTS):
            context[f"{disk}_dev"] = prefix + chr(ord("a") + slot)
        # libvirt refuses two devices of one name, whatever their buses.
        seed_prefix = CDROM_BUSES[self.values["cdrom_bus"]]
        context["seed_dev"] = seed_prefix + chr(ord("a") + (len(DISK_SLOTS) if prefix == seed_prefix else 0))
        return context


# The disks a flavor gives, in Nova's order on the guest's disk bus (its blockinfo: root, then
# ephemeral, then swap), each in a slot of its own whatever the flavor: a resize that adds one
# renames none of the others in the definition.
DISK_SLOTS = ("disk", "ephemeral", "swap")
# Data volumes (berth.fleet.volume) go on the disk bus after the flavor's slots and the slot the
# seed may take there: vde..vdz (or sde..sdz), 22 at most.
FIRST_VOLUME_SLOT = len(DISK_SLOTS) + 1


def volume_devices(disk_bus: str) -> list[str]:
    """The device names a data volume may take on ``disk_bus``, in the order they are given out:
    none on IDE, whose four devices (hda..hdd, one controller of a PC machine) are the flavor's
    slots and the seed's."""
    if disk_bus == "ide":
        return []
    prefix = DISK_BUSES[disk_bus]
    return [prefix + chr(ord("a") + slot) for slot in range(FIRST_VOLUME_SLOT, 26)]


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
