# The options of the actions that move an instance (berth.fleet.migrate, berth.fleet.resize;
# plugins/plugin_utils/_transfer.py); their argument specs derive from it.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  source:
    description:
      - Where the destinations' host states come from - V(ledger) (the tracker sync's last record
        plus the claims, which each move moves) or V(inventory) (the inventory's live facts), as
        M(berth.fleet.schedule)'s option. The URIs of the hypervisors are the ledger's.
    type: str
    choices: [ledger, inventory]
    default: ledger
  hypervisor_group:
    description: The inventory group whose hosts carry C(berth_host_state) (O(source=inventory)).
    type: str
    default: hypervisors
  service_down_time:
    description: Seconds after its last sync that a hypervisor is stale and not a destination.
    type: int
    default: 600
  storage_pool:
    description: The storage pool of the instance's volumes, the same name on every host.
    type: str
    default: default
  timeout:
    description: Seconds each libvirt call may take, except the copies of whole disks.
    type: float
    default: 120
  transfer_timeout:
    description: Seconds a volume copy or a live migration itself may take.
    type: float
    default: 3600
  carry_definition:
    description:
      - By default the destination defines what Berth would define there - the instance's domain
        rendered again from its build record (flavor, guest options, networks, metadata, boot)
        through the domain template - never the source's definition, and a source domain with
        anything Berth did not put there (a device, QEMU arguments) is refused, naming it, before
        anything is claimed. An adopted instance, or one launched before Berth kept build
        records, has none, and is refused too.
      - V(true) carries the source's definition as it is (its disks pointed at the destination's
        pool), for such instances and domains changed by hand. Only for this move, and only when
        you trust the source hypervisor, since whatever its definition holds is defined on the
        destination.
    type: bool
    default: false
  template:
    description:
      - The domain template the destination's definition is rendered from (the path of a
        Jinja2 template); by default the role M(berth.fleet.instance) builds with,
        C(roles/instance/templates/domain.xml.j2). Give the one the instance was launched with.
    type: path
  serial_log_dir:
    description: Directory on the hypervisors for the serial console log C(<name>.serial.log),
      as M(berth.fleet.instance)'s option (the same for the move as for the launch).
    type: str
    default: /var/log/libvirt/qemu
  ledger:
    description: Unused; the ledger is always needed to move an instance.
    type: bool
    default: true
"""
