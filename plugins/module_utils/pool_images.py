"""The images of a hypervisor's pool a launch may use: a volume and every backing file under it
must be plain files of that pool.

Python 3.9: the hypervisor_facts module ships this file to hypervisors."""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.volume_names import is_instance_volume

# Deeper backing chains than this are refused: no image needs them, and a loop must end.
MAX_BACKING_CHAIN = 8


def pool_image(hv: Any, pool: str, name: str, host: str, refresh: bool = True) -> dict[str, Any] | None:
    """The image volume ``name`` of ``pool`` (None if it is not there), refused unless it and every
    backing file under it are plain files of that pool: a link, a device or a backing file
    elsewhere could hand a guest any file or disk of the hypervisor. ``refresh=False`` trusts the
    pool's last scan."""
    image = current = hv.volume(pool, name, refresh)
    for _depth in range(MAX_BACKING_CHAIN):
        if current is None:
            return image
        where = f"image {name} in storage pool {pool} on {host}"
        if current["name"] != name:
            where += f" (through its backing file {current['name']})"
        if current["link"]:
            raise InputError("image", f"{where} is a symbolic link; Berth refuses images that may lead out of "
                             f"the pool (copy the image into the pool)")
        if current["type"] != "file":
            raise InputError("image", f"{where} is a {current['type']} volume, not a file; Berth's images are "
                             f"files in the pool")
        if not current["backing"]:
            return image
        directory = os.path.dirname(current["path"])
        backing = os.path.normpath(os.path.join(directory, current["backing"]))
        if os.path.dirname(backing) != directory:
            raise InputError("image", f"{where} is backed by {current['backing']}, outside the pool; Berth's "
                             f"images and their backing files are files of the pool")
        current = hv.volume(pool, os.path.basename(backing), refresh)
        if current is None:
            raise InputError("image", f"{where} is backed by {os.path.basename(backing)}, which is not a volume "
                             f"of the pool")
    raise InputError("image", f"image {name} in storage pool {pool} on {host} has a backing chain deeper "
                     f"than {MAX_BACKING_CHAIN}")


def image_refusals(hv: Any, pool: str, volumes: list[str], host: str) -> dict[str, str]:
    """Why each volume of ``pool`` that is not a build's own would be refused as an image (the
    checks of ``pool_image``), for the volumes it refuses; ``volumes`` was just listed."""
    refused = {}
    for name in volumes:
        if is_instance_volume(name):
            continue
        try:
            pool_image(hv, pool, name, host, refresh=False)
        except InputError as exc:
            refused[name] = str(exc)
    return refused
