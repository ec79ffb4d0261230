"""PLACEHOLDER until the hooks branch lands (same API)."""

from __future__ import annotations

BEFORE_CLAIM = "before-claim"
AFTER_CLAIM = "after-claim"
AFTER_ROOT_VOLUME = "after-root-volume"
AFTER_SEED_VOLUME = "after-seed-volume"
AFTER_DEFINE = "after-define"
AFTER_START = "after-start"
BUILD_POINTS = (AFTER_ROOT_VOLUME, AFTER_SEED_VOLUME, AFTER_DEFINE, AFTER_START)
AFTER_MOVE = "after-move"
BEFORE_RESIZE_START = "before-resize-start"


class Hooks:
    def reached(self, point: str, host: str | None = None, instance: str | None = None) -> None:
        return None


NO_HOOKS = Hooks()
_installed = NO_HOOKS


def installed() -> Hooks:
    return _installed


def install(hooks: Hooks) -> None:
    global _installed
    _installed = hooks
