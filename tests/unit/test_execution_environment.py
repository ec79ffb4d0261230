"""The execution environment's declared Python requirements are exactly what plugins/ imports.

An EE built from meta/execution-environment.yml must be able to import every plugin: a package
missing there fails only under AWX (pycdlib and NumPy once did). The imports are read from the
source with ast, mapped to their distributions through the installed packages' metadata, and
compared with meta/ee-requirements.txt and with what ansible-builder's own introspection of the
collection lists.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_BUILDER = Path(sys.executable).with_name("ansible-builder")


def _imported_top_names() -> dict[str, set[str]]:
    """Top-level names of the absolute imports under plugins/ (import statements, and the
    libraries that import_library() imports where they are needed), each with the files
    importing it."""
    names: dict[str, set[str]] = {}
    for path in sorted((REPO / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "import_library" and isinstance(node.args[0], ast.Constant)):
                modules = [node.args[0].value]
            else:
                continue
            for module in modules:
                names.setdefault(module, set()).add(str(path.relative_to(REPO)))
    return names


def _third_party_distributions() -> dict[str, str]:
    """Canonical distribution name -> the import that needs it, for every import under
    plugins/ that is neither the standard library, Ansible, nor a collection."""
    by_import = importlib.metadata.packages_distributions()
    needed: dict[str, str] = {}
    for module in _imported_top_names():
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in ("ansible", "ansible_collections"):
            continue
        distributions = by_import.get(top)
        assert distributions, (f"plugins/ imports {top!r}, which no installed distribution provides: "
                               "add it to requirements.txt and meta/ee-requirements.txt")
        for distribution in distributions:
            needed[canonicalize_name(distribution)] = top
    return needed


def _ansible_core_requirements() -> set[str]:
    """What ansible-core itself installs (Jinja2, PyYAML, ...): the EE's base image has them."""
    return {canonicalize_name(Requirement(line).name)
            for line in importlib.metadata.requires("ansible-core") or []}


def _requirement_lines(path: Path) -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line and not line.startswith("-")]


def _declared() -> dict[str, Requirement]:
    return {canonicalize_name(req.name): req
            for req in _requirement_lines(REPO / "meta" / "ee-requirements.txt")}


def test_every_plugin_import_is_declared_for_the_ee_and_nothing_else():
    needed = set(_third_party_distributions()) - _ansible_core_requirements()
    declared = set(_declared())
    assert {"libvirt-python", "sqlalchemy", "alembic", "psycopg", "numpy", "pycdlib"} <= needed
    assert needed - declared == set(), "imported by plugins/ but missing in meta/ee-requirements.txt"
    assert declared - needed == set(), "in meta/ee-requirements.txt but imported nowhere in plugins/"


def test_ansible_core_brings_the_rest():
    """yaml and jinja2 are imported too, and come with ansible-core rather than the EE file."""
    rest = set(_third_party_distributions()) & _ansible_core_requirements()
    assert rest == {"pyyaml", "jinja2"}


def test_plugins_import_no_other_collection():
    """galaxy.yml declares no dependencies, so nothing may import another collection."""
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert galaxy["dependencies"] == {}
    foreign = {module: files for module, files in _imported_top_names().items()
               if module.startswith("ansible_collections.")
               and not module.startswith("ansible_collections.berth.fleet.")}
    assert foreign == {}


def test_ee_floors_are_the_tested_versions():
    """Each EE requirement is a floor (no cap, no pin: Ansible's collection requirements) at
    the version requirements.txt pins, which the tests ran."""
    tested = {canonicalize_name(req.name): req for req in _requirement_lines(REPO / "requirements.txt")}
    for name, req in _declared().items():
        assert name in tested, f"{req.name} is in the EE but not in requirements.txt"
        (pin,) = tested[name].specifier
        assert str(req.specifier) == f">={pin.version}", req.name
        assert req.extras == tested[name].extras, req.name


def test_ee_metadata_points_at_the_files():
    metadata = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    assert metadata["version"] == 1
    assert metadata["dependencies"] == {"python": "meta/ee-requirements.txt", "system": "bindep.txt"}


@pytest.fixture(scope="module")
def introspection(tmp_path_factory):
    """`ansible-builder introspect --sanitize` on a collections path holding this checkout,
    as ansible-builder runs it inside an EE build."""
    collections = tmp_path_factory.mktemp("collections")
    namespace = collections / "ansible_collections" / "berth"
    namespace.mkdir(parents=True)
    (namespace / "fleet").symlink_to(REPO)
    result = subprocess.run([str(ANSIBLE_BUILDER), "introspect", "--sanitize", str(collections)],
                            capture_output=True, text=True, check=True)
    return yaml.safe_load(result.stdout)


def test_ansible_builder_introspection_lists_every_import(introspection):
    listed = {canonicalize_name(Requirement(line.split("#", 1)[0]).name): line
              for line in introspection["python"]}
    needed = set(_third_party_distributions()) - _ansible_core_requirements()
    assert needed - set(listed) == set()
    assert all(line.endswith("# from collection berth.fleet") for line in listed.values())


def test_ansible_builder_introspection_lists_the_system_packages(introspection):
    system = {line.split("#", 1)[0].strip() for line in introspection["system"]}
    assert {"libvirt-dev [platform:dpkg compile]", "libvirt0 [platform:dpkg]",
            "libvirt-devel [platform:rpm compile]", "libvirt-libs [platform:rpm]"} <= system


def test_the_example_ee_definition_makes_a_build_context(tmp_path):
    """examples/awx/execution-environment.yml is valid for ansible-builder and carries the
    collection's tarball as `ansible-galaxy collection build` names it (no image is built:
    there is no container runtime here)."""
    example = tmp_path / "awx"
    example.mkdir()
    for name in ("execution-environment.yml", "requirements.yml"):
        (example / name).write_text((REPO / "examples" / "awx" / name).read_text())
    subprocess.run([str(ANSIBLE_BUILDER.with_name("ansible-galaxy")), "collection", "build",
                    "--output-path", str(example), str(REPO)], check=True, capture_output=True)
    subprocess.run([str(ANSIBLE_BUILDER), "create", "--context", str(tmp_path / "context")],
                   cwd=example, check=True, capture_output=True, text=True)
    build = tmp_path / "context" / "_build"
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    assert (build / "collections" / f"berth-fleet-{version}.tar.gz").is_file()
    (collection,) = yaml.safe_load((build / "requirements.yml").read_text())["collections"]
    assert collection == {"name": f"collections/berth-fleet-{version}.tar.gz", "type": "file"}
    containerfile = next(path for path in (tmp_path / "context").iterdir() if path.is_file())
    # The ansible-core CI tests the whole suite on (requirements.txt).
    pinned = re.search(r"^(ansible-core==[^\s#]+)", (REPO / "requirements.txt").read_text(), re.M).group(1)
    assert pinned in containerfile.read_text()
