# The documentation of what a launch asks for (the flavor, the image, the guest's interfaces and
# their settings, metadata, user data, boot), shared by berth.fleet.instance_request and
# berth.fleet.server, which check it through plugins/module_utils/request.py.
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
    description:
      - Interfaces, each a dict with C(type) (V(none), V(user), V(network), V(bridge)) and C(name), and optionally
        the guest's static settings of that interface, which it gets on its NoCloud seed as cloud-init's
        C(network-config) (version 2), matched by the interface's MAC address (derived from the instance UUID).
      - C(addresses), a list of addresses with their prefix length (C(10.0.0.5/24), C(2001:db8::5/64)).
      - C(gateway), the default gateway (or a list of one IPv4 and one IPv6 one), inside one of the interface's
        subnets.
      - C(routes), a list of C(to) (a network, C(10.1.0.0/16), or C(default)), C(via) (inside one of the
        interface's subnets) and optionally C(metric).
      - C(nameservers), with C(addresses) (at most 3 DNS servers) and C(search) (DNS names).
      - C(dhcp), whether the guest also asks DHCP for an IPv4 address; default V(true) without C(addresses),
        V(false) with them. Where no interface has static settings there is no C(network-config), and the
        guest's image configures its interfaces (cloud images use DHCP); where one has, every other interface
        is listed with DHCP.
      - At most one default route (a C(gateway) or a C(default) route) per address family across all
        interfaces. A bad value is refused before anything is scheduled or claimed, naming it
        (C(networks[1].addresses[0])).
    type: raw
    default: []
  volumes:
    description:
      - Data volumes to make and attach with each instance (Nova's block device mapping of a blank volume),
        each a dict with C(name) (a DNS label), C(size_gb) (1 to 16384 GiB) and C(delete_on_termination)
        (default V(false), as in Nova).
      - Each instance gets its own, named C(<instance>-<name>) in the ledger (M(berth.fleet.volume) lists and
        detaches them like any volume), made in the operator's storage pool on its host before its first start,
        and attached in the order given on the first free devices after its own disks (C(vde), C(vdf)... on
        virtio).
      - DiskFilter and the claim count them beside the flavor's disks; a launch whose volume name the ledger has
        already is refused. A build that fails removes them with the rest of the attempt.
      - Deleting the instance deletes those with C(delete_on_termination=true) and detaches and keeps the others.
      - Needs the ledger. Volumes on a shared pool are made with M(berth.fleet.volume), not with a launch.
      - M(berth.fleet.server) (C(playbooks/launch.yml)) makes them; M(berth.fleet.instance_request), for the roles'
        launch, refuses them.
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
