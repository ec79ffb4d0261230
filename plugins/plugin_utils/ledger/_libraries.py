"""The ledger's third-party libraries, checked before any part of the ledger imports them (the
package imports this module first): a controller without them is told which package to
install when Ansible loads the first plugin that uses the ledger."""

from __future__ import annotations

from ansible.errors import AnsibleError

from ansible_collections.berth.fleet.plugins.module_utils._requirements import (
    MissingLibraryError,
    import_library,
    require_library,
)


class MissingLedgerLibraryError(MissingLibraryError, AnsibleError):
    """Raised while Ansible loads a plugin that uses the ledger, before its task runs: Ansible
    shows only an AnsibleError raised there as itself (anything else reads "Unexpected
    Exception, this is probably a bug")."""


import_library("sqlalchemy", "SQLAlchemy", "the ledger (berth.fleet's state database)",
               MissingLedgerLibraryError)
# Only looked for: alembic (with Mako) is imported when a ledger needs migrating, not by every
# task that opens a ledger (about 11 MiB and 0.1 s per process otherwise).
require_library("alembic", "alembic", "the ledger's schema migrations", MissingLedgerLibraryError)
