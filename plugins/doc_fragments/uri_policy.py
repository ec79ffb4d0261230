# The uri_policy option of everything that opens libvirt URIs: the modules (action_base.py fills
# it from berth_uri_policy or $BERTH_URI_POLICY) and the inventory plugins. The policy itself is
# module_utils/uri_policy.py.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  uri_policy:
    description:
      - What the operator allows in libvirt URIs beyond Berth's strict default. Every URI is
        checked before it is opened, whether it comes from an inventory source or from the
        ledger (a ledger row may have been written by another controller, or by anyone with
        write access to the ledger); a refused one is reported with the reason, and its host
        is treated as unreachable.
      - A launch checks the URIs of the hosts it would build on before it claims anything. A
        chosen host whose URI is refused fails the launch with the reason; a refused alternate
        is not retried on. A refusal of this policy (or a login it withholds the credentials
        from) is the controller's, never counted as the host's failed build.
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
        named only by the ledger.
      - The SSH key file and known_hosts file of C($BERTH_SSH_KEYFILE) and
        C($BERTH_SSH_KNOWN_HOSTS) (the C(ssh_keyfile) and C(known_hosts) options of the
        berth.fleet.hypervisors source), and that source's C(verify_host_keys=false), are
        allowed as given.
      - In the berth.fleet.hypervisors inventory source, the hosts of its hypervisors' URIs may
        receive the credentials too, and the source hands its policy to the tasks of its run as
        the variable C(berth_uri_policy). berth.fleet.instances opens the ledger's URIs only.
      - In a module, the default is C(berth_uri_policy), else C($BERTH_URI_POLICY) (JSON), else
        the strict default.
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
