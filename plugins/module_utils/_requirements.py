"""The one way Berth says that a third-party Python library is missing: by its pip package,
as modules do with ``missing_required_lib``, never as "No module named ...".

Import a library with ``import_library`` where it is first needed (or at the top of the one
package that needs it everywhere, as the ledger does with SQLAlchemy).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from ansible_collections.berth.fleet.plugins.module_utils.errors import BerthError


class MissingLibraryError(BerthError):
    """A library Berth needs cannot be imported; ``package`` is what to ``pip install``."""

    def __init__(self, package: str, needed_for: str, error: ImportError) -> None:
        super().__init__(
            f"{needed_for} needs the Python package {package}, which the Python that runs Ansible "
            f"({sys.executable}) cannot import ({error}): install it there with "
            f"pip install '{package}' (the collection's meta/ee-requirements.txt lists every "
            f"package Berth needs)"
        )
        self.package = package


def import_library(module: str, package: str, needed_for: str,
                   error_class: type[MissingLibraryError] = MissingLibraryError) -> ModuleType:
    """``module`` imported, or ``error_class`` (a MissingLibraryError) naming ``package`` and
    what needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        # Not chained: the message carries the import's error, and Ansible would append it again.
        raise error_class(package, needed_for, error) from None


def require_library(module: str, package: str, needed_for: str,
                    error_class: type[MissingLibraryError] = MissingLibraryError) -> None:
    """``error_class`` naming ``package`` unless ``module`` is installed; nothing is imported (for
    a library only some runs need, whose import is too large to pay in every process)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError) as error:
        raise error_class(package, needed_for, ImportError(str(error))) from None
    if not found:
        raise error_class(package, needed_for, ImportError(f"No module named {module!r}"))
