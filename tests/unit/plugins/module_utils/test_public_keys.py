"""SSH public keys for the guest's seed: each bad key refused naming its field, key_name resolved
from the operator's key_pairs."""

from __future__ import annotations

import base64

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._public_keys import public_key, public_keys_spec
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMHAHKTOP2ZweYwdkDpx84WRcq9TQF+EoJE7iTdXnww7 alice@example"
RSA = ("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDIiXlWXsXY1ikygUoSvcXtLqGmQqpvNWH06394m9lawNnjtvbLqnKl9D6vvugWk5Uy"
       "fftfWSaxsCqO8EF4rRvJe/o2s3QKzvJ1VFhdrKRT/lLIFIT739XyIllTwXIVh4ZHAkONgZnqkwjEvCImI9O0Zf8B27NUWT362WzzBQXrTw=="
       " bob")
ECDSA = ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBBo11hXraCWlnFi1q1CApq7W1yioD5znLY9g"
         "iI1xNA6yaRcNQ4AAXtpAiUgWONlYPgT4WBM2l3SNMbEBnEVTKwM=")
ED25519_BLOB = base64.b64decode(ED25519.split()[1])


def _string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _key(kind: str, blob: bytes) -> str:
    return f"{kind} {base64.b64encode(blob).decode()}"


@pytest.mark.parametrize("key", [ED25519, RSA, ECDSA], ids=["ed25519", "rsa", "ecdsa"])
def test_keys_of_each_type_pass_as_written(key):
    assert public_key("ssh_authorized_keys[0]", key) == key


def test_spaces_are_normalised_and_the_comment_kept():
    assert public_key("k", "  ssh-ed25519   " + ED25519.split()[1] + "  my  laptop ") == \
        f"ssh-ed25519 {ED25519.split()[1]} my  laptop"


BAD_KEYS = [
    pytest.param(42, "must be an OpenSSH public key", id="not-text"),
    pytest.param("", "must start with a key type", id="empty"),
    pytest.param("ssh-ed25519", "must start with a key type", id="type-only"),
    pytest.param("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "must start with a key type", id="dsa"),
    pytest.param(f'command="rm -rf /" {ED25519}', "hold no authorized_keys options", id="options"),
    pytest.param(f"{ED25519}\n{RSA}", "one line", id="two-lines"),
    pytest.param(f"{ED25519}\r", "one line", id="carriage-return"),
    pytest.param("ssh-ed25519 AAAA!!!!", "is not base64", id="not-base64"),
    pytest.param("ssh-ed25519 AAAAC3Nza", "is not base64", id="bad-padding"),
    pytest.param(f"ssh-rsa {ED25519.split()[1]}", "says it is ssh-rsa but its data is a 'ssh-ed25519' key",
                 id="type-mismatch"),
    pytest.param(_key("ssh-ed25519", ED25519_BLOB[:-5]), "does not split into length-prefixed fields",
                 id="truncated"),
    pytest.param(_key("ssh-ed25519", ED25519_BLOB + _string(b"more")), "has 2 field(s) after its type, not 1",
                 id="extra-field"),
    pytest.param(_key("ssh-ed25519", b""), "must start with a key type", id="empty-blob"),
    pytest.param("ssh-ed25519 " + "A" * 9000, "over the limit of 8192 characters", id="too-long"),
]


@pytest.mark.parametrize("key, message", BAD_KEYS)
def test_each_bad_key_is_refused_naming_its_index(key, message):
    with pytest.raises(InputError) as caught:
        public_keys_spec([ED25519, key], None, {})
    assert caught.value.field == "ssh_authorized_keys[1]"
    assert message in str(caught.value)


def test_key_name_comes_first_and_repeats_are_dropped():
    keys = public_keys_spec([RSA, ED25519, RSA], "laptop", {"laptop": ED25519, "other": ECDSA})
    assert keys == [ED25519, RSA]


def test_one_key_as_a_string_is_a_list_of_one_and_nothing_is_no_key():
    assert public_keys_spec(ED25519, None, None) == [ED25519]
    assert public_keys_spec(None, "", {}) == []


def test_an_unknown_key_name_is_refused_with_the_known_names():
    with pytest.raises(InputError) as caught:
        public_keys_spec([], "desktop", {"laptop": ED25519, "ci": RSA})
    assert caught.value.field == "key_name"
    assert "key_name 'desktop' is not a key pair of the inventory's berth_key_pairs (known key pairs: ci, laptop)" \
        in str(caught.value)


def test_a_key_name_without_key_pairs_says_there_are_none():
    with pytest.raises(InputError, match=r"known key pairs: none"):
        public_keys_spec([], "laptop", None)


def test_the_operator_s_bad_key_pair_is_refused_naming_it():
    with pytest.raises(InputError) as caught:
        public_keys_spec([], "laptop", {"laptop": f"ssh-rsa {ED25519.split()[1]}"})
    assert caught.value.field == "key_pairs.laptop"


@pytest.mark.parametrize("keys, key_pairs, field", [
    ({"a": ED25519}, {}, "ssh_authorized_keys"),
    ([], [ED25519], "key_pairs"),
], ids=["keys-dict", "pairs-list"])
def test_wrong_shapes_name_the_option(keys, key_pairs, field):
    with pytest.raises(InputError) as caught:
        public_keys_spec(keys, "laptop", key_pairs)
    assert caught.value.field == field
