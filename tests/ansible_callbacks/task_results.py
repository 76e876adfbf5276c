"""An Ansible callback for tests/test_playbooks.py: one JSON line per task result (its role,
its name, the host, ok/changed/skipped/failed, and for a loop the items that changed), written
to the file named by SLIMIO_TASK_RESULTS. ansible-core has no JSON callback of its own (that is
ansible.posix's, a collection the project does not install).

    ANSIBLE_CALLBACK_PLUGINS=tests/ansible_callbacks ANSIBLE_CALLBACKS_ENABLED=task_results \
    SLIMIO_TASK_RESULTS=results.jsonl ansible-playbook playbooks/setup-host.yml
"""

import json
import os

from ansible.playbook.handler import Handler
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: task_results
    type: aggregate
    short_description: one JSON line per task result, to the file in SLIMIO_TASK_RESULTS
    description: Used by tests/test_playbooks.py to find the tasks that report a change.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = os.environ.get("SLIMIO_TASK_RESULTS")
        self._items = {}

    def _write(self, result, status):
        task = result.task
        role = task._role.get_name() if task._role else None
        res = result.result
        items = self._items.pop((task._uuid, result.host.name), [])
        record = {"role": role, "task": task.name or task.action,
                  "handler": isinstance(task, Handler), "host": result.host.name, "status": status,
                  "changed": bool(res.get("changed", False)), "changed_items": items}
        if self._path:
            with open(self._path, "a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")

    def v2_runner_item_on_ok(self, result):
        if result.result.get("changed", False):
            label = result.result.get("_ansible_item_label", result.result.get("item"))
            self._items.setdefault((result.task._uuid, result.host.name), []).append(str(label))

    def v2_runner_on_ok(self, result):
        self._write(result, "ok")

    def v2_runner_on_skipped(self, result):
        self._write(result, "skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_unreachable(self, result):
        self._write(result, "unreachable")
