"""A launch's request is checked once, where the task's options come in (issue 33): the operations
after that boundary - schedule, build, move, resize, power, the provisioning and transfer steps
beneath them, the ledger - take the typed Request and call no request validator. Read from the
code itself (its syntax tree), so a check slipped back into Build fails here."""

from __future__ import annotations

import ast
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
# What parses and checks a requester's options, or a part of them, into the request: the
# functions of module_utils/request.py, _guest.py, _public_keys.py, _static_network.py and
# cpu_topology.py that do it, the flavor's, and the parts' constructors from options.
VALIDATORS = {
    "image_spec", "image_url", "image_checksum", "network_specs", "metadata_spec", "user_data_spec", "boot_spec",
    "resolve_flavor", "flavor_option", "public_keys_spec", "public_key", "key_pair", "static_config",
    "check_default_routes", "graphics_spec", "best_topology", "domain_type_option",
    "server_group_value", "scheduling_request", "from_options", "from_option",
}
# Where they may be called: the boundary itself (the launch's check), and the request's own
# pieces. A schedule or capacity task's options enter through _placement_spec.scheduling_request.
BOUNDARIES = {("plugin_utils/operations/launch.py", "check_request"),
              # The image option of a launch, a rebuild and a rescue (operations/rebuild.py, rescue.py).
              ("plugin_utils/operations/launch.py", "check_image"),
              ("plugin_utils/operations/launch.py", "snapshot_image"),
              # A snapshot's new image name (operations/snapshot.py).
              ("plugin_utils/operations/launch.py", "image_name"),
              ("plugin_utils/_placement_spec.py", "scheduling_request")}
# Downstream of the boundary: every operation and everything they hand the request on to.
DOWNSTREAM = [*sorted((PLUGINS / "plugin_utils" / "operations").glob("*.py")),
              *(PLUGINS / "plugin_utils" / name for name in (
                  "_provisioning.py", "_transfer.py", "_fleet.py", "_placement_spec.py", "_power_states.py",
                  "_image_download.py", "_image_sources.py", "nocloud.py", "hooks.py")),
              *sorted((PLUGINS / "plugin_utils" / "ledger").glob("*.py"))]


def calls_by_function(path: Path) -> dict[str, list[tuple[str, int]]]:
    """Each top-level function or method of ``path`` (Class.method) with the names it calls."""
    tree = ast.parse(path.read_text(), str(path))
    found: dict[str, list[tuple[str, int]]] = {}

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{owner}.{child.name}" if owner else child.name
                calls = found.setdefault(name, [])
                for inner in ast.walk(child):
                    if isinstance(inner, ast.Call):
                        func = inner.func
                        called = func.id if isinstance(func, ast.Name) else (
                            func.attr if isinstance(func, ast.Attribute) else None)
                        if called:
                            calls.append((called, inner.lineno))
            elif isinstance(child, ast.ClassDef):
                visit(child, child.name)

    visit(tree, "")
    return found


def test_no_operation_after_the_launch_s_check_calls_a_request_validator():
    offending = []
    for path in DOWNSTREAM:
        relative = str(path.relative_to(PLUGINS))
        for function, calls in calls_by_function(path).items():
            if (relative, function) in BOUNDARIES:
                continue
            offending += [f"{relative}:{line} {function} calls {called}" for called, line in calls if called in VALIDATORS]
    assert offending == []


def test_the_boundary_is_where_the_request_is_checked():
    """The scan above finds the validators where they are meant to be: it would see them elsewhere."""
    launch = calls_by_function(PLUGINS / "plugin_utils" / "operations" / "launch.py")
    called = {name for name, _line in launch["check_request"]}
    assert {"flavor_option", "from_option", "from_options", "metadata_spec", "user_data_spec",
            "public_keys_spec"} <= called
    # The server operation hands the task's options to the boundary, and nothing else of them on.
    server = calls_by_function(PLUGINS / "plugin_utils" / "operations" / "server.py")
    assert ("check_request" in {name for name, _line in server["Server._present"]})
