"""A hypervisor's text read strictly and shown safely: numbers in ASCII digits only, and the
reason a host is down short and printable whatever the host sent."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import (
    REASON_CHARACTERS,
    failure_reason,
    printable,
    shortened,
    whole_number,
)
from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError


@pytest.mark.parametrize("text, number", [
    ("0", 0), ("42", 42), (" 7 ", 7), ("9" * 30, int("9" * 30)),
    # str.isdigit() takes these; int() refuses the first and reads the others as other digits.
    ("²", None), ("٣", None), ("１２", None),
    ("", None), (None, None), ("-1", None), ("+1", None), ("1_000", None), ("0x10", None), ("1.5", None),
    ("one", None),
], ids=repr)
def test_a_whole_number_is_ascii_digits_only(text, number):
    assert whole_number(text) == number


def test_a_reason_names_what_failed_and_is_short_and_printable_whatever_the_host_sent():
    with pytest.raises(ET.ParseError) as parse_error:
        ET.fromstring("<capabilities><host>" + "\x1b[2J\u202e" * 10_000)
    reason = failure_reason("hv3", parse_error.value)
    assert reason.startswith("hv3: its answers could not be read (ParseError: not well-formed")
    hostile = failure_reason("hv3", ValueError("\x1b]8;;http://evil\x07click\u202e" + "x" * 10_000))
    assert len(hostile) == REASON_CHARACTERS and hostile.endswith("...")
    assert hostile.startswith("hv3: its answers could not be read (ValueError: \\x1b]8;;http://evil\\x07click\\u202e")
    assert printable(hostile) == hostile


def test_libvirts_and_the_settings_errors_keep_their_own_words():
    assert failure_reason("hv1", HypervisorError("hv1", "Connection refused")) == "hv1: Connection refused"
    lacking = InputError("hypervisors.hv1.cpu_dedicated_set", "hypervisors.hv1.cpu_dedicated_set: hv1 has no CPU 9")
    assert failure_reason("hv1", lacking) == "hypervisors.hv1.cpu_dedicated_set: hv1 has no CPU 9"
    # libvirt's message is the host's text too.
    assert len(failure_reason("hv1", HypervisorError("hv1", "\n" * 5000))) == REASON_CHARACTERS


@pytest.mark.parametrize("text, limit, shown", [
    ("short", 10, "short"), ("exactly10!", 10, "exactly10!"), ("eleven char", 10, "eleven ..."),
    ("\x1b" * 3, 12, "\\x1b\\x1b\\x1b"), ("\x1b" * 4, 12, "\\x1b\\x1b\\..."),
])
def test_shortened_text_counts_its_escapes(text, limit, shown):
    assert shortened(text, limit) == shown
