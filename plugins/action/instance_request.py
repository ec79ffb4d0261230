"""berth.fleet.instance_request: check a launch request before anything is scheduled (controller side).
An adapter: the check is plugins/plugin_utils/operations/launch.py's."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import instance_names
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings


class ActionModule(BerthAction):
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        if args["name"] is None:
            raise InputError("name", "name is required: -e name=web launches web-1 .. web-<count>")
        count = args["count"]
        if isinstance(count, str) and count.strip().lstrip("-").isdigit():
            count = int(count)  # -e count=3 arrives as a string
        names = instance_names(args["name"], count)
        request = check_request(args, Settings.from_args(args))
        if request.volumes:
            # The roles' launch (berth.fleet.schedule, then berth.fleet.instance) claims and builds
            # no volumes: refused, never accepted and ignored.
            raise InputError("volumes", "volumes are made with a launch by berth.fleet.server (playbooks/launch.yml); "
                                        "the roles' launch does not make them: make them with berth.fleet.volume")
        image = request.image
        return {"changed": False, "names": names, "request": request.to_record(),
                # What the hosts must have, for the scheduler's PoolImageFilter and NetworkFilter.
                "image_volume": request.image_volume, "requested_networks": request.requested_networks,
                "image_downloaded": bool(image is not None and image.downloaded)}
