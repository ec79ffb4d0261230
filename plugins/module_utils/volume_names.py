"""The names of the volumes a build makes in a hypervisor's pool (berth-<instance uuid>-<what>),
and how a volume's name tells that it is one and whose; and the names of data volumes
(berth.fleet.volume: berth-volume-<name>.qcow2), which are neither images nor a build's.

Python 3.9: the hypervisor_facts module ships this file to hypervisors."""

from __future__ import annotations

import re

# The volumes a build makes are named berth-<instance uuid>-<what>: a sync tells them from
# images by name, and knows whose they are (the tracker then asks the ledger what became of it).
_INSTANCE_VOLUME = re.compile(r"^berth-([0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})-[A-Za-z0-9][A-Za-z0-9._-]*$")


def root_volume_name(instance_uuid: str) -> str:
    return f"berth-{instance_uuid}-root.qcow2"


def seed_volume_name(instance_uuid: str) -> str:
    return f"berth-{instance_uuid}-seed.iso"


def ephemeral_volume_name(instance_uuid: str) -> str:
    """The flavor's ephemeral disk (Nova's disk.local), which the guest formats as ephemeral0."""
    return f"berth-{instance_uuid}-ephemeral0.qcow2"


def swap_volume_name(instance_uuid: str) -> str:
    """The flavor's swap disk (Nova's disk.swap)."""
    return f"berth-{instance_uuid}-swap.qcow2"


def rescue_volume_name(instance_uuid: str) -> str:
    """The disk an instance in rescue boots from (berth.fleet.rescue; Nova's disk.rescue), made
    from the rescue image and removed by its unrescue."""
    return f"berth-{instance_uuid}-rescue.qcow2"


def instance_volume_names(instance_uuid: str) -> tuple[str, ...]:
    """Every volume a build of the instance, or its rescue, may make, by name: what removing it
    deletes."""
    return (root_volume_name(instance_uuid), ephemeral_volume_name(instance_uuid), swap_volume_name(instance_uuid),
            seed_volume_name(instance_uuid), nvram_volume_name(instance_uuid), rescue_volume_name(instance_uuid))


def nvram_volume_name(instance_uuid: str) -> str:
    """A UEFI instance's variable store: a volume of the pool, so that it is Berth's like the
    disks, moves with them and goes with the instance."""
    return f"berth-{instance_uuid}-nvram.fd"


# A data volume's name in the ledger is a DNS label; in the pool it is berth-volume-<label>.qcow2,
# which no build's volume (berth-<uuid>-...) and no image a launch may name can be.
_DATA_VOLUME = re.compile(r"^berth-volume-[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.qcow2$")


def data_volume_name(name: str) -> str:
    """The pool volume of the data volume ``name`` (a DNS label)."""
    return f"berth-volume-{name}.qcow2"


def is_data_volume(name: str) -> bool:
    """Whether a pool volume is named as berth.fleet.volume names data volumes."""
    return bool(_DATA_VOLUME.match(name))


def is_instance_volume(name: str) -> bool:
    """Whether a pool volume is named as a Berth build names its volumes (an instance's disk,
    seed, UEFI variable store...), and so is not an image."""
    return bool(_INSTANCE_VOLUME.match(name))


def volume_instance_uuid(name: str) -> str | None:
    """The instance UUID a build's volume name carries, or None for any other volume."""
    match = _INSTANCE_VOLUME.match(name)
    return match.group(1) if match else None
