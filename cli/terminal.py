"""Text from elsewhere (a server, a signed manifest, this device's records of them) made safe
for a terminal: what reaches the screen can neither run terminal commands nor hide or reorder
the text around it."""

import codecs
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

# Whole escape sequences, so that their parameters do not remain as litter (ECMA-48): CSI
# (ESC [ or U+009B, parameters, a final byte: colours, cursor moves, erasing); OSC, DCS, SOS, PM
# and APC strings up to their terminator (ESC ] 8 ;; URL ST is a hyperlink, ESC ] 0 ; ... BEL a
# window title); any other ESC sequence (ESC c resets the terminal).
ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]")
# Invisible format characters a script needs to render correctly (Persian, Indic, emoji
# sequences): they join or separate letters, and can neither move nor hide text.
KEPT_FORMAT = {"\u200c", "\u200d"}  # zero-width non-joiner, zero-width joiner
# Removed: Cc (C0 and C1 controls, DEL), Cf (bidi marks, embeddings, overrides and isolates,
# zero-width spaces, tag characters), Cs (lone surrogates). Line and paragraph separators (Zl,
# Zp) and whitespace controls (tab, newline, carriage return, ...) become a space each.
REMOVED = {"Cc", "Cf", "Cs"}
SEPARATORS = {"Zl", "Zp"}


def clean(text: str, keep_newlines: bool = False) -> str:
    """`text` without escape sequences, controls or invisible format characters (but
    KEPT_FORMAT), whitespace controls and newlines as spaces, except newlines when
    `keep_newlines` (text this command lays out in lines itself)."""
    if keep_newlines:
        return "\n".join(clean(line) for line in text.split("\n"))
    if text.isprintable():  # the usual case, at C speed: nothing to remove
        return text
    return "".join(_visible(c) for c in ESCAPE_SEQUENCE.sub("", text))


def _visible(c: str) -> str:
    category = unicodedata.category(c)
    if category in SEPARATORS or (category == "Cc" and c.isspace()):
        return " "
    return "" if category in REMOVED and c not in KEPT_FORMAT else c


def clean_json(value: Any) -> Any:
    """A parsed JSON document with every string in it, keys too, `clean`ed."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [clean_json(item) for item in value]
    if isinstance(value, dict):
        return {clean(key): clean_json(item) for key, item in value.items()}
    return value


def clean_pieces(pieces: Iterable[bytes]) -> Iterator[str]:
    """A UTF-8 stream as text for a terminal, piece by piece: `clean`ed, its newlines kept (a
    character split between two pieces is decoded whole; an escape sequence split so is still
    harmless, its ESC removed)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for piece in pieces:
        yield clean(decoder.decode(piece), keep_newlines=True)
    yield clean(decoder.decode(b"", final=True), keep_newlines=True)
