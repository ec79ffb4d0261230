# The documentation twins of the guest options (plugins/module_utils/_guest.py) and of
# DOWNLOAD_ARGS (plugins/plugin_utils/_image_download.py), for berth.fleet.instance_request and
# berth.fleet.instance.
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

    IMAGE_DOWNLOAD = r"""
options:
  image_cache_dir:
    description:
      - Directory on the controller for images by C(image.url), each file named by its checksum
        (C(sha256-<hex>)). An image already there with the right checksum is not downloaded
        again; a damaged one is.
    type: path
    default: ~/.cache/berth/images
  image_timeout:
    description: Seconds the download's connection and each of its reads may take.
    type: float
    default: 60
  image_max_mb:
    description: Largest image a download may bring, in MiB; a larger one is refused (by its Content-Length, or as it arrives).
    type: int
    default: 8192
  image_validate_certs:
    description: Check the HTTPS server's certificate. Turn off only for a server you trust by other means.
    type: bool
    default: true
"""
