# The guest hardware options, derived from their one declaration (GUEST_OPTIONS in
# plugins/module_utils/_guest.py), for berth.fleet.server, berth.fleet.instance_request and
# berth.fleet.instance: a new row there is documented, and accepted, with nothing written here.
from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils._guest import guest_documentation


class ModuleDocFragment:
    DOCUMENTATION = guest_documentation()
