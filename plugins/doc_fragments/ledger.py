# The ledger_url option of the modules that use the ledger (plugins/plugin_utils/_argspec.py derives
# their argument specs from it; NO_LOG_OPTIONS there keeps it out of output).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  ledger_url:
    description:
      - SQLAlchemy URL of the ledger, C(sqlite:///PATH) or C(postgresql+psycopg://USER:PASSWORD@HOST/DB).
      - Not given, the play's variable C(berth_ledger_url) (set once in an inventory, as the lab's is, so that
        an ad-hoc C(ansible -m) task reads the ledger a playbook does), else C($BERTH_LEDGER_URL), else
        C(sqlite:///$XDG_STATE_HOME/berth/ledger.sqlite3).
      - A SQLite ledger whose file does not exist is created only by what may start one (the
        tracker sync, C(playbooks/gather.yml); a launch on live inventory facts, which syncs
        them first; an adoption; a new server group); anything else on it fails with
        C(no ledger at PATH) and creates no file or directory.
      - Never printed; its password is hidden in every message.
    type: str
"""
