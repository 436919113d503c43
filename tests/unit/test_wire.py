"""The wire format: Gemini v1's byte layout, pinned by golden frames, plus round trips."""

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.core.wire import (
    MAX_NAME_LEN,
    MEM_FLAG_EVICT_ON_RELEASE,
    MEM_FLAG_UNIFIED_MEMORY,
    QUOTA_FLAG_ALONE,
    QUOTA_GPU_WAIT_NAME_MAX,
    QUOTA_RUN_NAME_MAX,
    REPORT_APPLIES_CUTS,
    REPORT_DELIVERY_NAME_MAX,
    REPORT_FEATURES_NAME_MAX,
    REQ_MSG_LEN,
    RSP_MSG_LEN,
    RUN_COUNT_MAX,
    RUN_GRAPHS,
    FrameReader,
    Request,
    RequestType,
    Response,
    Status,
    WireError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    quota_alias,
    quota_args,
    quota_run,
    run_word,
)


def v1_request(name: bytes, req_id: int, type_no: int, payload: bytes) -> bytes:
    """The frame exactly as the original's prepare_request builds it (spec §2.3)."""
    msg = struct.pack("<Q", len(name)) + name + b"\0" + struct.pack("<ii", req_id, type_no)
    return (msg + payload).ljust(80, b"\0")


def test_quota_request_matches_v1_bytes():
    req = Request("client1", 7, RequestType.QUOTA, (1.5, 20.0))
    assert encode_request(req) == v1_request(b"client1", 7, 0, struct.pack("<dd", 1.5, 20.0))


def test_a_quota_requests_wait_on_the_gpu_follows_the_v1_words():
    name = "n" * QUOTA_RUN_NAME_MAX
    frame = encode_request(Request(name, 7, RequestType.QUOTA, (1.5, 20.0, 12.5)))
    assert frame == v1_request(name.encode(), 7, 0, struct.pack("<ddd", 1.5, 20.0, 12.5))
    assert quota_args(decode_request(frame)) == (1.5, 20.0, 12.5)
    # From a peer that sends a name of up to QUOTA_GPU_WAIT_NAME_MAX bytes whole, too.
    whole = v1_request(b"n" * QUOTA_GPU_WAIT_NAME_MAX, 7, 0, struct.pack("<ddd", 1.5, 20.0, 12.5))
    assert quota_args(decode_request(whole)) == (1.5, 20.0, 12.5)
    # A v1 peer leaves it 0.
    v1 = v1_request(b"client1", 7, 0, struct.pack("<dd", 1.5, 20.0))
    assert quota_args(decode_request(v1)) == (1.5, 20.0, 0.0)


def test_a_peer_that_sends_a_longer_name_whole_says_no_wait_on_the_gpu():
    # (Our encoders send its alias instead, below; a v1 peer, or an older one of ours, sends
    # the name and what fits beside it.)
    name = b"n" * (QUOTA_GPU_WAIT_NAME_MAX + 1)
    frame = v1_request(name, 7, 0, struct.pack("<dd", 1.5, 20.0))
    assert quota_args(decode_request(frame)) == (1.5, 20.0, None)
    assert MAX_NAME_LEN - QUOTA_GPU_WAIT_NAME_MAX == 8


def test_a_quota_requests_run_follows_its_wait_on_the_gpu_where_the_name_leaves_room():
    name = "n" * QUOTA_RUN_NAME_MAX
    frame = encode_request(Request(name, 7, RequestType.QUOTA, (1.5, 20.0, 12.5, 30.25, 96)))
    assert frame == v1_request(name.encode(), 7, 0, struct.pack("<dddfI", 1.5, 20.0, 12.5,
                                                                  30.25, 96))
    req = decode_request(frame)
    assert quota_args(req) == (1.5, 20.0, 12.5)
    assert quota_run(req) == (30.25, 96, False)
    # A peer that sends a longer name whole sends the wait alone; a v1 peer's request
    # measured nothing.
    longer = v1_request(name.encode() + b"n", 7, 0, struct.pack("<ddd", 1.5, 20.0, 12.5))
    assert quota_args(decode_request(longer)) == (1.5, 20.0, 12.5)
    assert quota_run(decode_request(longer)) == (0.0, 0, False)
    v1 = v1_request(b"client1", 7, 0, struct.pack("<dd", 1.5, 20.0))
    assert quota_run(decode_request(v1)) == (0.0, 0, False)
    assert QUOTA_GPU_WAIT_NAME_MAX - QUOTA_RUN_NAME_MAX == 8


