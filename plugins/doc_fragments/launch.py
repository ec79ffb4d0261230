# The documentation of what a launch asks for (the flavor, the image, the guest's interfaces,
# metadata, user data, boot), shared by berth.fleet.instance_request and berth.fleet.server, which
# check it through plugins/module_utils/request.py.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  flavor:
    description:
      - The flavor, a name from O(flavors_file) or a dict of sizes (C(vcpus), C(memory_mb), C(root_gb),
        C(ephemeral_gb), C(swap), C(extra_specs)), checked against the limits below.
      - C(ephemeral_gb) (GiB) and C(swap) (MiB) are built as volumes of the storage pool after the
        root disk; the NoCloud seed's C(vendor-data) has cloud-init format the ephemeral disk
        (label C(ephemeral0), mounted at C(/mnt)) and make and enable the swap disk.
    type: raw
  flavors_file:
    description: A YAML file with a mapping C(berth_flavors) of name to sizes; default the collection's C(playbooks/vars/flavors.yml).
    type: path
  image:
    description:
      - A volume name in the hypervisors' instance storage pool, or a dict with C(name), C(format) (V(qcow2) or V(raw)),
        C(source), an absolute path on the controller to upload the image from where a
        hypervisor lacks it, or instead C(url), an C(http://) or C(https://) URL (without a user
        name or password) to download it from, with C(checksum), C(sha256:<hex>) (or
        C(sha384:), C(sha512:)), and C(properties), the image's properties as in Nova's image
        metadata (C(hw_architecture), C(img_hv_type), C(os_distro)...), which the scheduler
        matches (ImagePropertiesFilter, AggregateImagePropertiesIsolation) and the instance records
        (ImagePropertiesWeigher).
      - Names never leave the pool, no C(/), no C(..).
      - An image by URL whose name a chosen hypervisor's pool already has is used there only if
        that volume has the same checksum (read back through libvirt); otherwise the build
        fails on that host and says so.
    type: raw
  networks:
    description: Interfaces, each a dict with C(type) (V(none), V(user), V(network), V(bridge)) and C(name).
    type: raw
    default: []
  metadata:
    description: Extra key/value pairs for the domains' Berth metadata.
    type: raw
    default: {}
  user_data:
    description: cloud-init user data.
    type: raw
  boot:
    description: Direct kernel boot, C(kernel), C(initrd) (absolute paths on the hypervisor), C(cmdline).
    type: raw
    default: {}
"""
