"""Who may talk to the daemons: the shared secret (HELLO first) at both daemons and in the hook,
and the pod manager's Unix socket with its peer-uid check.  Everything waits on replies and log
lines, never on time."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gemini.cli import gemini as gemini_cli
from gemini.client import Connection, NotAuthorized, query_status
from gemini.core.wire import (
    REQ_MSG_LEN,
    RSP_MSG_LEN,
    Request,
    RequestType,
    Response,
    Status,
    decode_response,
    encode_request,
)
from gemini.secret import SECRET_LEN, create_secret_file, load_secret
from tests.procs import start_pod_manager, start_scheduler
from tests.system.conftest import FAST, result

pytestmark = pytest.mark.system

REFUSED = r"\] refused: no or wrong secret"
NOBODY = 65534
WORK = ("work", "--kernel-ms", "5", "--burst", "4", "--seconds", "1")


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    create_secret_file(path)
    return path


@pytest.fixture
def wrong_file(tmp_path: Path) -> Path:
    path = tmp_path / "wrong"
    create_secret_file(path)
    return path


def exchange(port: int, req: Request) -> tuple[Response, bytes]:
    """Send one request on a fresh connection with no HELLO: its reply, then all the server
    sends until it closes (b"" when it closes right after the reply)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(encode_request(req))
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    return decode_response(req.type, data[:RSP_MSG_LEN]), data[RSP_MSG_LEN:]


def assert_refused_without_hello(port: int, name: str) -> None:
    """No HELLO first: NOT_AUTHORIZED, echoing the request id, and the connection is closed."""
    rsp, rest = exchange(port, Request(name, 42, RequestType.QUOTA, (0.0, 10.0)))
    assert (rsp.req_id, rsp.status, rest) == (42, Status.NOT_AUTHORIZED, b"")


def test_the_scheduler_refuses_no_or_a_wrong_secret_and_serves_the_right_one(
    tmp_path, secret_file, wrong_file, capsys
):
    config = tmp_path / "resource-config.txt"
    config.write_text("1\na 1.0 1.0 1GiB\n")
    schd = start_scheduler(config, "--secret-file", str(secret_file))
    try:
        secret = load_secret(secret_file)
        with Connection("127.0.0.1", schd.port, "tool", secret=secret) as good:
            assert good.call(RequestType.STATUS)[0].status is Status.OK
            assert_refused_without_hello(schd.port, "a")
            schd.wait_for(REFUSED)
            mark = schd.mark()
            with pytest.raises(NotAuthorized):
                Connection("127.0.0.1", schd.port, "tool", secret=load_secret(wrong_file))
            schd.wait_for(REFUSED, since=mark)
            with pytest.raises(NotAuthorized):
                query_status("127.0.0.1", schd.port)
            # The refusals closed only their own connections.
            assert good.call(RequestType.STATUS)[0].status is Status.OK
        port = str(schd.port)
        assert gemini_cli.main(["status", "--port", port, "--secret-file", str(secret_file)]) == 0
        assert "GPU scheduler" in capsys.readouterr().out
        assert gemini_cli.main(["status", "--port", port]) == 1
        assert "secret" in capsys.readouterr().err
    finally:
        schd.stop()


def test_hello_is_welcome_where_no_secret_is_set(tmp_path):
    config = tmp_path / "resource-config.txt"
    config.write_text("1\na 1.0 1.0 1GiB\n")
    schd = start_scheduler(config)
    try:
        with Connection("127.0.0.1", schd.port, "tool", secret=bytes(SECRET_LEN)) as conn:
            assert conn.call(RequestType.STATUS)[0].status is Status.OK
    finally:
        schd.stop()