def test_a_names_alias_is_its_fnv1a_64_hash():
    # (the hash's published vectors)
    assert quota_alias("") == "#cbf29ce484222325"
    assert quota_alias("a") == "#af63dc4c8601ec8c"
    assert quota_alias("foobar") == "#85944171f73967e8"


@pytest.mark.parametrize("size", [QUOTA_RUN_NAME_MAX + 1, QUOTA_GPU_WAIT_NAME_MAX,
                                  QUOTA_GPU_WAIT_NAME_MAX + 1, MAX_NAME_LEN])
def test_beside_a_longer_name_a_quota_request_carries_its_alias_and_every_word(size):
    # (2-byte characters: the limits count bytes)
    name = "é" * (size // 2) + "n" * (size % 2)
    args = (0.5, 1.0, 2.0, 38.5, 56)
    frame = encode_request(Request(name, 7, RequestType.QUOTA, args))
    alias = quota_alias(name)
    assert frame == v1_request(alias.encode(), 7, 0, struct.pack("<dddfI", *args))
    req = decode_request(frame)
    assert req.name == alias
    assert (*quota_args(req), *quota_run(req)[:2]) == args
    # Its other requests carry the name itself.
    other = decode_request(encode_request(Request(name, 8, RequestType.MEM_LIMIT)))
    assert other.name == name


def test_a_run_counted_in_graph_launches_says_so_in_its_counts_top_bit():
    word = run_word(56, graphs=True)
    assert word == RUN_GRAPHS | 56 == 2**31 + 56
    req = decode_request(encode_request(Request("c", 7, RequestType.QUOTA,
                                                (0.0, 1.0, 2.0, 38.5, word))))
    assert quota_run(req) == (38.5, 56, True)
    assert run_word(2**40, graphs=False) == RUN_COUNT_MAX  # (held below the bit)
    assert run_word(2**40, graphs=True) == 2**32 - 1


def test_memory_update_matches_v1_bytes():
    req = Request("c", 3, RequestType.MEM_UPDATE, (1 << 30, 1))
    assert encode_request(req) == v1_request(b"c", 3, 2, struct.pack("<Qi", 1 << 30, 1))


def test_v1_responses_decode_with_ok_status():
    quota = struct.pack("<id", 9, 250.0).ljust(40, b"\0")
    assert decode_response(RequestType.QUOTA, quota) == Response(9, Status.OK, (250.0, 0, 0, 0.0))
    limit = struct.pack("<iQQ", 1, 5, 1 << 30).ljust(40, b"\0")
    assert decode_response(RequestType.MEM_LIMIT, limit).values == (5, 1 << 30, 0)


def test_a_quota_reply_says_when_it_was_granted_at_offset_20():
    rsp = Response(7, Status.OK, (25.0, QUOTA_FLAG_ALONE, 2, 1234.5678))
    frame = encode_response(RequestType.QUOTA, rsp)
    assert struct.unpack_from("<d", frame, 20) == (1234.5678,)
    assert decode_response(RequestType.QUOTA, frame) == rsp
    # A reply that leaves it out (the pod manager's to its hooks) says 0: not said.
    short = encode_response(RequestType.QUOTA, Response(7, Status.OK, (25.0, 0, 2)))
    assert decode_response(RequestType.QUOTA, short).values == (25.0, 0, 2, 0.0)


def test_mem_limit_flags_sit_at_offset_20():
    rsp = Response(1, Status.OK, (5, 1 << 30, MEM_FLAG_UNIFIED_MEMORY | MEM_FLAG_EVICT_ON_RELEASE))
    frame = encode_response(RequestType.MEM_LIMIT, rsp)
    assert struct.unpack_from("<Q", frame, 20) == (3,)
    assert frame[28:36] == bytes(8)
    assert decode_response(RequestType.MEM_LIMIT, frame) == rsp


def test_error_status_sits_in_the_last_four_bytes():
    frame = encode_response(RequestType.QUOTA, Response(4, Status.UNKNOWN_CLIENT))
    assert len(frame) == RSP_MSG_LEN
    assert struct.unpack_from("<i", frame, 36) == (Status.UNKNOWN_CLIENT,)


def test_longest_name_fits_and_one_more_is_refused():
    # (beside the largest payload of a request that carries the name itself, a HELLO's)
    name = "n" * MAX_NAME_LEN
    frame = encode_request(Request(name, 1, RequestType.HELLO, (b"p" * 16,)))
    assert len(frame) == REQ_MSG_LEN
    assert decode_request(frame).name == name
    for req_type, args in ((RequestType.HELLO, (b"p" * 16,)), (RequestType.QUOTA, (0.0, 0.0))):
        with pytest.raises(WireError, match="limit is 47"):
            encode_request(Request(name + "n", 1, req_type, args))


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"\0" * 79, "not 80"),
        (struct.pack("<Q", 0).ljust(80, b"\0"), "outside"),
        (struct.pack("<Q", 1 << 40).ljust(80, b"\0"), "outside"),
        (v1_request(b"abc", 1, 99, b""), "unknown request type 99"),
        ((struct.pack("<Q", 3) + b"abcX").ljust(80, b"\0"), "NUL"),
        (v1_request(b"\xff\xfe", 1, 0, b""), "UTF-8"),
    ],
)
def test_malformed_requests_raise_wire_error(frame, reason):
    with pytest.raises(WireError, match=reason):
        decode_request(frame)


