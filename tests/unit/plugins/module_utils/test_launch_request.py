"""The launch request's image, network, metadata, user data and boot checks (pure)."""

from __future__ import annotations

import pytest

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    boot_spec,
    dns_label,
    image_spec,
    metadata_spec,
    network_specs,
    user_data_spec,
)


def test_image_by_name_defaults_to_qcow2_without_source():
    assert image_spec("debian.qcow2") == {"name": "debian.qcow2", "format": "qcow2", "source": None,
                                          "properties": {}}
    assert image_spec(None) is None and image_spec("") is None


def test_image_properties_are_kept_and_must_be_a_mapping():
    image = image_spec({"name": "debian.qcow2", "properties": {"hw_architecture": "x86_64"}})
    assert image["properties"] == {"hw_architecture": "x86_64"}
    for bad in (["hw_architecture"], "x86_64", {1: "x"}):
        with pytest.raises(InputError) as info:
            image_spec({"name": "debian.qcow2", "properties": bad})
        assert info.value.field == "image.properties"


def test_image_dict_keeps_format_and_source():
    spec = image_spec({"name": "d.img", "format": "raw", "source": "/srv/d.img"})
    assert spec == {"name": "d.img", "format": "raw", "source": "/srv/d.img", "properties": {}}


@pytest.mark.parametrize(
    "image, field",
    [
        ("../x.qcow2", "image.name"),
        ("a/../../b", "image.name"),
        ("/etc/passwd", "image.name"),
        ("sub/x.qcow2", "image.name"),
        ("..", "image.name"),
        (".hidden", "image.name"),
        ("x..y", "image.name"),
        ("", None),
        ({"name": "x", "format": "vmdk"}, "image.format"),
        ({"name": "x", "source": "rel/x"}, "image.source"),
        ({"name": "x", "size": 3}, "image"),
        (42, "image"),
    ],
    ids=["dotdot", "dotdot-inside", "absolute", "subdir", "parent", "hidden", "double-dot", "empty-ok",
         "format", "relative-source", "unknown-key", "number"],
)
def test_image_refusals_name_the_field(image, field):
    if field is None:
        assert image_spec(image) is None
        return
    with pytest.raises(InputError) as caught:
        image_spec(image)
    assert caught.value.field == field


def test_networks_none_user_network_bridge():
    assert network_specs(None) == []
    assert network_specs([{"type": "none"}]) == []
    assert network_specs(["user", {"type": "network", "name": "default"}, {"type": "bridge", "name": "br0"}]) == [
        {"type": "user", "name": ""}, {"type": "network", "name": "default"}, {"type": "bridge", "name": "br0"},
    ]


@pytest.mark.parametrize(
    "networks, field",
    [
        ([{"type": "wifi"}], "networks[0].type"),
        ([{"type": "user"}, {"type": "network"}], "networks[1].name"),
        ([{"type": "bridge", "name": "br0'/><x"}], "networks[0].name"),
        ({"type": "user"}, "networks"),
    ],
    ids=["type", "network-without-name", "bridge-breaks-xml", "not-a-list"],
)
def test_network_refusals(networks, field):
    with pytest.raises(InputError) as caught:
        network_specs(networks)
    assert caught.value.field == field


def test_metadata_keeps_xml_special_characters_for_escaping_and_stringifies_numbers():
    assert metadata_spec({"team": 'a"<b>]]>&', "tier": 2}) == {"team": 'a"<b>]]>&', "tier": "2"}


@pytest.mark.parametrize(
    "metadata, field",
    [({"a b": "x"}, "metadata"), ({"k": "\x00"}, "metadata.k"), ({"k": ["x"]}, "metadata.k"),
     ({"k": True}, "metadata.k"), ({"k": "x" * 1025}, "metadata.k"), (["k"], "metadata")],
    ids=["key-space", "nul", "list", "bool", "too-long", "not-a-dict"],
)
def test_metadata_refusals(metadata, field):
    with pytest.raises(InputError) as caught:
        metadata_spec(metadata)
    assert caught.value.field == field


def test_user_data_size_limit():
    assert user_data_spec("#cloud-config\n") == "#cloud-config\n"
    with pytest.raises(InputError) as caught:
        user_data_spec("x" * (64 * 1024 + 1))
    assert caught.value.field == "user_data"


@pytest.mark.parametrize("boot, field", [
    ({"kernel": "vmlinuz"}, "boot.kernel"),
    ({"kernel": "/boot/../etc/k"}, "boot.kernel"),
    ({"initrd": "initrd.img"}, "boot.initrd"),
])
def test_boot_paths_must_be_absolute(boot, field):
    with pytest.raises(InputError) as caught:
        boot_spec(boot)
    assert caught.value.field == field


@pytest.mark.parametrize("label", ["web-1", "a", "x" * 63])
def test_dns_labels_accepted(label):
    assert dns_label("name", label) == label


@pytest.mark.parametrize("label", ["Web-1", "-a", "a-", "x" * 64, 'a"b', "a]]>", ""])
def test_dns_labels_refused(label):
    with pytest.raises(InputError) as caught:
        dns_label("name", label)
    assert caught.value.field == "name"
