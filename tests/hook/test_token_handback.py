"""The token gate alone (token.c, token_fetch.c, token_tracker.c; the rest of the hook stubbed:
tests/hook/snippets/token_handback.c): while one launching thread's request for the next token
is out, no other thread launches.  That request handed the token back (v1's early request, a
burst that does not fit), and the tracker counts nothing launched after it: a launch then ran
on no token, while another client held the GPU, and was never charged.  (Not so the renewer's
request in the tail: the token is ours until its answer, and what runs meanwhile is charged as
overuse: test_renewal.py.)"""

from __future__ import annotations

import json
import subprocess

import pytest

from gemini.native import _build

from .conftest import HERE

pytestmark = pytest.mark.hook

GATE = ["token.c", "token_fetch.c", "token_tracker.c"]
COMMON = ["predictor.c", "share.c", "roundtrip.c", "ticks.c"]


@pytest.fixture(scope="module")
def handback(tmp_path_factory):
    out = tmp_path_factory.mktemp("gate") / "token_handback"
    hook = _build.CSRC / "hook"
    sources = [hook / f for f in GATE] + [_build.CSRC / "common" / f for f in COMMON]
    subprocess.run([*_build._cc(), *_build.CFLAGS, f"-I{hook}", "-o", str(out),
                    str(HERE / "snippets" / "token_handback.c"), *map(str, sources),
                    *_build.LIBS], check=True)
    return out


@pytest.mark.parametrize("when", ["tail", "straddle"])
def test_no_thread_launches_while_another_has_handed_the_token_back(handback, when):
    """`tail`: thread B comes in the old token's tail after thread A asked (it went on with
    what was left, as if the renewer were asking).  `straddle`: B's look at its queue began
    before A asked and ended after (it set a look on the token A had handed back)."""
    r = subprocess.run([str(handback), when], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["fetch_burst"] == 1 and out["requests"] == 2, out  # A handed the token back
    assert out["b_went_while_held"] == 0, out
