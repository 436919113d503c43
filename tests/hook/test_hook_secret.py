"""The hook and GEMINI_SECRET_FILE: a HELLO with the secret opens every connection; a missing or
bad file keeps the hook away from the pod manager (fail closed) with one clear line."""

from __future__ import annotations

import pytest

from gemini.core.wire import RequestType
from gemini.secret import create_secret_file, load_secret

pytestmark = pytest.mark.hook


def test_every_connection_starts_with_a_hello_carrying_the_secret(hook_env, mini, pm, tmp_path):
    path = tmp_path / "secret"
    create_secret_file(path)
    r = hook_env.run([str(mini / "mini_client"), "fork"], GEMINI_SECRET_FILE=str(path))
    assert r.out == [{"child": 0}], r.stderr
    assert pm.wait_for(lambda p: p.connections == 2)
    hellos = pm.of_type(RequestType.HELLO)
    assert [h.args[0] for h in hellos] == [load_secret(path)] * 2
    assert pm.requests[0].type is RequestType.HELLO


@pytest.mark.parametrize("content", [None, "not hex at all\n"])
def test_a_missing_or_bad_secret_file_waits_with_one_clear_line(
    hook_env, mini, pm, tmp_path, content
):
    path = tmp_path / "secret"
    if content is not None:
        path.write_text(content)
    proc = hook_env.start([str(mini / "mini_client"), "launch", "1"],
                          GEMINI_SECRET_FILE=str(path))
    try:
        line = proc.wait_line("unreachable")
        why = "No such file" if content is None else "not 32 hex digits"
        assert f"GEMINI_SECRET_FILE {path}: {why}" in line, line
        assert proc.popen.poll() is None  # waiting, not exited
        assert pm.connections == 0  # never knocked without a secret
    finally:
        proc.kill()
