"""The C protocol (csrc/common/wire.c, used by the hook) and the Python one agree byte for byte."""

from hypothesis import given
from hypothesis import strategies as st

from gemini.core import wire
from gemini.core.wire import Request, RequestType, Response, Status
from gemini.native import _common

ffi, lib = _common.ffi, _common.lib

ascii_names = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=47)
# Any UTF-8 name the wire takes (the limits count bytes): the hook's name is the pod's.
utf8_names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                     min_size=1, max_size=47).filter(lambda t: len(t.encode()) <= 47)


def test_constants_agree():
    assert lib.GEM_REQ_MSG_LEN == wire.REQ_MSG_LEN
    assert lib.GEM_RSP_MSG_LEN == wire.RSP_MSG_LEN
    assert lib.GEM_MAX_NAME_LEN == wire.MAX_NAME_LEN
    assert lib.GEM_RSP_STATUS_OFFSET == wire.RSP_STATUS_OFFSET
    assert (lib.GEM_NOTIFY_ID, lib.GEM_CUT_ID) == (wire.NOTIFY_ID, wire.CUT_ID)
    assert lib.GEM_PROCESS_READS_CUTS == wire.PROCESS_READS_CUTS
    for t in wire.RequestType:
        assert getattr(lib, f"GEM_REQ_{t.name}") == t.value
    assert lib.GEM_MEM_FLAG_UNIFIED_MEMORY == wire.MEM_FLAG_UNIFIED_MEMORY
    assert lib.GEM_MEM_FLAG_EVICT_ON_RELEASE == wire.MEM_FLAG_EVICT_ON_RELEASE
    assert (lib.GEM_MEM_FREE, lib.GEM_MEM_ALLOC, lib.GEM_MEM_LEASE, lib.GEM_MEM_CLAIM) == (
        wire.MEM_FREE, wire.MEM_ALLOC, wire.MEM_LEASE, wire.MEM_CLAIM)
    for s in wire.Status:
        assert getattr(lib, f"GEM_STATUS_{s.name}") == s.value


def _c_frame(encode, *args) -> bytes:
    buf = ffi.new("uint8_t[]", wire.REQ_MSG_LEN)
    assert encode(buf, *args) == wire.REQ_MSG_LEN
    return bytes(ffi.buffer(buf))


@given(utf8_names, st.integers(-(2**31), 2**31 - 1), st.floats(allow_nan=False),
       st.floats(allow_nan=False), st.floats(allow_nan=False),
       st.floats(allow_nan=False, width=32), st.integers(0, 2**32 - 1))
def test_quota_request(name, req_id, overuse, burst, gpu_wait, run_ms, run_launches):
    """(Beside a name over GEM_QUOTA_RUN_NAME_MAX bytes, its alias, alike.)"""
    c = _c_frame(lib.gem_wire_encode_quota, name.encode(), req_id, overuse, burst, gpu_wait,
                 run_ms, run_launches)
    py = Request(name, req_id, RequestType.QUOTA, (overuse, burst, gpu_wait, run_ms, run_launches))
    assert c == wire.encode_request(py)
    assert lib.GEM_QUOTA_GPU_WAIT_NAME_MAX == wire.QUOTA_GPU_WAIT_NAME_MAX
    assert lib.GEM_QUOTA_RUN_NAME_MAX == wire.QUOTA_RUN_NAME_MAX
    assert lib.GEM_RUN_MEASURE_MS == wire.RUN_MEASURE_MS
    assert (lib.GEM_RUN_GRAPHS, lib.GEM_RUN_COUNT_MAX) == (wire.RUN_GRAPHS, wire.RUN_COUNT_MAX)


@given(utf8_names)
def test_a_names_alias(name):
    """A long name's alias in its token requests."""
    out = ffi.new("char[]", lib.GEM_QUOTA_ALIAS_LEN + 1)
    lib.gem_wire_quota_alias(name.encode(), out)
    assert ffi.string(out).decode() == wire.quota_alias(name)
    assert lib.GEM_QUOTA_ALIAS_LEN == wire.QUOTA_ALIAS_LEN


@given(st.integers(0, 2**64 - 1), st.booleans())
def test_run_word(count, graphs):
    """The run word (a count and the graph-launch bit) is the same in C and Python, a count
    past the maximum cut there, and reads back as what it says."""
    word = lib.gem_wire_run_word(count, graphs)
    assert word == wire.run_word(count, graphs)
    req = Request("a", 1, RequestType.QUOTA, (0.0, 0.0, None, 1.0, word))
    assert wire.quota_run(req)[1:] == (min(count, wire.RUN_COUNT_MAX), graphs)


