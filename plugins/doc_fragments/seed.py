# The documentation of the SSH keys a guest is given on its NoCloud seed, for berth.fleet.instance,
# berth.fleet.instance_request and berth.fleet.server, which check them through
# plugins/module_utils/_public_keys.py.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  ssh_authorized_keys:
    description:
      - OpenSSH public keys (C(ssh-ed25519 AAAA... comment)) the guest's cloud-init installs for its default user,
        given on the instance's NoCloud seed as the meta-data's C(public-keys), where cloud-init reads a key pair
        from Nova's metadata.
      - Each must be one key of a type OpenSSH accepts (V(ssh-ed25519), V(ssh-rsa), V(ecdsa-sha2-nistp256),
        V(ecdsa-sha2-nistp384), V(ecdsa-sha2-nistp521), V(sk-ssh-ed25519@openssh.com),
        V(sk-ecdsa-sha2-nistp256@openssh.com)) whose base64 data decodes to a key of that same type; a line with
        C(authorized_keys) options (C(command=...)), a second line or control characters is refused, naming the
        key (C(ssh_authorized_keys[1])).
    type: list
    elements: str
    default: []
  key_name:
    description:
      - The name of a key pair of O(key_pairs) whose public key the guest gets too, as Nova's C(key_name) does.
      - A name that O(key_pairs) does not have is refused, with the names it has.
    type: str
  key_pairs:
    description:
      - The key pairs O(key_name) may name, a dict of name to OpenSSH public key. The operator's, set once in the
        inventory as C(berth_key_pairs) (C(playbooks/launch.yml) and the role C(berth.fleet.instance) take it from
        there); the key O(key_name) names is checked as O(ssh_authorized_keys) are.
    type: dict
    default: {}
"""
