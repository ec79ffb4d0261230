"""A serial console's bytes made into lines that are safe to show. Private to the collection.

What a guest writes on its console is untrusted and ends up in terminals and AWX pages: invalid
UTF-8 is replaced, and every character that a terminal or a browser would act on instead of
showing (escape sequences, carriage returns that overwrite a line, bidirectional overrides,
line separators other than newline) is shown escaped, as ``\\x1b`` or ``\\u202e``.
"""

from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import printable


def console_lines(data: bytes, wanted_lines: int, starts_mid_file: bool) -> tuple[list[str], bool]:
    """The last ``wanted_lines`` lines of ``data`` (the tail of a serial log), decoded and made
    printable, and whether earlier output was left out.

    With ``starts_mid_file`` (the file has bytes before ``data``) its first line is most likely
    cut, maybe inside a UTF-8 sequence: it is dropped, unless it is all there is (a guest that
    wrote a line longer than the tail without a newline still shows its end). A newline ends a
    line, with the carriage return that a serial console sends before it (CR LF).
    """
    left_out = starts_mid_file
    if starts_mid_file and b"\n" in data:
        data = data[data.index(b"\n") + 1:]
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline ended the last line; no empty line after it
    if len(lines) > wanted_lines:
        lines, left_out = lines[-wanted_lines:], True
    return [printable(line[:-1] if line.endswith("\r") else line) for line in lines], left_out
