"""The hooks port: the named points an operation tells as it passes them, and the process's hooks.

An operation calls ``hooks.reached(point, host=..., instance=...)`` at each point below. The
default hooks do nothing; code the operator runs in the ansible-playbook process (a plugin) may
install others before Ansible forks its workers, which inherit them. Berth's own tests do so to
hold runs at a barrier or to fail a step on purpose; nothing in the collection reads the
environment to change what an operation does.
"""

from __future__ import annotations

# A launch: decided, not yet claimed; then claimed, nothing built yet.
BEFORE_CLAIM = "before-claim"
AFTER_CLAIM = "after-claim"
# The steps of a build on its hypervisor (_provisioning.make), each once it is done.
AFTER_ROOT_VOLUME = "after-root-volume"
AFTER_SEED_VOLUME = "after-seed-volume"
AFTER_DEFINE = "after-define"
AFTER_START = "after-start"
BUILD_POINTS = (AFTER_ROOT_VOLUME, AFTER_SEED_VOLUME, AFTER_DEFINE, AFTER_START)
# A move (_transfer.py): the domain runs on the destination, the source's copy is not removed yet
# (told with the source as its host).
AFTER_MOVE = "after-move"
# A resize: the domain is redefined with the new size (and its root disk grown), not started yet.
BEFORE_RESIZE_START = "before-resize-start"
# A rebuild: the instance's old domain and disks are removed from its host, nothing made anew yet.
AFTER_REBUILD_REMOVE = "after-rebuild-remove"
# A rescue: the rescue disk is made and the domain off, its own definition still there; then the
# rescue definition is defined, not started yet. An unrescue: its own definition is defined
# again, the rescue disk not removed yet and nothing started.
AFTER_RESCUE_DISK = "after-rescue-disk"
AFTER_RESCUE_DEFINE = "after-rescue-define"
AFTER_UNRESCUE_DEFINE = "after-unrescue-define"
# A data volume (operations/volume.py), between its ledger write and its change on the host:
# created: its row (its claim) written, its file not made yet;
AFTER_VOLUME_RECORD = "after-volume-record"
# attached: recorded as attached, not plugged into the domain yet;
AFTER_VOLUME_ATTACH_RECORD = "after-volume-attach-record"
# detached: unplugged from the domain, still recorded as attached;
AFTER_VOLUME_UNPLUG = "after-volume-unplug"
# deleted: its file removed from the pool, its row (its claim) not forgotten yet.
AFTER_VOLUME_REMOVE = "after-volume-remove"
# A snapshot (operations/snapshot.py): the guest frozen or paused for the copy, nothing copied yet;
SNAPSHOT_CONSISTENT = "snapshot-consistent"
# then its root disk copied in its pool, the guest released, the image's partial file open in the
# image directory, nothing downloaded yet.
AFTER_SNAPSHOT_COPY = "after-snapshot-copy"


class Hooks:
    """What an operation tells at its named points. The default does nothing."""

    def reached(self, point: str, host: str | None = None, instance: str | None = None) -> None:
        """The operation has reached ``point`` (one of this module's constants), on ``host``
        for ``instance`` (its UUID) where it has them. A hook may block (a barrier) or raise (an injected
        fault: HypervisorError(host, ...)), and the operation handles that as it would the
        same failure at that step."""


NO_HOOKS = Hooks()
_installed: Hooks = NO_HOOKS


def installed() -> Hooks:
    """The process's hooks: NO_HOOKS unless code the operator runs installed others."""
    return _installed


def install(hooks: Hooks) -> None:
    """Make ``hooks`` the process's hooks (for code the operator runs, e.g. Berth's tests)."""
    global _installed  # pylint: disable=global-statement
    _installed = hooks
