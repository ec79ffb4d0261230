"""TEST ONLY: a pause that lets tests make concurrent launches race for real, or stop a launch
at a known step of its build to kill it there.

Inert unless BERTH_TEST_BARRIER_DIR is set, which nothing but Berth's own tests does. Then a
run that reaches the stage named by BERTH_TEST_BARRIER_STAGE (``before-claim``: decided, not
yet claimed; ``after-claim``: claimed, nothing built yet; then the steps of a build on its
hypervisor, ``BUILD_STAGES``; ``after-move``: a migration or resize moved the domain, the
source's copy is still there) writes a file named after its PID into the directory and waits
until BERTH_TEST_BARRIER_PARTIES runs have arrived, or until the file ``release`` appears
there, or BERTH_TEST_BARRIER_TIMEOUT seconds (300) have passed.
"""

from __future__ import annotations

import os
import time

BEFORE_CLAIM = "before-claim"
AFTER_CLAIM = "after-claim"
# The steps of a build (plugins/plugin_utils/_build.make), each once it is done.
AFTER_ROOT_VOLUME = "after-root-volume"
AFTER_SEED_VOLUME = "after-seed-volume"
AFTER_DEFINE = "after-define"
AFTER_START = "after-start"
BUILD_STAGES = (AFTER_ROOT_VOLUME, AFTER_SEED_VOLUME, AFTER_DEFINE, AFTER_START)
# A move (plugins/plugin_utils/_move.py): the domain runs on the destination, the source's copy
# is not removed yet.
AFTER_MOVE = "after-move"
_POLL_S = 0.05


def wait(stage: str) -> None:
    directory = os.environ.get("BERTH_TEST_BARRIER_DIR")
    if not directory or os.environ.get("BERTH_TEST_BARRIER_STAGE") != stage:
        return
    parties = int(os.environ.get("BERTH_TEST_BARRIER_PARTIES", "1"))
    deadline = time.monotonic() + float(os.environ.get("BERTH_TEST_BARRIER_TIMEOUT", "300"))
    arrived = os.path.join(directory, "arrived")
    os.makedirs(arrived, exist_ok=True)
    with open(os.path.join(arrived, str(os.getpid())), "w", encoding="utf-8"):
        pass
    while time.monotonic() < deadline:
        if len(os.listdir(arrived)) >= parties or os.path.exists(os.path.join(directory, "release")):
            return
        time.sleep(_POLL_S)
