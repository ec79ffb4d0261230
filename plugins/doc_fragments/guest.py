# The documentation twin of the guest options (plugins/module_utils/_guest.py), for
# berth.fleet.instance_request and berth.fleet.instance.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  firmware:
    description:
      - V(bios) (SeaBIOS) or V(uefi) (OVMF, without Secure Boot, from the firmware descriptors
        of the hypervisor's C(ovmf) package).
      - A UEFI guest gets its own variable store, copied by libvirt from OVMF's template at its
        first start into the volume C(berth-<uuid>-nvram.fd) of the storage pool; it is deleted
        with the instance and moved by M(berth.fleet.migrate) with the disks.
      - Not given, the image's C(hw_firmware_type) property decides, else V(bios).
    type: str
    choices: [bios, uefi]
  disk_bus:
    description:
      - Bus of the root disk, V(virtio) (C(vda)), V(scsi) (virtio-scsi, C(sda)), V(sata) (C(sda)) or V(ide) (C(hda)).
      - Not given, the image's C(hw_disk_bus) property decides, else V(virtio).
    type: str
    choices: [virtio, scsi, sata, ide]
  nic_model:
    description:
      - Model of every network interface.
      - Not given, the image's C(hw_vif_model) property decides, else V(virtio).
    type: str
    choices: [virtio, e1000, e1000e, rtl8139, vmxnet3, ne2k_pci, pcnet]
  cdrom_bus:
    description:
      - Bus of the CD-ROM that carries the instance's NoCloud seed, V(sata) (C(sda), or C(sdb) after a C(sda) root
        disk), V(scsi) (virtio-scsi) or V(ide) (C(hda), or C(hdb)), as Nova's C(hw_cdrom_bus); a guest kernel
        without an AHCI driver reads its seed on V(ide) or V(scsi).
      - Not given, the image's C(hw_cdrom_bus) property decides, else V(sata).
    type: str
    choices: [sata, scsi, ide]
  guest_agent:
    description:
      - Give the guest a virtio-serial channel C(org.qemu.guest_agent.0) for the QEMU guest agent.
      - Not given, the image's C(hw_qemu_guest_agent) property decides, else V(true).
    type: bool
  graphics:
    description:
      - V(none), V(vnc), V(spice), or a dict with C(type) and C(listen), an IP address of the
        hypervisor. C(listen) defaults to V(127.0.0.1), so that a console without a password is
        reached only through the hypervisor (an SSH tunnel); any other address must be given.
      - The first serial port is always a pty (C(virsh console)) whose output is also written to
        the serial log file.
    type: raw
"""
