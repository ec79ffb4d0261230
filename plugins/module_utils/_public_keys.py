"""SSH public keys for a guest: the launch's ``ssh_authorized_keys`` and its ``key_name``, one of
the operator's ``key_pairs``, checked as OpenSSH public keys before anything is changed. Private to
the collection.

The guest gets them as Nova's metadata service gives a key pair (cloud-init's ``public-keys``), so
a key is a whole ``authorized_keys`` line to it: anything beyond one key (options such as
``command=``, a second line) would be a way to write more than a key, and is refused.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

# The key types OpenSSH accepts today, with the number of length-prefixed strings their blob
# holds after its type (RSA: e, n; Ed25519: the key; ECDSA: the curve, the point; a security
# key's type adds its application). DSA keys are refused: OpenSSH no longer accepts them.
KEY_TYPES = {
    "ssh-ed25519": 1,
    "ssh-rsa": 2,
    "ecdsa-sha2-nistp256": 2,
    "ecdsa-sha2-nistp384": 2,
    "ecdsa-sha2-nistp521": 2,
    "sk-ssh-ed25519@openssh.com": 2,
    "sk-ecdsa-sha2-nistp256@openssh.com": 3,
}
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


def public_key(field: str, text: Any) -> str:
    """One OpenSSH public key, ``<type> <base64> [comment]``, normalised to single spaces; an
    InputError naming ``field`` where it is anything else."""
    if not isinstance(text, str):
        raise InputError(field, f"{field} must be an OpenSSH public key (text), got {type(text).__name__}")
    limits.PUBLIC_KEY.check(text, field)
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise InputError(field, f"{field} must be one line of printable text (one key, no newline or control "
                                f"characters)")
    parts = text.split(None, 2)
    if len(parts) < 2 or parts[0] not in KEY_TYPES:
        raise InputError(field, f"{field} must start with a key type ({', '.join(KEY_TYPES)}) and hold no "
                                f"authorized_keys options, got {text[:40]!r}")
    kind, encoded = parts[0], parts[1]
    try:
        if not _BASE64.match(encoded):
            raise ValueError("not base64")
        blob = base64.b64decode(encoded, validate=True)
    except (ValueError, binascii.Error):
        raise InputError(field, f"{field}: the key after {kind} is not base64") from None
    strings = _blob_strings(blob)
    if strings is None or not strings:
        raise InputError(field, f"{field}: the {kind} key's data is not an SSH public key (it does not split into "
                                f"length-prefixed fields)")
    embedded = strings[0].decode("ascii", "replace")
    if embedded != kind:
        raise InputError(field, f"{field}: the key says it is {kind} but its data is a {embedded!r} key")
    if len(strings) != 1 + KEY_TYPES[kind]:
        raise InputError(field, f"{field}: the {kind} key's data has {len(strings) - 1} field(s) after its type, "
                                f"not {KEY_TYPES[kind]}")
    comment = parts[2].strip() if len(parts) > 2 else ""
    return f"{kind} {encoded} {comment}" if comment else f"{kind} {encoded}"


def _blob_strings(blob: bytes) -> list[bytes] | None:
    """The length-prefixed strings (RFC 4251 ``string``) a key blob is made of, or None where the
    bytes do not split into them exactly."""
    strings: list[bytes] = []
    offset = 0
    while offset < len(blob):
        if offset + 4 > len(blob):
            return None
        size = int.from_bytes(blob[offset:offset + 4], "big")
        offset += 4
        if offset + size > len(blob):
            return None
        strings.append(blob[offset:offset + size])
        offset += size
    return strings


def public_keys_spec(ssh_authorized_keys: Any, key_name: Any, key_pairs: Any) -> list[str]:
    """The keys the guest gets: the key pair ``key_name`` names in ``key_pairs`` (the operator's,
    name -> public key), then ``ssh_authorized_keys``, each checked, without repeats."""
    if ssh_authorized_keys in (None, ""):
        ssh_authorized_keys = []
    if isinstance(ssh_authorized_keys, str):
        ssh_authorized_keys = [ssh_authorized_keys]
    if not isinstance(ssh_authorized_keys, list):
        raise InputError("ssh_authorized_keys", f"ssh_authorized_keys must be a list of OpenSSH public keys, "
                                                f"got {type(ssh_authorized_keys).__name__}")
    limits.PUBLIC_KEYS.check(len(ssh_authorized_keys) + (1 if key_name else 0))
    keys = []
    if key_name not in (None, ""):
        keys.append(key_pair(key_name, key_pairs))
    keys += [public_key(f"ssh_authorized_keys[{index}]", key) for index, key in enumerate(ssh_authorized_keys)]
    return list(dict.fromkeys(keys))


def key_pair(key_name: Any, key_pairs: Any) -> str:
    """The public key of the key pair ``key_name`` among the operator's ``key_pairs``."""
    pairs = key_pairs or {}
    if not isinstance(pairs, Mapping):
        raise InputError("key_pairs", f"key_pairs must be a dict of key pair name to OpenSSH public key (the "
                                      f"inventory's berth_key_pairs), got {type(pairs).__name__}")
    if not isinstance(key_name, str) or key_name not in pairs:
        known = ", ".join(sorted(str(name) for name in pairs)) or "none"
        raise InputError("key_name", f"key_name {key_name!r} is not a key pair of the inventory's berth_key_pairs "
                                     f"(known key pairs: {known})")
    return public_key(f"key_pairs.{key_name}", pairs[key_name])