def test_a_secret_end_to_end_and_refusals_at_the_pod_manager(system, secret_file, wrong_file):
    flags = ("--secret-file", str(secret_file))
    # The pod manager has its memory limit only after the scheduler accepted its HELLO.
    system.backend("1\na 1.0 1.0 1GiB\n", *FAST, *flags, pmgr_flags=flags)
    pm = system.pmgrs["a"]
    worker = system.client("a", *WORK, env={"GEMINI_SECRET_FILE": str(secret_file)})
    with Connection("127.0.0.1", pm.port, "a", secret=load_secret(secret_file)) as good:
        assert good.call(RequestType.MEM_LIMIT)[0].status is Status.OK
        assert_refused_without_hello(pm.port, "a")
        pm.wait_for(REFUSED)
        with pytest.raises(NotAuthorized):
            Connection("127.0.0.1", pm.port, "a", secret=load_secret(wrong_file))
        assert good.call(RequestType.MEM_LIMIT)[0].status is Status.OK
    # A hook with the wrong secret is refused and waits (fail closed) instead of running free.
    mark = pm.mark()
    stray = system.client("a", *WORK, env={"GEMINI_SECRET_FILE": str(wrong_file)})
    pm.wait_for(REFUSED, since=mark)
    assert stray.poll() is None
    stray.kill()
    r = result(worker)
    assert r["rc"] == 0 and r["kernels"] > 0, r
    # A pod manager with the wrong secret is refused by the scheduler, and says so.
    mark = system.schd.mark()
    bad = start_pod_manager("a", system.schd.port, "--secret-file", str(wrong_file))
    try:
        bad.wait_for("refused our secret")
        system.schd.wait_for(REFUSED, since=mark)
    finally:
        bad.stop()


def test_hooks_reach_their_pod_manager_over_a_unix_socket(system, tmp_path):
    sock = tmp_path / "a.sock"
    system.backend("1\na 1.0 1.0 1GiB\n", pmgr_flags=("--unix", str(sock)))
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660
    r = result(system.client("a", *WORK, env={"POD_MANAGER_PORT": f"unix:{sock}"}))
    assert r["rc"] == 0 and r["kernels"] > 0, r
    with Connection("", 0, "a", unix=str(sock)) as conn:
        assert conn.call(RequestType.MEM_LIMIT)[0].status is Status.OK
    system.pmgrs["a"].stop()
    assert not sock.exists()  # no stale socket file left behind


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder group root may enter (pytest's tmp_path is 0700): the other uid reaches the
    socket through group root, as a group of trusted users would, and only SO_PEERCRED stops it."""
    path = Path(tempfile.mkdtemp(prefix="gemini-unix-"))
    os.chmod(path, 0o750)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def hello_as(uid: int, path: Path) -> bytes:
    """Connect as `uid` (group root) in a forked child and send a HELLO; what came back."""
    frame = encode_request(Request("a", 7, RequestType.HELLO, (bytes(SECRET_LEN),)))
    assert len(frame) == REQ_MSG_LEN
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing but system calls, then _exit
        got = b"?"
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(0)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(str(path))
                sock.sendall(frame)
                got = sock.recv(RSP_MSG_LEN)  # b"": closed on us
        except (BrokenPipeError, ConnectionResetError):
            got = b""
        except BaseException as exc:  # reported to the parent, never raised in the child
            got = f"error: {exc!r}".encode()
        finally:
            os.write(w, got)
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return data


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another uid (setuid)")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() with threads, Python 3.12+
def test_a_uid_not_allowed_is_refused_on_the_unix_socket(shared_dir):
    closed, opened = shared_dir / "closed.sock", shared_dir / "open.sock"
    # No scheduler: the uid check and HELLO are answered by the pod manager's shell alone.
    strict = start_pod_manager("a", 1, "--unix", str(closed))
    lenient = start_pod_manager("a", 1, "--unix", str(opened), "--allow-uid", str(NOBODY))
    try:
        assert hello_as(NOBODY, closed) == b""
        strict.wait_for(rf"\[a: unix pid \d+ uid {NOBODY}\] refused: uid {NOBODY} may not")
        reply = hello_as(NOBODY, opened)
        assert len(reply) == RSP_MSG_LEN, reply
        assert decode_response(RequestType.HELLO, reply).status is Status.OK
        assert hello_as(0, closed) != b""  # root is always allowed
    finally:
        strict.stop()
        lenient.stop()
