from __future__ import annotations

import os
import stat

import pytest

from gemini.secret import (
    SecretError,
    create_secret_file,
    format_secret,
    load_secret,
    parse_secret,
)


def test_parse_accepts_32_hex_digits_with_whitespace_around() -> None:
    raw = bytes(range(16))
    assert parse_secret(format_secret(raw)) == raw
    assert parse_secret("  " + raw.hex().upper() + "\r\n") == raw


@pytest.mark.parametrize("text", ["", "abc", "0" * 31, "0" * 33, "g" * 32, "00" * 15 + " 0"])
def test_parse_refuses_anything_else(text: str) -> None:
    with pytest.raises(SecretError):
        parse_secret(text)


def test_create_makes_an_owner_only_file_and_never_replaces_one_silently(tmp_path) -> None:
    path = tmp_path / "secret"
    create_secret_file(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    first = load_secret(path)
    with pytest.raises(FileExistsError):
        create_secret_file(path)
    os.chmod(path, 0o644)
    create_secret_file(path, force=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_secret(path) != first


def test_load_names_the_file_and_the_problem(tmp_path) -> None:
    with pytest.raises(SecretError, match=r"missing.*No such file"):
        load_secret(tmp_path / "missing")
    bad = tmp_path / "bad"
    bad.write_text("hello\n")
    with pytest.raises(SecretError, match=r"bad holds 5 characters"):
        load_secret(bad)