names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=7
)  # (at most 28 bytes: they leave the QUOTA request room for all its words)
args_by_type = {
    RequestType.QUOTA: st.tuples(*[st.floats(allow_nan=False)] * 3,
                                 st.floats(allow_nan=False, width=32), st.integers(0, 2**32 - 1)),
    RequestType.MEM_LIMIT: st.just(()),
    RequestType.MEM_UPDATE: st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2)),
    RequestType.STATUS: st.just(()),
    RequestType.REPORT: st.tuples(
        st.integers(0, 2**64 - 1), st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
        st.floats(allow_nan=False, width=32), st.integers(0, 2**32 - 1),
    ),
    RequestType.PROCESS: st.tuples(st.integers(-(2**31), 2**31 - 1),
                                   st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**32 - 1)),
    RequestType.RECALL: st.tuples(st.integers(0, 2**64 - 1)),
}


@st.composite
def requests(draw):
    req_type = draw(st.sampled_from(list(args_by_type)))
    return Request(
        draw(names), draw(st.integers(-(2**31), 2**31 - 1)), req_type, draw(args_by_type[req_type])
    )


@given(requests())
def test_request_round_trip(req):
    assert decode_request(encode_request(req)) == req


@pytest.mark.parametrize("name_len", [1, 39, 40, 43, 44, 47])
def test_a_report_says_its_delivery_delay_and_features_beside_any_name(name_len):
    """Beside a name over 39 bytes it carries the name's alias, as a QUOTA request does: its
    words once had no room there (a lowered cap's grant was never cut, its hand-over came at
    its grant's end).  A v1 peer's report, or one that sends a longer name whole: not said, 0
    beside names of up to 43 and 39 bytes, left out beside longer ones."""
    name = "n" * name_len
    said = (5, 2, 1, 0.5, REPORT_APPLIES_CUTS)
    sent = decode_request(encode_request(Request(name, 1, RequestType.REPORT, said)))
    assert (REPORT_DELIVERY_NAME_MAX, REPORT_FEATURES_NAME_MAX) == (43, 39)
    assert sent.name == (name if name_len <= 39 else quota_alias(name))
    assert sent.args == said
    whole = v1_request(name.encode(), 1, 4, struct.pack("<Qii", 5, 2, 1))
    assert decode_request(whole).args == (5, 2, 1, 0.0, 0)[:5 if name_len <= 39 else
                                                          4 if name_len <= 43 else 3]


@given(st.binary(min_size=80, max_size=80))
def test_any_80_bytes_decode_or_raise_wire_error(frame):
    with contextlib.suppress(WireError):
        decode_request(frame)


@given(st.lists(st.binary(max_size=200), max_size=10))
def test_frame_reader_yields_exact_frames(chunks):
    reader = FrameReader(REQ_MSG_LEN)
    frames = [f for c in chunks for f in reader.feed(c)]
    data = b"".join(chunks)
    assert b"".join(frames) == data[: len(frames) * REQ_MSG_LEN]
    assert reader.pending == len(data) % REQ_MSG_LEN
