"""A serial log's tail made into lines that are safe to show: the line bounds, and what a hostile
guest can write (escape sequences, invalid UTF-8, bidirectional overrides, a line without end)."""

from __future__ import annotations

import random
import unicodedata

import pytest

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import printable
from ansible_collections.berth.fleet.plugins.plugin_utils._console_text import console_lines


@pytest.mark.parametrize(("data", "wanted", "mid_file", "lines", "left_out"), [
    (b"", 10, False, [], False),
    (b"one\ntwo\n", 10, False, ["one", "two"], False),
    (b"one\ntwo", 10, False, ["one", "two"], False),
    (b"one\r\ntwo\r\n", 10, False, ["one", "two"], False),
    (b"a\nb\nc\nd\n", 2, False, ["c", "d"], True),
    (b"a\nb\nc\nd\n", 4, False, ["a", "b", "c", "d"], False),
    (b"a\nb\nc\nd\n", 1, False, ["d"], True),
    (b"\n\n\n", 10, False, ["", "", ""], False),
    # The tail of a bigger file: its first line is cut, and dropped.
    (b"ut line\nwhole\nlast\n", 10, True, ["whole", "last"], True),
    (b"\x9d cut inside a character\nwhole\n", 10, True, ["whole"], True),
    # All there is is one line longer than the tail: its end is still shown.
    (b"AAAA", 10, True, ["AAAA"], True),
], ids=["empty", "two-lines", "no-final-newline", "crlf", "last-two", "exactly-all", "last-one", "blank-lines",
        "cut-first-line", "cut-utf8", "one-long-line"])
def test_the_last_lines_and_whether_earlier_output_was_left_out(data, wanted, mid_file, lines, left_out):
    assert console_lines(data, wanted, mid_file) == (lines, left_out)


@pytest.mark.parametrize(("raw", "shown"), [
    (b"\x1b[2J\x1b[31mred\x1b[0m", "\\x1b[2J\\x1b[31mred\\x1b[0m"),                       # clear screen, colours
    (b"\x1b]0;owned\x07title", "\\x1b]0;owned\\x07title"),                                 # set the window title
    (b"\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\",
     "\\x1b]8;;http://evil.example\\x1b\\link\\x1b]8;;\\x1b\\"),                          # OSC 8 hyperlink
    (b"password: hunter2\rpassword: ******", "password: hunter2\\x0dpassword: ******"),    # overwrite a line
    (b"nul\x00del\x7fbell\x07bs\x08", "nul\\x00del\\x7fbell\\x07bs\\x08"),
    ("C1 csi \u009b31m".encode(), "C1 csi \\x9b31m"),
    ("bidi \u202egnp.exe\u202c".encode(), "bidi \\u202egnp.exe\\u202c"),                    # Trojan Source
    ("zero\u200bwidth \ufeffbom".encode(), "zero\\u200bwidth \\ufeffbom"),
    ("line\u2028separator\u2029para\x85nel".encode(), "line\\u2028separator\\u2029para\\x85nel"),
    ("tag \U000e0041".encode(), "tag \\U000e0041"),
    (b"invalid \xff\xfe \xc3( \xed\xa0\x80 end", "invalid \ufffd\ufffd \ufffd( \ufffd\ufffd\ufffd end"),
    (b"raw C1 byte \x9b31m", "raw C1 byte \ufffd31m"),
    (b"vertical\x0btab\x0cform\x1cfs", "vertical\\x0btab\\x0cform\\x1cfs"),
    (b"tab\tkept", "tab\tkept"),
    ("caf\u00e9 \u65e5\u672c \U0001f600".encode(), "caf\u00e9 \u65e5\u672c \U0001f600"),
], ids=["csi", "osc-title", "osc8-link", "carriage-return", "c0-del", "c1", "bidi-override", "zero-width",
        "unicode-line-breaks", "tag-character", "invalid-utf8", "raw-c1-byte", "vt-ff-fs", "tab", "plain-unicode"])
def test_hostile_bytes_are_replaced_or_escaped_never_passed_on(raw, shown):
    assert console_lines(raw + b"\r\n", 10, False) == ([shown], False)


def test_a_huge_line_without_newline_stays_one_bounded_line():
    data = b"A" * 65536
    lines, left_out = console_lines(data, 1000, True)
    assert lines == ["A" * 65536] and left_out


def test_random_bytes_never_give_a_character_a_terminal_acts_on():
    generator = random.Random(23)
    for _attempt in range(200):
        data = generator.randbytes(generator.randrange(1, 400))
        lines, _left_out = console_lines(data, 1000, generator.random() < 0.5)
        for line in lines:
            assert all(character == "\t" or unicodedata.category(character) not in ("Cc", "Cf", "Cs", "Zl", "Zp")
                       for character in line), ascii(line)


def test_an_escape_a_guest_prints_as_text_stays_text():
    # What it shows for an escape cannot be told from the same text printed by the guest, but it
    # is text either way: nothing acts on a terminal.
    assert printable("\\x1b[31m") == "\\x1b[31m"
