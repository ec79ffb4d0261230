"""The task's flavor: a name from a flavors file (default the one the collection ships) or a
dict of sizes. Private to the collection."""

from __future__ import annotations

import os
from typing import Any, Mapping

import yaml

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import resolve_flavor
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor

# The collection's own directory: the shipped flavors file, the role's domain template and the
# actions' module files are found from it.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FLAVORS_FILE = os.path.join(COLLECTION_ROOT, "playbooks", "vars", "flavors.yml")


def flavor_option(flavor: Any, flavors_file: str | None) -> Flavor:
    """The task's ``flavor``: a name from the operator's ``flavors_file`` (default the shipped one)
    or a dict of sizes. A dict is checked without reading the file."""
    flavors = {} if isinstance(flavor, Mapping) else _load_flavors(flavors_file or DEFAULT_FLAVORS_FILE)
    return resolve_flavor(flavor, flavors)


def _load_flavors(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise InputError("flavors_file", f"cannot read flavors_file {path}: {exc.strerror}") from exc
    flavors = data.get("berth_flavors") if isinstance(data, dict) else None
    if not isinstance(flavors, dict):
        raise InputError("flavors_file", f"flavors_file {path} must hold a mapping 'berth_flavors'")
    return flavors
