"""Student-derived text made safe for a terminal or a log (``llm-course cluster status``, ``merge``, task logs).

A student id is a folder name, a failure reason ends with an exception message that a submission
can choose (``NBFormatError: Unsupported nbformat version <anything>``), a file name is the
student's: printed raw, an escape sequence in one of them (``ESC ]0;title BEL``, ``ESC [2J``,
``\\x9b`` CSI, a carriage return or backspaces that overwrite the line, a bidi override that
reorders it) rewrites the instructor's screen or forges lines of a log. :func:`safe` writes every
such character as a visible escape (``\\x1b``, ``\\u202e``), as :func:`ascii` would, and keeps
printable text, accented names included, as it is.
"""
from __future__ import annotations

import unicodedata

# Control (Cc: C0, DEL, C1 including \x9b), format (Cf: bidi overrides and isolates, zero-width
# characters, BOM), surrogates, private use, unassigned, and line/paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe(text: object, limit: int | None = None) -> str:
    """``text`` (any object, as ``str``) with every control, format or invisible character written
    as an escape (``\\x1b``, ``\\x07``, ``\\r``, ``\\n``, ``\\u202e``…): one line, nothing a terminal
    interprets. Idempotent (an escape is printable). ``limit``: cut to that many characters after
    escaping, ending with ``…``."""
    s = str(text)
    out = "".join(_escape(c) if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in s)
    if limit is not None and len(out) > limit:
        out = out[: max(0, limit - 1)] + "…"
    return out
