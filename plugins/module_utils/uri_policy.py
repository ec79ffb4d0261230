"""The one policy every libvirt URI passes before Berth opens it (``UriPolicy.refusal``).

A URI may come from the operator's own configuration (an inventory source, playbook variables)
or from the ledger, which another controller or an attacker with write access may have
written. libvirt's URIs can do far more than name a host: the ``ext`` transport and the
``command`` parameter run a program on the controller, ``no_verify`` and ``known_hosts_verify``
accept any host key or certificate, ``pkipath`` picks the CA a TLS connection trusts. So a URI
is checked, wherever it comes from, against the transports and parameters listed below, and
only the operator's configuration can allow more. libvirt_host.Hypervisor applies it to every
connection it opens, with the policy its caller got from the operator (the strict default
otherwise); the inventory source and the tracker sync apply it again before a URI is shown or
recorded.

Allowed transports: local ``qemu:///system`` and ``qemu:///session`` (also as ``qemu+unix``),
``qemu+ssh``, ``qemu+libssh``, ``qemu+libssh2``, ``qemu+tls`` (and ``qemu://host/...``, which is
TLS), ``qemu+tcp`` only where the operator sets ``allow_tcp`` (and then only with a SASL login:
see libvirt_host), ``test:///default`` (also as ``test+unix``), and the test driver's node files (``test:///PATH``)
only where the operator sets ``allow_test_files``: libvirt reads the file on the controller and
may quote its first line in an error.

Python 3.9: the hypervisor_facts module ships this file to hypervisors.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple
from urllib.parse import unquote, urlsplit

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

DRIVERS = ("qemu", "test")
LOCAL_TRANSPORTS = ("", "unix")
SSH_TRANSPORTS = ("ssh", "libssh", "libssh2")
REMOTE_TRANSPORTS = SSH_TRANSPORTS + ("tls", "tcp")
QEMU_PATHS = ("/system", "/session")
TEST_DEFAULT_PATH = "/default"

# Parameters any URI may carry, with the values that change nothing about what is trusted.
SAFE_PARAMETERS: Dict[str, FrozenSet[str]] = {
    "no_tty": frozenset({"0", "1"}),
    "mode": frozenset({"auto", "direct", "legacy"}),
    "proxy": frozenset({"auto", "netcat", "native"}),
    "no_verify": frozenset({"0"}),
    "known_hosts_verify": frozenset({"normal"}),
}
# Why each parameter libvirt's remote driver knows is refused unless the operator allows it
# (libvirt's "Connection URIs" page lists them per transport).
PARAMETER_RISKS: Dict[str, str] = {
    "command": "names a program the controller runs (the ssh binary, or the ext transport's tunnel)",
    "netcat": "names the program run at the far end of the SSH tunnel",
    "socket": "picks the unix socket the connection goes to",
    "keyfile": "picks the private key the controller logs in with",
    "known_hosts": "picks the file host keys are checked against",
    "no_verify": "turns off the check of the host key (ssh) or of the server's certificate (tls)",
    "known_hosts_verify": "accepts host keys without checking them",
    "pkipath": "picks the certificates, the CA among them, that a TLS connection trusts",
    "tls_priority": "can weaken the TLS versions and ciphers",
    "sshauth": "picks the SSH login methods (a password prompt is answered with the libvirt credentials)",
    "name": "makes the daemon open another connection than the URI names",
    "mode": "takes auto, direct or legacy only",
    "proxy": "takes auto, netcat or native only",
    "no_tty": "takes 0 or 1 only",
}
UNKNOWN_PARAMETER_RISK = "is not a parameter Berth knows: libvirt hands unknown parameters on to the driver"
# Where the operator's policy is found by the tasks that open the ledger's URIs (action_base.py):
# the variable (which a berth.fleet.hypervisors source sets for its run), else the environment.
POLICY_VARIABLE = "berth_uri_policy"
POLICY_ENV = "BERTH_URI_POLICY"
POLICY_KEYS = ("allow_parameters", "allow_tcp", "allow_test_files", "credential_hosts")

_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")
_HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$")
_PARAMETER_NAME = re.compile(r"^[a-z_]+$")


class _Refused(ValueError):
    """Why a URI may not be opened; the message never repeats the URI (it may hold a secret)."""


@dataclass(frozen=True)
class UriPolicy:
    """What the operator allows beyond the strict default.

    ``allow_parameters``: (name, value) pairs, value None for any value. ``credential_hosts``:
    the hosts (lower case) the libvirt credentials may be sent to, besides this machine.
    """

    allow_parameters: FrozenSet[Tuple[str, Optional[str]]] = frozenset()
    allow_tcp: bool = False
    allow_test_files: bool = False
    credential_hosts: FrozenSet[str] = frozenset()

    # ---- from and to the operator's settings -------------------------------------------------

    @classmethod
    def from_settings(cls, settings: Any, field_name: str = "uri_policy", ssh_keyfile: Optional[str] = None,
                      known_hosts: Optional[str] = None, verify_host_keys: bool = True,
                      named_uris: Iterable[str] = ()) -> UriPolicy:
        """The policy of an operator's ``uri_policy`` setting ({allow_parameters, allow_tcp,
        allow_test_files, credential_hosts}; None for the default), checked (InputError names the
        field). The SSH settings the operator gave otherwise (a key file, a known_hosts file,
        host keys unchecked) are allowed as given; the hosts of ``named_uris`` (an inventory
        source's) may receive the credentials."""
        settings = {} if settings is None else settings
        if not isinstance(settings, Mapping):
            raise InputError(field_name, f"{field_name} must be a mapping with any of {', '.join(POLICY_KEYS)}")
        unknown = sorted(set(settings) - set(POLICY_KEYS))
        if unknown:
            raise InputError(f"{field_name}.{unknown[0]}",
                             f"{field_name}: unknown key {unknown[0]!r} (allowed: {', '.join(POLICY_KEYS)})")
        allowed = set(_parameter_entries(f"{field_name}.allow_parameters", settings.get("allow_parameters")))
        if ssh_keyfile:
            allowed.add(("keyfile", str(ssh_keyfile)))
        if known_hosts:
            allowed.add(("known_hosts", str(known_hosts)))
        if not verify_host_keys:
            allowed.update({("no_verify", "1"), ("known_hosts_verify", "ignore")})
        hosts = {host.lower() for host in _strings(f"{field_name}.credential_hosts", settings.get("credential_hosts"))}
        hosts.update(host for host in (_hostname(uri) for uri in named_uris) if host)
        return cls(allow_parameters=frozenset(allowed),
                   allow_tcp=_flag(f"{field_name}.allow_tcp", settings.get("allow_tcp")),
                   allow_test_files=_flag(f"{field_name}.allow_test_files", settings.get("allow_test_files")),
                   credential_hosts=frozenset(hosts))

    def to_settings(self) -> Dict[str, Any]:
        """The setting that gives this policy back (the inventory hands it on as a variable)."""
        return {
            "allow_parameters": sorted(name if value is None else f"{name}={value}"
                                       for name, value in self.allow_parameters),
            "allow_tcp": self.allow_tcp, "allow_test_files": self.allow_test_files,
            "credential_hosts": sorted(self.credential_hosts),
        }

    def merged(self, other: UriPolicy) -> UriPolicy:
        """What either of two operator policies allows (two inventory sources of one run)."""
        return UriPolicy(allow_parameters=self.allow_parameters | other.allow_parameters,
                         allow_tcp=self.allow_tcp or other.allow_tcp,
                         allow_test_files=self.allow_test_files or other.allow_test_files,
                         credential_hosts=self.credential_hosts | other.credential_hosts)

    # ---- the check ---------------------------------------------------------------------------

    def refusal(self, uri: Any) -> Optional[str]:
        """Why this policy refuses to open ``uri``, or None if it may be opened: the one check of
        every URI Berth opens, shows or records (see the module's docstring). The reason never
        repeats the URI, which may hold a secret."""
        try:
            self._check(uri)
        except _Refused as exc:
            return str(exc)
        return None

    def _check(self, uri: Any) -> None:
        if not isinstance(uri, str) or "://" not in uri:
            raise _Refused("not a libvirt URI (driver[+transport]://[user@][host][:port]/path[?parameters])")
        if any(ord(char) < 0x21 or ord(char) == 0x7F for char in uri):
            raise _Refused("the URI holds spaces or control characters")
        try:
            parts = urlsplit(uri)
            port = parts.port
        except ValueError as exc:
            raise _Refused(f"the URI does not parse: {exc}") from None
        driver, _plus, kind = parts.scheme.lower().partition("+")
        if driver not in DRIVERS:
            raise _Refused(f"driver {driver!r}: Berth manages QEMU/KVM hypervisors (qemu://) and the test driver "
                           f"(test:///) only")
        if kind == "ext":
            raise _Refused("the ext transport runs the program named by its command= parameter on the controller")
        if kind not in LOCAL_TRANSPORTS + REMOTE_TRANSPORTS:
            raise _Refused(f"transport {kind!r} is not one Berth opens (allowed: qemu:///system, qemu:///session, "
                           f"qemu+unix, qemu+ssh, qemu+libssh, qemu+libssh2, qemu+tls, qemu+tcp where allowed)")
        if parts.fragment or "#" in uri:
            raise _Refused("the URI has a fragment (#...), which libvirt does not take")
        self._check_netloc(parts.netloc, parts.password, port)
        host = (parts.hostname or "").lower()
        if kind == "tcp" and not self.allow_tcp:
            raise _Refused("qemu+tcp sends everything unencrypted, the login included; the operator's uri_policy "
                           "allows it with allow_tcp (and a SASL login is then required)")
        if driver == "test":
            self._check_test(kind, host, parts.path)
        elif parts.path not in QEMU_PATHS:
            raise _Refused("a qemu URI's path is /system or /session")
        if kind == "unix" and host:
            raise _Refused("qemu+unix connects to this machine: it takes no host")
        self._check_parameters(parts.query)

    def _check_netloc(self, netloc: str, password: Optional[str], port: Optional[int]) -> None:
        if "%" in netloc:
            raise _Refused("the host part is percent-encoded")
        if password is not None:
            raise _Refused("the URI holds a password (credentials come from the username and password settings)")
        user, _at, hostport = netloc.rpartition("@")
        if user and not _USER.match(user):
            # ssh would read a user or host starting with "-" as one of its options.
            raise _Refused("the user name must be letters, digits, '.', '_' or '-', not starting with '-'")
        host = hostport
        if port is not None:
            host = hostport.rsplit(":", 1)[0]
        if host and not _valid_host(host):
            raise _Refused("the host must be a DNS name or an IP address ([...] for IPv6), not starting with '-'")

    def _check_test(self, kind: str, host: str, path: str) -> None:
        if kind not in LOCAL_TRANSPORTS or host:
            raise _Refused("the test driver is local only (test:///... or test+unix:///...)")
        if path != TEST_DEFAULT_PATH and not self.allow_test_files:
            raise _Refused("test:/// with a node file makes libvirt read that file on the controller (and quote it "
                           "in errors); the operator's uri_policy allows it with allow_test_files")

    def _check_parameters(self, query: str) -> None:
        if ";" in query:
            # libvirt splits parameters at ';' too (where a query has no '&'), Python's parser does not.
            raise _Refused("the parameters are separated by ';': write them with '&'")
        for name, value in parameters(query):
            if value in SAFE_PARAMETERS.get(name, ()) or (name, None) in self.allow_parameters \
                    or (name, value) in self.allow_parameters:
                continue
            risk = PARAMETER_RISKS.get(name, UNKNOWN_PARAMETER_RISK)
            raise _Refused(f"parameter {name}= {risk}; only the operator's uri_policy.allow_parameters can allow "
                           f"it")

    # ---- credentials -------------------------------------------------------------------------

    def may_send_credentials(self, uri: str) -> bool:
        """Whether the libvirt credentials (username, password) may answer a login on ``uri``:
        on this machine (a URI without a host), or on a host the operator's configuration names."""
        host = _hostname(uri)
        return not host or host in self.credential_hosts


DEFAULT_POLICY = UriPolicy()


def parameters(query: str) -> List[Tuple[str, str]]:
    """A URI's parameters as libvirt reads them: split at '&', each name and value
    percent-decoded ('+' stays a '+')."""
    found = []
    for part in query.split("&"):
        if not part:
            continue
        name, _eq, value = part.partition("=")
        found.append((unquote(name), unquote(value)))
    return found


def _hostname(uri: str) -> str:
    try:
        return (urlsplit(uri).hostname or "").lower()
    except ValueError:
        return ""


def _valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    try:
        ipaddress.IPv4Address(host)
        return True
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    return len(host) <= 253 and all(_HOST_LABEL.match(label) for label in labels)


def _parameter_entries(field_name: str, value: Any) -> List[Tuple[str, Optional[str]]]:
    entries = []
    for text in _strings(field_name, value):
        name, eq, wanted = text.partition("=")
        if not _PARAMETER_NAME.match(name):
            raise InputError(field_name, f"{field_name}: {text!r} is not a parameter name (as socket) or name=value "
                                         f"(as keyfile=/root/.ssh/berth)")
        entries.append((name, wanted if eq else None))
    return entries


def _strings(field_name: str, value: Any) -> List[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) and item for item in value):
        raise InputError(field_name, f"{field_name} must be a list of non-empty strings")
    return list(value)


def _flag(field_name: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InputError(field_name, f"{field_name} must be true or false, got {value!r}")
    return value