@given(ascii_names, st.integers(0, 2**31 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2))
def test_memory_requests(name, req_id, size, alloc):
    c = _c_frame(lib.gem_wire_encode_mem_update, name.encode(), req_id, size, alloc)
    py = Request(name, req_id, RequestType.MEM_UPDATE, (size, alloc))
    assert c == wire.encode_request(py)
    c = _c_frame(lib.gem_wire_encode_mem_limit, name.encode(), req_id)
    assert c == wire.encode_request(Request(name, req_id, RequestType.MEM_LIMIT))


def test_c_refuses_names_python_refuses():
    buf = ffi.new("uint8_t[]", wire.REQ_MSG_LEN)
    assert lib.gem_wire_encode_mem_limit(buf, b"x" * 48, 1) == -1
    assert lib.gem_wire_encode_mem_limit(buf, b"", 1) == -1


@given(st.integers(-(2**31), 2**31 - 1), st.floats(allow_nan=False), st.sampled_from(list(Status)),
       st.integers(0, 2**32 - 1), st.floats(allow_nan=False))
def test_c_reads_python_responses(req_id, quota, status, sharers, granted_at):
    """(The fourth word is when the sender sent it: a scheduler's granted_at, a pod manager's
    sent_at, which the hook reads.)"""
    values = (quota, wire.QUOTA_FLAG_ALONE, sharers, granted_at)
    frame = wire.encode_response(RequestType.QUOTA, Response(req_id, status, values))
    assert lib.gem_wire_rsp_id(frame) == req_id
    assert lib.gem_wire_rsp_status(frame) == status
    assert lib.gem_wire_rsp_quota_ms(frame) == quota
    assert lib.gem_wire_rsp_quota_flags(frame) == lib.GEM_QUOTA_FLAG_ALONE == wire.QUOTA_FLAG_ALONE
    assert lib.GEM_QUOTA_FLAG_CALIBRATION == wire.QUOTA_FLAG_CALIBRATION
    assert lib.gem_wire_rsp_quota_sharers(frame) == sharers
    assert lib.gem_wire_rsp_quota_sent_at(frame) == granted_at
    flags = wire.MEM_FLAG_UNIFIED_MEMORY | wire.MEM_FLAG_EVICT_ON_RELEASE
    frame = wire.encode_response(RequestType.MEM_LIMIT,
                                 Response(req_id, status, (5, 1 << 40, flags)))
    used, limit = ffi.new("uint64_t *"), ffi.new("uint64_t *")
    lib.gem_wire_rsp_mem_limit(frame, used, limit)
    assert (used[0], limit[0]) == (5, 1 << 40)
    assert lib.gem_wire_rsp_mem_flags(frame) == flags
    assert frame[20:28] == flags.to_bytes(8, "little")
    frame = wire.encode_response(RequestType.MEM_UPDATE, Response(req_id, status, (1,)))
    assert lib.gem_wire_rsp_verdict(frame) == 1


@given(ascii_names, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
       st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**32 - 1))
def test_process_request(name, req_id, pid, index, features):
    c = _c_frame(lib.gem_wire_encode_process, name.encode(), req_id, pid, index, features)
    req = Request(name, req_id, RequestType.PROCESS, (pid, index, features))
    assert c == wire.encode_request(req)
    assert wire.decode_request(c) == req
    # (a hook from before it sent two words: the third reads 0, reads no cuts)
    old = wire.encode_request(Request(name, req_id, RequestType.PROCESS, (pid, index)))
    assert wire.decode_request(old).args == (pid, index, 0)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**31 - 1),
       st.integers(0, 2**31 - 1), st.integers(0, 2**64 - 1))
def test_c_reads_python_process_replies(req_id, count, pid, nbytes):
    frame = wire.encode_response(RequestType.PROCESS,
                                 Response(req_id, Status.OK, (count, pid, nbytes)))
    c_count, c_pid, c_bytes = ffi.new("int32_t *"), ffi.new("int32_t *"), ffi.new("uint64_t *")
    lib.gem_wire_rsp_process(frame, c_count, c_pid, c_bytes)
    assert (c_count[0], c_pid[0], c_bytes[0]) == (count, pid, nbytes)


@given(ascii_names, st.integers(0, 2**31 - 1), st.integers(0, 2**64 - 1))
def test_recall_answer(name, req_id, size):
    c = _c_frame(lib.gem_wire_encode_recall, name.encode(), req_id, size)
    assert c == wire.encode_request(Request(name, req_id, RequestType.RECALL, (size,)))


@given(st.integers(0, 2**64 - 1))
def test_c_reads_python_recall_notifications(lacks):
    frame = wire.encode_response(RequestType.RECALL,
                                 Response(wire.NOTIFY_ID, Status.OK, (lacks,)))
    assert lib.gem_wire_rsp_id(frame) == lib.GEM_NOTIFY_ID
    assert lib.gem_wire_rsp_status(frame) == lib.GEM_STATUS_OK
    assert lib.gem_wire_rsp_recall_bytes(frame) == lacks
