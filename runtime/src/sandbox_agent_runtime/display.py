"""Text a person is shown, in a form no terminal interprets.

A command or a file a model wrote can hold bytes a terminal acts on instead
of showing (erasing a line, moving the cursor, reordering or hiding text), so
a person would approve a harmless command where another one runs. Every place
that shows a request for approval or a step shows it through ``visible()``.
A setting's value that may hold a credential is shown through
``without_credentials()``, and an SDK's message that may repeat one through
``without_secrets()``.
"""

import re
import unicodedata
from urllib.parse import unquote

# Characters shown by a short name.
NAMES = {
    "\x00": "NUL",
    "\x07": "BEL",
    "\x08": "BS",
    "\t": "TAB",
    "\n": "LF",
    "\x0b": "VT",
    "\x0c": "FF",
    "\r": "CR",
    "\x1b": "ESC",
    "\x7f": "DEL",
    "\x9b": "CSI",
    "\x9d": "OSC",
}
# Unicode's control, format (bidi marks and overrides, zero-width characters,
# tags), surrogate, private-use and unassigned characters, its line and
# paragraph separators, and every space but the plain one.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
# Letters that draw nothing (Hangul fillers, the braille blank), the
# combining grapheme joiner, and this module's own brackets.
HIDDEN = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f\u27e8\u27e9")
# What safe_line() keeps: the space, and the brackets visible() writes.
SHOWN_AS_THEY_ARE = frozenset(" \u27e8\u27e9")
# A run of more spaces than this is shown as its count.
LONGEST_SPACES = 8


def is_hidden(character: str) -> bool:
    """Whether ``character`` is shown by its name rather than as itself."""
    if character == " ":
        return False
    return (
        character in NAMES
        or character in HIDDEN
        or unicodedata.category(character) in HIDDEN_CATEGORIES
        or 0xFE00 <= ord(character) <= 0xFE0F  # variation selectors
        or 0xE0100 <= ord(character) <= 0xE01EF
    )


def name_of(character: str) -> str:
    short = NAMES.get(character)
    if short is not None:
        return f"⟨{short}⟩"
    code = f"U+{ord(character):04X}"
    name = unicodedata.name(character, "")
    return f"⟨{code} {name}⟩" if name else f"⟨{code}⟩"


def visible(text: str, keep_lines: bool = False) -> str:
    """``text`` with every character a terminal could act on, or that shows
    as nothing, replaced by its name; ``keep_lines``: line feeds stay line
    breaks (each line is then shown on a line of its own).

    Escape sequences, carriage returns and backspaces, OSC sequences,
    bidirectional overrides and zero-width characters each become a visible
    name between angle brackets (``⟨ESC⟩``, ``⟨U+202E RIGHT-TO-LEFT
    OVERRIDE⟩``), and a long run of spaces its count (``⟨2,100 spaces⟩``).
    The brackets themselves are shown as names too, so a name in brackets is
    always one of these and never text the model wrote to look like one.
    Nothing is cut."""
    shown: list[str] = []
    spaces = 0

    def end_of_spaces() -> None:
        nonlocal spaces
        if spaces > LONGEST_SPACES:
            shown.append(f"⟨{spaces:,} spaces⟩")
        else:
            shown.append(" " * spaces)
        spaces = 0

    for character in text:
        if character == " ":
            spaces += 1
            continue
        end_of_spaces()
        if character == "\n" and keep_lines:
            shown.append("\n")
        elif is_hidden(character):
            shown.append(name_of(character))
        else:
            shown.append(character)
    end_of_spaces()
    return "".join(shown)


def holds_hidden(text: str) -> bool:
    """Whether ``visible()`` changes more of ``text`` than its line breaks."""
    return visible(text, keep_lines=True) != text


def safe_line(text: str) -> str:
    """``text`` for one line of a terminal, whatever it holds. For text that
    went through ``visible()`` already (a request's detail) it changes
    nothing; anything else that reaches the starter's output from outside
    (a failure's message, a path) goes through it too, as a last guard."""
    return "".join(
        "?" if is_hidden(character) and character not in SHOWN_AS_THEY_ARE else character
        for character in text
    )


# What a message shows in place of a credential.
MASK = "***"


def without_credentials(value: str) -> str:
    """A URL or an address from a setting as a message may show it: what may be a
    credential masked (a user and password, an access key and its secret, a
    host holding a ':' not followed by a port) and its query and fragment
    (a signature, a token): ``s3://***@bucket/x``, ``https://host/path?***``.

    Args:
        value: the setting's value.

    Returns:
        The value, masked.
    """
    scheme, separator, rest = value.partition("://")
    if not separator:
        scheme, rest = "", value
    before, at, after = rest.rpartition("@")
    if at:
        # An '@' in a query or a fragment: any of it may be the secret.
        rest = MASK if any(mark in before for mark in "?#") else MASK + at + after
    elif separator and _holds_a_secret(_authority(rest)):
        rest = MASK + rest[len(_authority(rest)) :]
    cut = min((rest.index(mark) for mark in "?#" if mark in rest), default=len(rest))
    if cut < len(rest):
        rest = rest[: cut + 1] + MASK
    return f"{scheme}{separator}{rest}"


def _authority(rest: str) -> str:
    """The host (and port, or credentials) of a URL without its scheme."""
    return re.split(r"[/?#]", rest, maxsplit=1)[0]


def _holds_a_secret(authority: str) -> bool:
    """Whether a URL's ``authority`` without an '@' holds a ':' that no
    port follows (not an IPv6 address in brackets): a KEY:SECRET. Digits
    alone after it are a port, one out of range too (the line that refuses
    it must show it)."""
    return (
        ":" in authority
        and not authority.startswith("[")
        and not re.fullmatch(r"[^:]*:[0-9]*", authority)
    )


def credentials_of(value: str) -> list[str]:
    """What ``without_credentials()`` masks in ``value``, as an SDK's message
    may repeat it: the credentials whole, their user and password apart, as
    given and decoded, and the query and the fragment; longest first, none
    shorter than four characters (shorter ones are masked in URLs alone)."""
    scheme, separator, rest = value.partition("://")
    if not separator:
        rest = value
    before, at, _ = rest.rpartition("@")
    found = []
    if at:
        found.append(before)
    elif separator and _holds_a_secret(_authority(rest)):
        found.append(_authority(rest))
    found += [part for each in found for part in each.split(":", 1)]
    marks = [rest.index(mark) for mark in "?#" if mark in rest]
    if marks:
        found.append(rest[min(marks) + 1 :])
    found += [unquote(each) for each in found]
    return sorted({each for each in found if len(each) >= 4}, key=len, reverse=True)


# A URL's credentials in free text.
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@'\"`]+@")


def without_secrets(text: str, *values: str) -> str:
    """``text`` (an SDK's message, which may repeat a setting it was given)
    as a message may show it: the credentials of each of ``values`` (the
    settings' values: credentials_of()) masked wherever they appear, and
    the credentials of any URL in it."""
    secrets = {each for value in values for each in credentials_of(value)}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _URL_CREDENTIALS.sub(rf"\g<1>{MASK}@", text)
