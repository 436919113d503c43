"""The optional shared secret: a file holding 32 hex digits (16 bytes), surrounding whitespace
allowed.  A client proves it knows the secret by sending the 16 bytes in a HELLO as its first
message; a server that has a secret refuses every connection that does not (README, "Trust model").

The proof is the secret itself, not a challenge response: the daemons listen on loopback or a Unix
socket, where nobody can read another process's traffic, so a replay needs the secret anyway.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

SECRET_LEN = 16
ENV = "GEMINI_SECRET_FILE"


class SecretError(ValueError):
    """A secret file that cannot be read or does not hold 32 hex digits."""


def parse_secret(text: str) -> bytes:
    digits = text.strip()
    if len(digits) != 2 * SECRET_LEN:
        raise SecretError(f"holds {len(digits)} characters, not {2 * SECRET_LEN} hex digits")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise SecretError(f"is not {2 * SECRET_LEN} hex digits") from None


def format_secret(raw: bytes) -> str:
    return raw.hex() + "\n"


def load_secret(path: str | os.PathLike[str]) -> bytes:
    """The secret of a file; SecretError names the file and what is wrong with it."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SecretError(f"secret file {path}: {reason}") from None
    try:
        return parse_secret(text)
    except SecretError as exc:
        raise SecretError(f"secret file {path} {exc}") from None


def world_readable(path: str | os.PathLike[str]) -> bool:
    """True when any user may read the file: then the secret protects nothing."""
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def load_optional(path: str | os.PathLike[str] | None) -> bytes | None:
    return None if not path else load_secret(path)


def create_secret_file(path: str | os.PathLike[str], force: bool = False) -> None:
    """Write a fresh random secret, readable by its owner only (mode 0600 from the start)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # an existing file (--force) keeps its old mode otherwise
        f.write(format_secret(secrets.token_bytes(SECRET_LEN)))
