# The limits of every size (plugins/module_utils/limits.py), for the modules that take a flavor or
# a launch's sizes. Written from limits.py itself, so the documentation shows the numbers checked.
from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.limits import doc_notes


class ModuleDocFragment:
    DOCUMENTATION = doc_notes()
