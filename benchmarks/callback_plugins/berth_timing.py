"""Benchmark-only stdout callback: wall time of each task, as JSON at the end of the run."""

from __future__ import annotations

import json
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: berth_timing
type: stdout
short_description: Task wall times as one JSON document, for Berth's benchmarks
description:
  - Prints each task's name, start and seconds, and whether the run failed, at the end.
  - C(marks) holds Unix times (time.time()) of the callback's loading, the first task and the end
    of the run, so that the benchmark can tell Ansible's start-up and the inventory's fact
    gathering (before the first task) from the tasks and the exit. Task starts count from the
    callback's loading.
  - Each task that ran says whether it C(changed) anything.
  - A task whose result has C(timing) (berth.fleet.schedule's read, decide and claim seconds) or
    C(placements) keeps them, under C(timing) and C(hosts).
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "berth_timing"

    def __init__(self):
        super().__init__()
        self.tasks = []
        self.failed = []
        self.started = time.monotonic()
        self.marks = {"callback_loaded": time.time()}

    def _close(self):
        if self.tasks and "seconds" not in self.tasks[-1]:
            self.tasks[-1]["seconds"] = time.monotonic() - self.tasks[-1]["start"]

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.marks.setdefault("first_task", time.time())
        self._close()
        self.tasks.append({"task": task.get_name(), "start": time.monotonic()})

    def v2_runner_on_ok(self, result, **kwargs):
        self.tasks[-1]["changed"] = bool(result._result.get("changed"))
        if "timing" in result._result:
            self.tasks[-1]["timing"] = result._result["timing"]
        if result._result.get("placements"):
            self.tasks[-1]["hosts"] = [p.get("host") for p in result._result["placements"]]

    def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
        self.failed.append(str(result._result.get("msg", "")))

    def v2_playbook_on_stats(self, stats):
        self._close()
        self.marks["stats"] = time.time()
        for task in self.tasks:
            task["start"] -= self.started
        self._display.display(json.dumps({"tasks": self.tasks, "failed": self.failed, "marks": self.marks}))
