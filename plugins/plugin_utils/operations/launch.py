"""A launch: the request checked once, the instances scheduled and claimed, then built on their
hosts with retries on the alternates. What berth.fleet.server does for one named instance;
berth.fleet.instance_request shares its check. Private to the collection."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.berth.fleet.plugins.module_utils._guest import guest_spec
from ansible_collections.berth.fleet.plugins.module_utils._public_keys import public_keys_spec
from ansible_collections.berth.fleet.plugins.module_utils.cpu_topology import best_topology
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    boot_spec,
    image_spec,
    metadata_spec,
    network_specs,
    user_data_spec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._argspec import module_argument_spec
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import COLLECTION_ROOT, flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils._image_download import fetch_image
from ansible_collections.berth.fleet.plugins.plugin_utils._image_sources import check_image_source, image_source_dirs
from ansible_collections.berth.fleet.plugins.plugin_utils.hooks import NO_HOOKS, Hooks
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import Build
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule

# The two halves' options, as their modules document them: a launch hands each the options it
# was given that the half takes, and the half's documented defaults fill the rest.
SCHEDULE_SPEC = module_argument_spec(f"{COLLECTION_ROOT}/plugins/action/schedule.py")
BUILD_SPEC = module_argument_spec(f"{COLLECTION_ROOT}/plugins/action/instance.py")


def check_request(args: Mapping[str, Any]) -> dict[str, Any]:
    """A launch's request, every part checked against its limits before anything is scheduled:
    the flavor (when given), image, networks (with their static settings), metadata, user data,
    SSH keys, boot paths and the guest's hardware; an image by URL is downloaded into the
    controller's cache (in check mode too) and its checksum checked. Contacts no hypervisor."""
    flavor = flavor_option(args).to_dict() if args.get("flavor") is not None else None
    image = image_spec(args.get("image"))
    check_image_source(image, image_source_dirs(args), args["image_max_mb"])
    networks = network_specs(args.get("networks") or [])
    metadata_spec(args.get("metadata") or {})
    user_data_spec(args.get("user_data"))
    public_keys_spec(args.get("ssh_authorized_keys"), args.get("key_name"), args.get("key_pairs"))
    boot_spec(args.get("boot") or {})
    guest = guest_spec(args, (image or {}).get("properties"))
    if flavor is not None:
        # Contradicting topology specs are refused before anything is scheduled.
        best_topology(flavor["vcpus"], flavor.get("extra_specs") or {}, (image or {}).get("properties"))
    # Last, after every cheap check: the download.
    image = fetch_image(image, args)
    return {
        "flavor": flavor, "image": image, "networks": networks, "guest": guest,
        # What the hosts must have, for the scheduler's PoolImageFilter and NetworkFilter: the
        # image volume unless the launch uploads it where missing, and the libvirt networks.
        "image_volume": image["name"] if image and not image["source"] else None,
        "requested_networks": sorted({net["name"] for net in networks if net["type"] == "network"}),
    }


def half_options(spec: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given``'s options that ``spec`` takes (those set), validated with ``spec``'s defaults."""
    result = ArgumentSpecValidator(dict(spec)).validate(
        {key: value for key, value in given.items() if key in spec and value is not None})
    if result.error_messages:
        raise InputError("options", "; ".join(result.error_messages))
    return result.validated_parameters


class Launch:
    """Launch the instances ``names`` (those not there yet) from one checked request: schedule
    and claim them together, then build each on its host, retried on its alternates."""

    def __init__(self, args: Mapping[str, Any], names: Sequence[str], ledger: Ledger | None,
                 task_vars: Mapping[str, Any], template_path: str, check_mode: bool, diff: bool,
                 hooks: Hooks = NO_HOOKS) -> None:
        self.args, self.names, self.ledger, self.task_vars = args, list(names), ledger, task_vars
        self.template_path, self.check_mode, self.diff, self.hooks = template_path, check_mode, diff, hooks

    def run(self) -> dict[str, Any]:
        args = self.args
        request = check_request(args)
        image = request["image"]
        schedule_args = half_options(SCHEDULE_SPEC, {
            **args, "count": len(self.names), "image_volume": request["image_volume"],
            "requested_networks": request["requested_networks"],
            "image_properties": (image or {}).get("properties") or {}})
        flavor = flavor_option(schedule_args)
        planned = Schedule(schedule_args, self.names, flavor, self.ledger, self.task_vars, self.check_mode,
                           self.hooks).run()
        result: dict[str, Any] = {"schedule": planned, "changed": bool(planned["placements"]) and not self.check_mode}
        if planned.get("failed") or not planned["placements"]:
            result.update({key: planned[key] for key in ("failed", "msg") if key in planned})
            return result
        # Each placement carries its flavor, resolved by the schedule.
        build_args = half_options(BUILD_SPEC, {**args, "state": "active", "flavor": None,
                                               "placements": planned["placements"]})
        build = Build(build_args, self.ledger, self.template_path, self.check_mode, self.diff, self.hooks,
                      checked=request)
        built = build.run()
        result.update(build=built, changed=built["changed"] or result["changed"])
        result.update({key: built[key] for key in ("failed", "msg") if key in built})
        return result
