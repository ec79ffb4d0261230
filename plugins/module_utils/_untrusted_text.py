"""Text Berth did not write - a hypervisor's answers, a guest's console - read and shown safely.
Private to the collection.

A hypervisor is not trusted: its numbers are read strictly (ASCII digits only: ``str.isdigit()``
also takes "²", which ``int()`` refuses), and what it says only ever reaches a record or a screen
as a short line in which every character a terminal or a browser would act on is escaped.

Python 3.9: modules ship this file to hypervisors with the rest of module_utils.
"""

from __future__ import annotations

import unicodedata
from typing import Optional

from ansible_collections.berth.fleet.plugins.module_utils.errors import HypervisorError, InputError

# Unicode categories shown escaped: controls (C0, DEL, C1), format characters (bidirectional
# overrides and isolates, zero-width characters, tags), lone surrogates, and the line and
# paragraph separators some viewers break lines at.
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Shown as they are: a tab is spacing; a console's lines are already split at newlines.
KEPT_CONTROLS = frozenset({"\t"})
# The longest reason a host is recorded down with: a line of a report, whatever the host sent.
REASON_CHARACTERS = 400
_CUT = "..."


def printable(text: str) -> str:
    """``text`` with each character of ESCAPED_CATEGORIES (but a tab) written as its escape."""
    return "".join(_escape(character) if character not in KEPT_CONTROLS
                   and unicodedata.category(character) in ESCAPED_CATEGORIES else character
                   for character in text)


def _escape(character: str) -> str:
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shortened(text: str, max_characters: int) -> str:
    """``text`` made printable, cut to at most ``max_characters`` (ending in "..." where cut)."""
    shown = printable(text[:max_characters + 1])  # escapes only lengthen it: no need to read on
    return shown if len(shown) <= max_characters else shown[:max_characters - len(_CUT)] + _CUT


def failure_reason(host: str, error: BaseException) -> str:
    """Why ``host`` is down, from what opening it, asking it or reading its answers raised: a
    libvirt error or a setting's error as it is worded, anything else (an answer that does not
    parse) with its type; printable and at most REASON_CHARACTERS long, whatever the host sent."""
    if isinstance(error, (HypervisorError, InputError)):
        text = str(error)
    else:
        text = f"{host}: its answers could not be read ({type(error).__name__}: {error})"
    return shortened(text, REASON_CHARACTERS)


def whole_number(text: Optional[str]) -> Optional[int]:
    """The number ``text`` spells in ASCII digits (spaces around it allowed), else None."""
    value = (text or "").strip()
    return int(value) if value.isascii() and value.isdigit() else None
