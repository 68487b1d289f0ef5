"""What may reach a terminal: text from records, made harmless (issue 29, docs/trust.md "What readers count").

Every string kictl prints may come from a record someone else wrote (a name,
a title, a status detail, a note in an attestation).  A terminal acts on some
characters instead of showing them: escape sequences (``ESC [ ...``) recolour,
move the cursor, rewrite the title or earlier lines; a carriage return or
backspace overwrites what was printed; bidirectional overrides (U+202A-U+202E,
U+2066-U+2069) reorder what is shown, so that a digest or a number reads as
another.  ``terminal_safe`` shows each such character as a visible escape
(``\\x1b``, ``\\u202e``) instead; ``json_safe`` does the same inside JSON,
where the escape is JSON's own (``\\u001b``), so a parser reads the same
string back.  Tab and newline stay (kictl's own layout uses them).

``kictl.cli._common`` applies them to everything ``out``, ``err``,
``emit_json`` and the error handler print: one place, every command.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, C1 controls, bidi embeddings, overrides, isolates and marks,
#: and the line and paragraph separators some terminals break lines at.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on shown as a visible escape."""
    return _UNSAFE.sub(_visible, text)


def json_safe(text: str) -> str:
    """JSON text (as ``json.dumps`` writes it) with the same characters written as JSON ``\\uXXXX`` escapes."""
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
