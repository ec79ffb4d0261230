"""Test-only stdout callback: the play as JSON (ansible-core ships no JSON callback).

Prints {"plays": [{"tasks": [{"task": name, "hosts": {host: result}}]}], "stats": {host: {...}}}.
"""

from __future__ import annotations

import json

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: berth_test_json
type: stdout
short_description: Play results as one JSON document, for Berth's integration tests
description: Prints every task's per-host result and the recap counts as JSON at the end.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "berth_test_json"

    def __init__(self):
        super().__init__()
        self.plays = []

    def v2_playbook_on_play_start(self, play):
        self.plays.append({"play": play.get_name(), "tasks": []})

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.plays[-1]["tasks"].append({"task": task.get_name(), "hosts": {}})

    def _record(self, result, **extra):
        data = dict(result._result)
        data.update(extra)
        self.plays[-1]["tasks"][-1]["hosts"][result._host.get_name()] = data

    def v2_runner_on_ok(self, result, **kwargs):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result, **kwargs):
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result, **kwargs):
        self._record(result, unreachable=True)

    def v2_playbook_on_stats(self, stats):
        summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._display.display(json.dumps({"plays": self.plays, "stats": summary}, default=str))
