"""A module's argument spec from its documented options, so that what ansible-doc says a module
takes and what it accepts cannot differ. Private to the collection.

The one converter from documentation to spec: plugin_utils/_argspec.py uses it for the actions
(on the controller, doc fragments merged in), and a module that runs on a hypervisor, as
hypervisor_facts does, uses ``documented_argument_spec`` on its own DOCUMENTATION there, where
only what AnsiballZ ships (module_utils) and the host's Python are at hand.

Python 3.9: the hypervisor_facts module ships this file to hypervisors.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible.module_utils.common.yaml import HAS_YAML, yaml_load

# Module documentation cannot say no_log (ansible-test's schema has no such key), so the options
# that carry credentials are named here; each says "Never printed" in its description.
NO_LOG_OPTIONS = frozenset({"ledger_url"})
_COPIED = ("elements", "required", "default", "choices", "aliases")


def argument_spec(options: Mapping[str, Any]) -> Dict[str, Any]:
    """Documented options as an argument spec (suboptions included): type, elements,
    required, default, choices, aliases and no_log, as Ansible's ArgumentSpecValidator takes
    them."""
    spec = {}
    for name, option in options.items():
        entry = {"type": option.get("type", "str")}
        entry.update({key: option[key] for key in _COPIED if key in option})
        if "choices" in entry:
            entry["choices"] = list(entry["choices"])  # documentation may map each choice to its description
        if name in NO_LOG_OPTIONS:
            entry["no_log"] = True
        if "suboptions" in option:
            entry["options"] = argument_spec(option["suboptions"])
        spec[name] = entry
    return spec


def documented_argument_spec(documentation: str) -> Dict[str, Any]:
    """The argument spec of a module from its DOCUMENTATION text, read where the module runs.

    Needs PyYAML there (ansible-core's own module_utils reach it). A module whose documentation
    extends doc fragments cannot use this: fragments live on the controller only.
    """
    if not HAS_YAML:
        raise ImportError("PyYAML")
    doc = yaml_load(documentation)
    if doc.get("extends_documentation_fragment"):
        raise ValueError("documentation with doc fragments is read on the controller (plugin_utils/_argspec.py)")
    return argument_spec(doc.get("options") or {})
