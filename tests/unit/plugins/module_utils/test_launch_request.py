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
                                          "url": None, "checksum": None, "properties": {}}
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
    assert spec == {"name": "d.img", "format": "raw", "source": "/srv/d.img", "url": None, "checksum": None,
                    "properties": {}}


SHA256 = "sha256:" + "ab" * 32


def test_image_by_url_keeps_url_and_normalised_checksum():
    spec = image_spec({"name": "debian-12.qcow2", "url": "https://images.example/debian-12.qcow2",
                       "checksum": "SHA256:" + "AB" * 32})
    assert (spec["url"], spec["checksum"], spec["source"]) == ("https://images.example/debian-12.qcow2", SHA256, None)
    for algorithm, digits in (("sha384", 96), ("sha512", 128)):
        assert image_spec({"name": "x", "url": "http://127.0.0.1:8080/x", "checksum": f"{algorithm}:{'0' * digits}"})


@pytest.mark.parametrize("image, field", [
    ({"name": "x", "url": "ftp://host/x"}, "image.url"),
    ({"name": "x", "url": "file:///etc/shadow", "checksum": SHA256}, "image.url"),
    ({"name": "x", "url": "https:///x", "checksum": SHA256}, "image.url"),
    ({"name": "x", "url": "https://user:secret@host/x", "checksum": SHA256}, "image.url"),
    ({"name": "x", "url": "https://host/a b", "checksum": SHA256}, "image.url"),
    ({"name": "x", "url": "https://host/x"}, "image.checksum"),
    ({"name": "x", "url": "https://host/x", "checksum": "md5:" + "0" * 32}, "image.checksum"),
    ({"name": "x", "url": "https://host/x", "checksum": "sha256:" + "0" * 63}, "image.checksum"),
    ({"name": "x", "url": "https://host/x", "checksum": "sha256:" + "g" * 64}, "image.checksum"),
    ({"name": "x", "url": "https://host/x", "checksum": 5}, "image.checksum"),
    ({"name": "x", "source": "/srv/x", "url": "https://host/x", "checksum": SHA256}, "image.url"),
    ({"name": "x", "source": "/srv/x", "checksum": SHA256}, "image.checksum"),
    ({"name": "../x", "url": "https://host/x", "checksum": SHA256}, "image.name"),
], ids=["ftp", "file", "no-host", "credentials", "space", "no-checksum", "md5", "short", "not-hex", "number",
        "url-and-source", "checksum-without-url", "name-leaves-pool"])
def test_image_url_refusals_name_the_field(image, field):
    with pytest.raises(InputError) as caught:
        image_spec(image)
    assert caught.value.field == field


@pytest.mark.parametrize("url", ["https://user:hunter2@host/x", "https://user:hunter2@host/a b",
                                 "ftp://user:hunter2@host/x"], ids=["https", "with-space", "ftp"])
def test_a_password_in_the_url_is_not_repeated_in_the_error(url):
    with pytest.raises(InputError) as caught:
        image_spec({"name": "x", "url": url, "checksum": SHA256})
    assert caught.value.field == "image.url" and "hunter2" not in str(caught.value)


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
