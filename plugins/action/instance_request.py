"""berth.fleet.instance_request: check a launch request before anything is scheduled (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils._guest import guest_spec
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    boot_spec,
    check_image_source,
    image_spec,
    instance_names,
    metadata_spec,
    network_specs,
    user_data_spec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._image_download import DOWNLOAD_ARGS, fetch_image
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        # Not required here: a launch without -e name gets the message below, not Ansible's.
        "name": {"type": "raw"},
        "count": {"type": "raw", "default": 1},
        "image": {"type": "raw"},
        "networks": {"type": "raw", "default": []},
        "metadata": {"type": "raw", "default": {}},
        "user_data": {"type": "raw"},
        "boot": {"type": "raw", "default": {}},
        # The guest's hardware: None means the image's hw_* property, else Berth's default.
        "firmware": {"type": "str"},
        "disk_bus": {"type": "str"},
        "nic_model": {"type": "str"},
        "guest_agent": {"type": "bool"},
        "graphics": {"type": "raw"},
        **DOWNLOAD_ARGS,
    }
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if args["name"] is None:
            raise InputError("name", "name is required: -e name=web launches web-1 .. web-<count>")
        count = args["count"]
        if isinstance(count, str) and count.strip().lstrip("-").isdigit():
            count = int(count)  # -e count=3 arrives as a string
        names = instance_names(args["name"], count)
        image = image_spec(args["image"])
        check_image_source(image)
        networks = network_specs(args["networks"])
        metadata_spec(args["metadata"])
        user_data_spec(args["user_data"])
        boot_spec(args["boot"])
        guest = guest_spec(args, (image or {}).get("properties"))
        # Last, after every cheap check: an image by URL is downloaded (in check mode too, into
        # the controller's cache only) and its checksum checked before anything is scheduled.
        image = fetch_image(image, args)
        # What the hosts must have, for the scheduler's PoolImageFilter and NetworkFilter: the
        # image volume unless the launch uploads it where missing, and the libvirt networks.
        return {
            "changed": False, "names": names, "image": image, "networks": networks, "guest": guest,
            # An image by URL has its source now: the file downloaded into the controller's cache.
            "image_volume": image["name"] if image and not image["source"] else None,
            "requested_networks": sorted({net["name"] for net in networks if net["type"] == "network"}),
        }
