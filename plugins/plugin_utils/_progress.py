"""Progress a person can follow while a long task runs: one line per instance per step, such as
``web-2 on hv3: started``, printed as the step happens. Private to the collection.

A task's action plugin runs in one of Ansible's worker processes; there Display hands each line
to Ansible's main process at once (ansible-core 2.19's FinalQueue), whose results thread prints
it while the task still runs, not when it ends. The lines go to stderr: stdout belongs to the
stdout callback (the default one's task results, or a JSON document).

Milestones print at every verbosity; details (``detail=True``) from ``-v`` up. A launch's
milestones are one line per instance (started, failed, retried elsewhere, an image upload), so a
launch of 30 instances prints about 30 lines; moves, resizes and power actions, which act on
one instance per task or on a few, print every step that takes time.
"""

from __future__ import annotations

from typing import Callable

from ansible.utils.display import Display

_display = Display()


def quiet(_what: str, detail: bool = False) -> None:
    """The progress callback of code run without anyone to tell: prints nothing."""


class Progress:
    """Where each instance of a task is, as ``<instance> on <host>: <what>`` lines."""

    def __init__(self) -> None:
        # -v and more (the worker inherits the main process's verbosity).
        self.details = _display.verbosity >= 1

    def step(self, instance: str, host: str, what: str, detail: bool = False) -> None:
        if detail and not self.details:
            return
        _display.display(f"{instance} on {host}: {what}", stderr=True)

    def of(self, instance: str, host: str) -> Callable[..., None]:
        """The progress callback of one instance on one host: ``step(what, detail=False)``."""
        def step(what: str, detail: bool = False) -> None:
            self.step(instance, host, what, detail)
        return step
