"""berth.fleet.instance_request: check a launch request before anything is scheduled (controller side)."""

from __future__ import annotations

from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.libvirt_host import Hypervisor
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    boot_spec,
    check_image_source,
    image_spec,
    instance_names,
    metadata_spec,
    network_specs,
    pool_image,
    user_data_spec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import BerthAction


class ActionModule(BerthAction):
    ARGUMENT_SPEC = {
        "name": {"type": "raw", "required": True},
        "count": {"type": "raw", "default": 1},
        "image": {"type": "raw"},
        "networks": {"type": "raw", "default": []},
        "metadata": {"type": "raw", "default": {}},
        "user_data": {"type": "raw"},
        "boot": {"type": "raw", "default": {}},
        "storage_pool": {"type": "str", "default": "default"},
        "hypervisor_group": {"type": "str", "default": "hypervisors"},
        "timeout": {"type": "float", "default": 10},
    }
    _supports_check_mode = True

    def run_berth(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
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
        result: dict[str, Any] = {"changed": False, "names": names, "image": image, "networks": networks,
                                  "hosts_with_image": [], "hosts_without_image": []}
        wanted_networks = sorted({net["name"] for net in networks if net["type"] == "network"})
        if not image and not wanted_networks:
            return result
        hostvars = task_vars.get("hostvars", {})
        answered = 0
        for host in task_vars.get("groups", {}).get(args["hypervisor_group"], []):
            variables = hostvars[host]
            if not variables.get("berth_host_state", {}).get("service_up") or not variables.get("berth_libvirt_uri"):
                continue
            try:
                with Hypervisor(host, variables["berth_libvirt_uri"], args["timeout"]) as hv:
                    # None where the pool has no such volume; refused where it leads out of the pool.
                    base = pool_image(hv, args["storage_pool"], image["name"], host) if image else None
                    known_networks = hv.network_names() if wanted_networks else []
            except HypervisorError:
                continue  # a host that does not answer now is the scheduler's to skip
            answered += 1
            missing = [name for name in wanted_networks if name not in known_networks]
            if missing:
                raise InputError("networks", f"network {', '.join(missing)} is not defined on {host} "
                                 f"(networks there: {', '.join(known_networks) or 'none'})")
            if image:
                key = "hosts_with_image" if base is not None else "hosts_without_image"
                result[key].append(host)
        if image and answered and not result["hosts_with_image"] and not image["source"]:
            raise InputError("image", f"unknown image {image['name']}: no hypervisor has it in storage pool "
                             f"{args['storage_pool']}, and no image.source to upload it from")
        return result
