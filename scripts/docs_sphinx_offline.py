"""Sphinx settings scripts/docs adds to the conf.py that `antsibull-docs sphinx-init` writes.

That conf.py resolves references into Ansible's own documentation (ansible.builtin modules,
"common return values", ANSIBLE_* variables) through intersphinx, which downloads each
project's objects.inv. This machine reaches package registries only, so the download fails,
each such reference stays undefined, and sphinx -W fails the build. Instead, intersphinx is
left without inventories and the references that point outside this collection are linked
here by the documented URL layout of docs.ansible.com. Any reference into berth.fleet itself,
or to a page outside that layout, still warns and fails the build.
"""

from __future__ import annotations

import re

from docutils import nodes

ANSIBLE_DOCS = "https://docs.ansible.com/projects/ansible/devel/"
# Pages of Ansible's documentation that the antsibull-docs templates refer to by label.
_LABELS = {
    "action_plugins": "plugins/action.html",
    "common_return_values": "reference_appendices/common_return_values.html",
    "ansible_configuration_settings": "reference_appendices/config.html",
}
# ansible_collections.<namespace>.<name>.<plugin>_<type>: a plugin page of another collection.
_PLUGIN_LABEL = re.compile(r"^ansible_collections\.([a-z0-9_]+)\.([a-z0-9_]+)\.([a-z0-9_]+_[a-z]+)$")

intersphinx_mapping: dict = {}


def _url(reftype: str, target: str) -> str | None:
    if reftype == "envvar" and target.startswith("ANSIBLE_"):
        return f"{ANSIBLE_DOCS}reference_appendices/config.html#envvar-{target}"
    if reftype != "ref":
        return None
    if target in _LABELS:
        return ANSIBLE_DOCS + _LABELS[target]
    plugin = _PLUGIN_LABEL.match(target)
    if plugin and (plugin.group(1), plugin.group(2)) != ("berth", "fleet"):
        return f"{ANSIBLE_DOCS}collections/{plugin.group(1)}/{plugin.group(2)}/{plugin.group(3)}.html"
    return None


def _resolve(app, env, node, contnode):
    url = _url(node.get("reftype", ""), node.get("reftarget", ""))
    if url is None:
        return None
    reference = nodes.reference("", "", internal=False, refuri=url)
    reference += contnode
    return reference


def setup(app):
    app.connect("missing-reference", _resolve)
