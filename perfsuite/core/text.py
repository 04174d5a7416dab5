"""Text that came from data files, made safe for where it goes: a file name or a terminal.

One slug for every file name perfsuite derives from data (a workload, a label, a precision), and
one filter for every string from a data file that reaches a terminal or a Markdown table. A name
in a results file is the user's data, not theirs to aim at a path or at the terminal's state.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

# Characters a derived file name keeps; every run of others becomes one "_". No "/" (no folders),
# and "=" "," "+" keep parameter labels readable (`n=256,dtype=fp32`).
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=,+-]+")
SLUG_LIMIT = 100


def slug(text: object, limit: int = SLUG_LIMIT) -> str:
    """A file-name component from `text`: never empty, hidden, `.` or `..`; at most `limit`
    characters (a longer one keeps its start and a hash of the whole, so two long names that share
    a start stay apart and a 300-character workload name is a file name, not an OSError)."""
    text = str(text)
    s = _UNSAFE.sub("_", text).lstrip("._-").rstrip(".")
    if not s:
        s = "_"
    if len(s) > limit:
        s = s[: limit - 9].rstrip(".") + "~" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return s


def printable(text: object) -> str:
    """`text` without control characters (escape sequences, carriage returns, bidi overrides):
    a workload name carrying an OSC title or colours is shown, not obeyed. Tabs and newlines become
    spaces, since every caller prints one line or one table cell."""
    out = []
    for ch in str(text):
        cat = unicodedata.category(ch)
        if ch in "\t\n\r":
            out.append(" ")
        elif cat == "Cc" or cat == "Cf" or cat in ("Cs", "Co"):
            out.append("\N{REPLACEMENT CHARACTER}" if cat != "Cf" else "")
        else:
            out.append(ch)
    return "".join(out)


def escaped(text: object) -> str:
    """`text` with every control and format character shown as its escape (ESC as \\x1b, a
    right-to-left override as \\u202e), newlines and tabs kept: what the console writer
    (perfsuite.cli.console) prints of text that did not come from perfsuite."""
    out = []
    for ch in str(text):
        if ch in "\n\t" or unicodedata.category(ch) not in _CONTROL:
            out.append(ch)
        else:
            out.append(ascii(ch)[1:-1])
    return "".join(out)


_CONTROL = ("Cc", "Cf", "Cs", "Co")


def markdown_cell(text: object) -> str:
    """`text` for one cell of a Markdown table: printable, its pipes escaped."""
    return printable(text).replace("|", "\\|")
