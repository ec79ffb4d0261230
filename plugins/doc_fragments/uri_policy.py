# The uri_policy option of everything that opens libvirt URIs: the modules (DOCUMENTATION;
# plugins/plugin_utils/action_base.py fills it from berth_uri_policy or $BERTH_URI_POLICY) and the
# inventory plugins (INVENTORY). module_utils/uri_policy.py is the policy itself.
from __future__ import annotations

_RULES = r"""
      - What the operator allows in libvirt URIs beyond Berth's strict default. Every URI is
        checked before it is opened, whether it comes from an inventory source or from the
        ledger (a ledger row may have been written by another controller, or by anyone with
        write access to the ledger); a refused one is reported with the reason, and its host
        is treated as unreachable.
      - "Allowed without it: C(qemu:///system) and C(qemu:///session) (also C(qemu+unix://)),
        C(qemu+ssh), C(qemu+libssh), C(qemu+libssh2), C(qemu+tls) (and C(qemu://HOST/...), which
        is TLS), C(test:///default); the parameters C(no_tty), C(mode) and C(proxy) with
        libvirt's values, C(no_verify=0) and C(known_hosts_verify=normal)."
      - "Refused unless allowed here: the parameters C(command) (runs a program on the
        controller), C(netcat), C(socket), C(keyfile), C(known_hosts), C(no_verify=1),
        C(known_hosts_verify=auto|ignore), C(pkipath), C(tls_priority), C(sshauth), C(name), and
        any parameter libvirt's remote driver does not document. Always refused: the C(ext)
        transport (it runs C(command=) on the controller), drivers other than C(qemu) and
        C(test), a password in the URI, a user or host starting with C(-), C(;) between
        parameters."
      - The libvirt credentials (username and password) answer a login only on this machine (a
        URI without a host) or on a host the operator's configuration names; never on a host
        named only by the ledger."""

_SUBOPTIONS = r"""
    type: dict
    suboptions:
      allow_parameters:
        description:
          - URI parameters allowed, each a name (any value) or C(name=value) (that value only),
            for example C(socket) for local daemons on their own sockets, or
            C(keyfile=/root/.ssh/berth).
        type: list
        elements: str
      allow_tcp:
        description:
          - Allow C(qemu+tcp). The connection is then kept only if the hypervisor asks for a
            SASL login; one that lets the controller in without it is refused.
        type: bool
      allow_test_files:
        description:
          - Allow the test driver's node files (C(test:///PATH)), which libvirt reads on the
            controller (and quotes in its errors). Labs only.
        type: bool
      credential_hosts:
        description:
          - Hosts the libvirt credentials (C($BERTH_LIBVIRT_USERNAME),
            C($BERTH_LIBVIRT_PASSWORD)) may be sent to when they ask for a login, besides this
            machine.
        type: list
        elements: str
"""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  uri_policy:
    description:""" + _RULES + r"""
      - The SSH key file and known_hosts file set in C($BERTH_SSH_KEYFILE) and
        C($BERTH_SSH_KNOWN_HOSTS) are allowed as given.
      - Default C(berth_uri_policy) (a berth.fleet.hypervisors inventory source sets it for its
        run, from its own O(uri_policy), SSH settings and hypervisors), else C($BERTH_URI_POLICY)
        (JSON), else the strict default.""" + _SUBOPTIONS

    INVENTORY = r"""
options:
  uri_policy:
    description:""" + _RULES + r"""
      - berth.fleet.hypervisors allows its own SSH settings (O(ssh_keyfile), O(known_hosts),
        O(verify_host_keys)) as given, and lets the hosts of its hypervisors' URIs receive the
        credentials. berth.fleet.instances opens only the ledger's URIs, and allows the key file
        and known_hosts file of C($BERTH_SSH_KEYFILE) and C($BERTH_SSH_KNOWN_HOSTS) as given.""" + _SUBOPTIONS
