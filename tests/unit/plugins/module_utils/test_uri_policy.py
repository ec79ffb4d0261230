"""The one URI policy (module_utils/uri_policy.py): each refused transport and parameter with its
reason, what the operator's configuration can allow, where the credentials may go, and that
libvirt_host.Hypervisor applies it before libvirt is asked anything."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.berth.fleet.plugins.module_utils import libvirt_host
from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import DEFAULT_POLICY, UriPolicy

ALLOWED = [
    ("qemu:///system", "local-system"),
    ("qemu:///session", "local-session"),
    ("qemu+unix:///system", "unix"),
    ("qemu+ssh://root@kvm01.example.com/system", "ssh"),
    ("qemu+ssh://kvm01.example.com:2222/system?no_tty=1", "ssh-port-no-tty"),
    ("qemu+libssh://kvm01/system?known_hosts_verify=normal", "libssh"),
    ("qemu+libssh2://kvm01/system", "libssh2"),
    ("qemu+tls://kvm01.example.com/system", "tls"),
    ("qemu://kvm01.example.com/system", "tls-by-default"),
    ("qemu+ssh://10.0.0.5/system?proxy=netcat&mode=direct", "proxy-and-mode"),
    ("qemu+tls://[2001:db8::5]/system?no_verify=0", "ipv6"),
    ("QEMU+SSH://kvm01/system", "scheme-case"),
    ("test:///default", "test-default"),
]

REFUSED = [
    ("qemu+ext:///system?command=/tmp/evil", "ext transport runs the program", "ext"),
    ("qemu+ext://kvm01/system", "ext transport runs the program", "ext-without-command"),
    ("qemu+ssh://kvm01/system?command=/tmp/evil", "command= names a program the controller runs", "ssh-command"),
    ("qemu+ssh://kvm01/system?netcat=/tmp/evil", "netcat= names the program", "netcat"),
    ("qemu+unix:///system?socket=/tmp/other-sock", "socket= picks the unix socket", "socket"),
    ("qemu+ssh://kvm01/system?keyfile=/root/.ssh/id_rsa", "keyfile= picks the private key", "keyfile"),
    ("qemu+libssh://kvm01/system?known_hosts=/tmp/any", "known_hosts= picks the file", "known-hosts"),
    ("qemu+ssh://kvm01/system?no_verify=1", "no_verify= turns off the check", "ssh-no-verify"),
    ("qemu+tls://kvm01/system?no_verify=1", "no_verify= turns off the check", "tls-no-verify"),
    ("qemu+libssh://kvm01/system?known_hosts_verify=ignore", "known_hosts_verify= accepts host keys", "kh-ignore"),
    ("qemu+libssh://kvm01/system?known_hosts_verify=auto", "known_hosts_verify= accepts host keys", "kh-auto"),
    ("qemu+tls://kvm01/system?pkipath=/tmp/ca", "pkipath= picks the certificates", "pkipath"),
    ("qemu+tls://kvm01/system?tls_priority=NORMAL:%2BVERS-SSL3.0", "tls_priority= can weaken", "tls-priority"),
    ("qemu+libssh://kvm01/system?sshauth=password", "sshauth= picks the SSH login methods", "sshauth"),
    ("qemu+ssh://kvm01/system?name=qemu:///embed", "name= makes the daemon open another", "name"),
    ("qemu+ssh://kvm01/system?mode=evil", "mode= takes auto, direct or legacy only", "mode-value"),
    ("qemu+ssh://kvm01/system?colour=blue", "colour= is not a parameter Berth knows", "unknown"),
    ("qemu+ssh://kvm01/system?com%6Dand=/tmp/evil", "command= names a program", "percent-encoded-name"),
    ("qemu+ssh://kvm01/system?no_tty=1;command=/tmp/evil", "separated by ';'", "semicolon"),
    ("qemu+tcp://kvm01/system", "qemu+tcp sends everything unencrypted", "tcp"),
    ("qemu+tcp://kvm01:16509/system", "qemu+tcp sends everything unencrypted", "tcp-port"),
    ("xen+ssh://kvm01/system", "Berth manages QEMU/KVM hypervisors", "xen"),
    ("esx://vcenter/?no_verify=1", "Berth manages QEMU/KVM hypervisors", "esx"),
    ("qemu+fd:///system", "transport 'fd' is not one Berth opens", "other-transport"),
    ("qemu:///embed?root=/tmp/x", "path is /system or /session", "embed"),
    ("test:///etc/shadow", "test:/// with a node file", "test-file"),
    ("test+ssh://kvm01/default", "the test driver is local only", "test-remote"),
    ("qemu+ssh://root:hunter2@kvm01/system", "holds a password", "password"),
    ("qemu+ssh://-oProxyCommand=evil/system", "the host must be a DNS name", "dash-host"),
    ("qemu+ssh://-oProxyCommand=evil@kvm01/system", "the user name must be", "dash-user"),
    ("qemu+ssh://kvm%30/system", "percent-encoded", "encoded-host"),
    ("qemu+unix://kvm01/system", "qemu+unix connects to this machine", "unix-with-host"),
    ("qemu+ssh://kvm01/system#x", "fragment", "fragment"),
    ("qemu+ssh://kvm01/system?x=a b", "spaces or control characters", "space"),
    ("qemu+ssh://kvm01:port/system", "does not parse", "bad-port"),
    ("kvm01", "not a libvirt URI", "not-a-uri"),
    (None, "not a libvirt URI", "none"),
]


@pytest.mark.parametrize("uri", [uri for uri, _id in ALLOWED], ids=[name for _uri, name in ALLOWED])
def test_the_default_policy_opens_the_documented_transports(uri):
    assert DEFAULT_POLICY.refusal(uri) is None


@pytest.mark.parametrize("uri, why", [(uri, why) for uri, why, _id in REFUSED],
                         ids=[name for _uri, _why, name in REFUSED])
def test_each_refused_transport_and_parameter_says_why_without_repeating_the_uri(uri, why):
    refusal = DEFAULT_POLICY.refusal(uri)
    assert refusal is not None and why in refusal, refusal
    # The reason never repeats the URI: a ledger row's URI may hold a secret.
    for part in ("/tmp/evil", "hunter2", "/etc/shadow", "/root/.ssh"):
        assert part not in refusal


@pytest.mark.parametrize("settings, uri", [
    ({"allow_parameters": ["socket"]}, "qemu+unix:///system?socket=/run/lab/hv1/libvirt-sock"),
    ({"allow_parameters": ["keyfile=/root/.ssh/berth"]}, "qemu+ssh://kvm01/system?keyfile=/root/.ssh/berth"),
    ({"allow_parameters": ["no_verify=1"]}, "qemu+tls://kvm01/system?no_verify=1"),
    ({"allow_tcp": True}, "qemu+tcp://kvm01/system"),
    ({"allow_test_files": True}, "test:///srv/lab/hv1.xml"),
], ids=["socket", "keyfile-value", "no-verify", "tcp", "test-files"])
def test_the_operators_configuration_allows_what_it_names(settings, uri):
    assert DEFAULT_POLICY.refusal(uri) is not None
    assert UriPolicy.from_settings(settings).refusal(uri) is None


def test_an_allowance_of_one_value_allows_that_value_only():
    policy = UriPolicy.from_settings({"allow_parameters": ["keyfile=/root/.ssh/berth"]})
    assert "keyfile= picks" in policy.refusal("qemu+ssh://kvm01/system?keyfile=/root/.ssh/other")


def test_nothing_the_operator_allows_lets_the_ext_transport_through():
    policy = UriPolicy.from_settings({"allow_parameters": ["command"], "allow_tcp": True, "allow_test_files": True})
    assert "ext transport" in policy.refusal("qemu+ext:///system?command=/tmp/evil")


def test_the_ssh_settings_the_operator_gave_are_allowed_as_given():
    policy = UriPolicy.from_settings(None, ssh_keyfile="/root/.ssh/berth", known_hosts="/etc/berth/known_hosts",
                                     verify_host_keys=False)
    assert policy.refusal("qemu+ssh://kvm01/system?keyfile=/root/.ssh/berth&no_verify=1&no_tty=1") is None
    assert policy.refusal("qemu+libssh://kvm01/system?known_hosts=/etc/berth/known_hosts"
                          "&known_hosts_verify=ignore") is None
    assert policy.refusal("qemu+ssh://kvm01/system?keyfile=/tmp/stolen") is not None


def test_the_credentials_go_to_this_machine_and_the_hosts_the_operator_names_only():
    policy = UriPolicy.from_settings({"credential_hosts": ["KVM02.example.com"]},
                                     named_uris=["qemu+ssh://root@kvm01.example.com/system"])
    assert policy.may_send_credentials("qemu:///system")
    assert policy.may_send_credentials("qemu+unix:///system?socket=/run/lab/sock")
    assert policy.may_send_credentials("qemu+ssh://kvm01.example.com/system")
    assert policy.may_send_credentials("qemu+tls://kvm02.example.com/system")
    assert not policy.may_send_credentials("qemu+tcp://attacker.example.net/system")
    assert not DEFAULT_POLICY.may_send_credentials("qemu+tls://kvm01.example.com/system")


def test_a_policy_goes_through_its_settings_unchanged_and_two_merge_into_what_either_allows():
    policy = UriPolicy.from_settings({"allow_parameters": ["socket", "keyfile=/k"], "allow_tcp": True,
                                      "credential_hosts": ["kvm01"]})
    assert UriPolicy.from_settings(policy.to_settings()) == policy
    other = UriPolicy.from_settings({"allow_test_files": True, "credential_hosts": ["kvm02"]})
    merged = policy.merged(other)
    assert merged.allow_tcp and merged.allow_test_files and merged.credential_hosts == {"kvm01", "kvm02"}


@pytest.mark.parametrize("settings, field", [
    ("socket", "uri_policy"),
    ({"allow_parameter": ["socket"]}, "uri_policy.allow_parameter"),
    ({"allow_parameters": "socket"}, "uri_policy.allow_parameters"),
    ({"allow_parameters": ["-o ProxyCommand"]}, "uri_policy.allow_parameters"),
    ({"allow_tcp": "yes"}, "uri_policy.allow_tcp"),
    ({"credential_hosts": [""]}, "uri_policy.credential_hosts"),
], ids=["not-a-mapping", "unknown-key", "not-a-list", "not-a-name", "not-a-bool", "empty-host"])
def test_a_bad_setting_names_the_field(settings, field):
    with pytest.raises(InputError) as caught:
        UriPolicy.from_settings(settings)
    assert caught.value.field == field


# ---- libvirt_host.Hypervisor applies it -----------------------------------------------------------

@pytest.mark.skipif(libvirt_host.libvirt is None, reason="libvirt-python is not installed")
def test_a_refused_uri_is_never_handed_to_libvirt_and_its_program_never_runs(tmp_path):
    marker = tmp_path / "ran"
    program = tmp_path / "tunnel.sh"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    for uri in (f"qemu+ext:///system?command={program}", f"qemu+ssh://kvm01/system?command={program}"):
        with pytest.raises(HypervisorError, match="refused by Berth's URI policy") as caught:
            with libvirt_host.Hypervisor("hv9", uri, timeout_s=5):
                pass
        assert str(program) not in str(caught.value)
    assert not os.path.exists(marker)


@pytest.mark.skipif(libvirt_host.libvirt is None, reason="libvirt-python is not installed")
def test_the_credentials_answer_no_login_on_a_host_named_only_by_the_ledger():
    libvirt = libvirt_host.libvirt
    asked = [[libvirt.VIR_CRED_AUTHNAME, "user", "", None, None],
             [libvirt.VIR_CRED_PASSPHRASE, "password", "", None, None]]
    stranger = libvirt_host.Hypervisor("hv9", "qemu+tls://attacker.example.net/system", username="ops",
                                       password="s3cret")
    _kinds, answer, _data = stranger._auth()
    assert answer(asked, None) == -1 and asked[1][4] is None
    named = libvirt_host.Hypervisor("hv1", "qemu+tls://kvm01.example.com/system", username="ops", password="s3cret",
                                    uri_policy=UriPolicy.from_settings({"credential_hosts": ["kvm01.example.com"]}))
    _kinds, answer, _data = named._auth()
    assert answer(asked, None) == 0 and asked[1][4] == "s3cret"


@pytest.mark.skipif(libvirt_host.libvirt is None, reason="libvirt-python is not installed")
def test_the_test_driver_still_opens_under_the_default_policy():
    with libvirt_host.Hypervisor("lab", "test:///default", timeout_s=5) as hv:
        assert hv.facts("default-pool")["nodename"]


# ---- where a task finds the operator's policy ------------------------------------------------------

class _Templar:
    @staticmethod
    def template(value):
        return value


def test_a_task_takes_its_option_else_berth_uri_policy_else_the_environment_else_the_default(monkeypatch):
    from ansible_collections.berth.fleet.plugins.plugin_utils.action_base import operator_uri_policy

    monkeypatch.delenv("BERTH_URI_POLICY", raising=False)
    monkeypatch.delenv("BERTH_SSH_KEYFILE", raising=False)
    monkeypatch.delenv("BERTH_SSH_KNOWN_HOSTS", raising=False)
    variables = {"berth_uri_policy": {"allow_parameters": ["socket"]}}
    assert operator_uri_policy({"allow_tcp": True}, variables, _Templar()).allow_tcp
    assert operator_uri_policy(None, variables, _Templar()).allow_parameters == {("socket", None)}
    assert operator_uri_policy(None, {}, _Templar()) == DEFAULT_POLICY
    monkeypatch.setenv("BERTH_URI_POLICY", '{"credential_hosts": ["kvm01"]}')
    monkeypatch.setenv("BERTH_SSH_KEYFILE", "/root/.ssh/berth")
    from_env = operator_uri_policy(None, {}, _Templar())
    assert from_env.credential_hosts == {"kvm01"} and ("keyfile", "/root/.ssh/berth") in from_env.allow_parameters
    monkeypatch.setenv("BERTH_URI_POLICY", "{not json")
    with pytest.raises(InputError) as caught:
        operator_uri_policy(None, {}, _Templar())
    assert caught.value.field == "BERTH_URI_POLICY"
    with pytest.raises(InputError) as caught:
        operator_uri_policy(None, {"berth_uri_policy": {"allow_tcp": "yes"}}, _Templar())
    assert caught.value.field == "berth_uri_policy.allow_tcp"
