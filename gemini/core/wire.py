"""The wire protocol, byte for byte Gemini v1 (spec §2), plus new message types.

Requests are 80 bytes, responses 40 bytes, little-endian, unpadded:

    request  = u64 name_len | name | NUL | i32 req_id | i32 type | payload | zero fill
    response = i32 req_id | payload (32 bytes) | i32 status

`status` sits in the last four bytes of a response, which v1 always zero-filled, so v1 peers
read every reply of ours as before (status 0 = OK) and ignore the error codes we add.  New request
types take new numbers; the old three keep theirs.  A STATUS reply is followed by `body_len`
bytes of JSON.  An unsolicited message from a server carries a negative `req_id`, which says its
kind (a response frame has no type): NOTIFY_ID, scheduler -> pod manager a MEM_LIMIT reply (the
limit changed), pod manager -> hook a RECALL (give your unspent lease back); CUT_ID, either way a
QUOTA reply (the token you hold now ends sooner: a lowered cap).

Everything here is pure: bytes in, values out.  The C twin is csrc/include/gemini/wire.h.
"""

from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass

REQ_MSG_LEN = 80
RSP_MSG_LEN = 40
_HEAD = struct.Struct("<Q")  # name_len
_IDS = struct.Struct("<ii")  # req_id, type
_RSP_ID = struct.Struct("<i")
_RSP_STATUS = struct.Struct("<i")
RSP_STATUS_OFFSET = RSP_MSG_LEN - 4
# 8 (name_len) + 1 (NUL) + 8 (id, type) + 16 (largest payload) = 33 bytes around the name.
MAX_NAME_LEN = REQ_MSG_LEN - 33
MAX_BYTES = 2**64 - 1  # the most bytes a message carries (a u64: MEM_LIMIT's reply, REPORT)
NOTIFY_ID = -1
# A token cut short, unsolicited, in the QUOTA reply's layout: quota_ms is what is left of the
# token the receiver holds, from sent_at (the sender's clock, as in a grant).  Scheduler -> pod
# manager: the grant its client holds ends then (its cap was lowered: a grant made at the old
# cap ran on to its end, and a 1 s window of the new one held a 0.6 cap lowered to 0.3 at 0.15).
# Pod manager -> hook: so does the part of the token it handed the process.  Only to peers that
# say they apply it: a pod manager in its REPORT (REPORT_APPLIES_CUTS), a hook in its PROCESS
# (PROCESS_READS_CUTS).
CUT_ID = -2
MAX_STATUS_BODY = 1 << 20


class WireError(ValueError):
    """Bytes that are not a valid message; the connection that sent them is closed."""


class UnknownRequestType(WireError):
    """A well-formed request of a type this side does not know (a newer peer): refused by its
    id, the connection kept (frames are of one size, so the stream is still in step)."""

    def __init__(self, type_no: int, req_id: int) -> None:
        super().__init__(f"unknown request type {type_no}")
        self.req_id = req_id


class RequestType(enum.IntEnum):
    # hook -> pmgr, pmgr -> schd: overuse_ms, next_burst_ms[, gpu_wait_ms[, run_ms,
    # run_launches]] -> quota_ms, flags, sharers
    QUOTA = 0
    MEM_LIMIT = 1  # -> used_bytes, limit_bytes, flags (MEM_FLAG_*; v1 peers send/read 0)
    MEM_UPDATE = 2  # bytes, is_allocate (MEM_FREE/ALLOC/LEASE/CLAIM) -> verdict (1 ok, 0 refused)
    STATUS = 3  # tool -> schd: -> body_len + JSON body
    REPORT = 4  # pmgr -> schd: mem_used, processes, waiting -> ack
    HELLO = 5  # any -> server: shared-secret proof (16 bytes) -> ack
    # hook -> pmgr: the sender's pid, index[, features] -> count, pid, bytes of the client's
    # process at `index` (index < 0: only says who is on this connection; sent on every new
    # connection; features: PROCESS_READS_CUTS)
    PROCESS = 6
    # pmgr -> hook, unsolicited (req_id NOTIFY_ID): u64 bytes a neighbour lacks; give back your
    # unspent lease.  hook -> pmgr, the answer: u64 bytes given back (all it held unspent, maybe
    # 0) -> ack.
    RECALL = 7


# MEM_UPDATE's is_allocate.  v1 hooks send 0 and 1.  A lease is bytes a hook reserves ahead and
# spends locally: the pod manager grants it only if it fits now, while an allocation that does
# not fit may wait for neighbours to give their unspent leases back (RECALL).  A claim is bytes
# a process already holds on the GPU, said again to a pod manager it reached anew (one that
# restarted): always counted, over the limit too, since they are allocated whatever it says.
MEM_FREE = 0
MEM_ALLOC = 1
MEM_LEASE = 2
MEM_CLAIM = 3

# Bits of the QUOTA reply's flags word (frame offset 12; v1 peers send, and read, only the quota).
# ALONE: no other client of the token's group wanted the GPU when it was granted, and the
# client is not capped: running a little past the token's end costs no one anything, so a hook
# need not stop for a round trip there (csrc/hook/token.c).
QUOTA_FLAG_ALONE = 1 << 0
# CALIBRATION: a capped client's calibration grant (gemini.core.speed): the hook runs it through
# (no early hand-back at a sync), marks its queue often, and measures what ran in its last
# RUN_MEASURE_MS only, when the GPU's clock has settled under the continuous load.
QUOTA_FLAG_CALIBRATION = 1 << 1
# The QUOTA reply's third word (frame offset 16), pod manager -> hook: how many of the client's
# processes share its token now (those that wanted it within the last 0.5 s, by connection).
# Each bounds only its own queue, and the GPU drains theirs together, so a hook takes the
# client's queue to be that many times its own (csrc/hook/inflight.c).  0 (the scheduler, v1
# peers): not said, taken as 1.

# The QUOTA reply's fourth word (frame offset 20): when its sender sent it, on its
# CLOCK_MONOTONIC (s).  Scheduler -> pod manager: granted_at, when it made the grant.  A grant
# made at another's deadline reaches the pod manager 0.2-1 ms later (H200, 2026-12-04), and a
# token timed from its receipt then ran past the next holder's start by as much: the GPU
# time-slices the two contexts, and the first holder's last kernels finished ~2 ms late
# (bench/handovers.py).  The pod manager starts a token no later than the delivery the
# scheduler's hand-over waits for after granted_at, or, with --time-from-grant, at granted_at,
# where it is plausible on its own clock (one host: podmanager.token_start); its log says the
# delay either way.  Pod manager -> hook: sent_at, when it sent the reply; a hook gives up what
# a late one took past the usual hop (csrc/include/gemini/roundtrip.h, gem_roundtrip_late_ns).
# 0.0 (v1 peers): not said.

# The QUOTA request's third word (not in v1), hook -> pod manager -> scheduler: gpu_wait_ms, how
# long the client's launching threads waited on the GPU since its last request (held for a
# full queue, or in a sync).  A capped client is charged the GPU clock's speed-up only as far
# as the GPU set its pace (gemini.core.speed).  It fits the frame beside a name of up to
# QUOTA_GPU_WAIT_NAME_MAX bytes; a peer that sends a longer one whole leaves it out, and it
# reads None (not said).  v1 peers leave it 0.  (Our encoders send a longer name's alias
# instead: quota_alias.)
_QUOTA_GPU_WAIT = struct.Struct("<d")
QUOTA_GPU_WAIT_NAME_MAX = MAX_NAME_LEN - _QUOTA_GPU_WAIT.size
# Its fourth and fifth words (not in v1), hook -> pod manager -> scheduler: run_ms (f32) and
# run_launches (u32), the GPU time and the launches of the queue segments the hook measured
# running back to back in the token before the one this request hands back (whose queue may
# still run; in a calibration token, in its last RUN_MEASURE_MS only).  The
# GPU time per launch in a capped client's ordinary grants against that in its calibration
# grants says how much faster its kernels run paced than continuously (gemini.core.speed).
# Beside a name of up to QUOTA_RUN_NAME_MAX bytes, after gpu_wait_ms; 0 launches: none measured
# (v1 peers, and peers that send a longer name whole).  run_launches' top bit (RUN_GRAPHS): the
# count is of graph launches, for a program whose graph replays carry most of its GPU time (the
# GPU time is still every segment's; csrc/hook/inflight_measure.c says why); below it the
# count, at most RUN_COUNT_MAX.
_QUOTA_RUN = struct.Struct("<fI")
QUOTA_RUN_NAME_MAX = QUOTA_GPU_WAIT_NAME_MAX - _QUOTA_RUN.size
RUN_MEASURE_MS = 40
# Beside a longer name a QUOTA request names its client by an alias, so that every word fits:
# '#' and the 16 hex digits of the name's FNV-1a 64-bit hash (quota_alias).  No config name
# starts with '#', and the pod manager and the scheduler map it back (a pod manager or a
# scheduler from before 2026-12-05 refuses it: upgrade gem-schd, then gem-pmgr, then the hook).
# Without it a capped client of a long name was charged the GPU clock's speed-up in full, or
# read from the clock alone (gemini.core.speed).  Two of one GPU's few names share an alias
# with odds under 1e-15.  A REPORT beside a name longer than REPORT_FEATURES_NAME_MAX carries
# the same alias (report_name; a scheduler from before 2026-12-08 refuses it, as above).
QUOTA_ALIAS_LEN = 17
RUN_GRAPHS = 1 << 31
RUN_COUNT_MAX = RUN_GRAPHS - 1

# The REPORT's fourth word (not in v1), pod manager -> scheduler: delivery_ms (f32), how long
# the scheduler's grants took to reach the pod manager lately (the median of the recent ones,
# by the replies' granted_at on the pod manager's clock; its tokens trail the grants by no more:
# podmanager.token_start; 0: not known).  With gem-schd --hand-over-at-arrival the scheduler
# hands a holder's GPU on that much after its grant's end, when its hook's token ends.  Beside
# a name of up to REPORT_DELIVERY_NAME_MAX bytes (our encoders send a longer name's alias:
# report_name); peers that send a longer name whole leave it out, and v1 peers send 0: not
# known, the hand-over at the grant's end.
_REPORT_DELIVERY = struct.Struct("<f")
# The PROCESS request's third word (not in v1; our hooks before 2026-12-07 send 0): what the
# sending hook reads.  PROCESS_READS_CUTS: it applies a CUT_ID notice, and only such a hook is
# sent one (a v1 hook would take it for the reply to its next request, and every reply after
# it one behind; one of ours from before dropped the connection on it).
_PROCESS_FEATURES = struct.Struct("<I")
PROCESS_READS_CUTS = 1 << 0
# The REPORT's fifth word (not in v1; our pod managers before 2026-12-07 send 0), after
# delivery_ms, beside a name of up to REPORT_FEATURES_NAME_MAX bytes: what the pod manager does.
# REPORT_APPLIES_CUTS: it applies a CUT_ID to its token and its hooks, and only such a one's
# grants are cut (one from before ignored it, and its hooks ran on to the grant's end beside
# the next holder, uncharged).  A longer name sent whole leaves it out (ours send its alias:
# report_name): that client's grants are not cut.
_REPORT_FEATURES = struct.Struct("<I")
REPORT_APPLIES_CUTS = 1 << 0
# The longest delivery a scheduler's hand-over waits for; one said longer is taken as this
# (grants reached the pod managers 0.4-0.7 ms (p50) after they were made on the H200, p90 under
# 1), and a pod manager cuts a token that came later than what it said (podmanager.token_start).
DELIVERY_MAX_MS = 2.0

# Bits of the MEM_LIMIT reply's third word (payload offset 16, frame offset 20).
MEM_FLAG_UNIFIED_MEMORY = 1 << 0  # serve cuMemAlloc/cuMemAllocPitch as managed memory
MEM_FLAG_EVICT_ON_RELEASE = 1 << 1  # move it back to the host when a token ends


class Status(enum.IntEnum):
    OK = 0
    UNKNOWN_CLIENT = 1
    BAD_REQUEST = 2
    CLIENT_REMOVED = 3
    NOT_AUTHORIZED = 4


_REQ_PAYLOAD = {
    RequestType.QUOTA: struct.Struct("<dd"),  # + gpu_wait_ms where the name leaves room
    RequestType.MEM_LIMIT: struct.Struct(""),
    RequestType.MEM_UPDATE: struct.Struct("<Qi"),
    RequestType.STATUS: struct.Struct(""),
    RequestType.REPORT: struct.Struct("<Qii"),
    RequestType.HELLO: struct.Struct("<16s"),
    RequestType.PROCESS: struct.Struct("<ii"),
    RequestType.RECALL: struct.Struct("<Q"),
}
_RSP_PAYLOAD = {
    RequestType.QUOTA: struct.Struct("<dIId"),
    RequestType.MEM_LIMIT: struct.Struct("<QQQ"),
    RequestType.MEM_UPDATE: struct.Struct("<i"),
    RequestType.STATUS: struct.Struct("<Q"),
    RequestType.REPORT: struct.Struct(""),
    RequestType.HELLO: struct.Struct(""),
    RequestType.PROCESS: struct.Struct("<iiQ"),
    RequestType.RECALL: struct.Struct("<Q"),
}
_RSP_ZEROS = {t: layout.unpack(bytes(layout.size)) for t, layout in _RSP_PAYLOAD.items()}
# (MAX_NAME_LEN leaves room for 16 bytes of payload, a REPORT's own words.)
REPORT_DELIVERY_NAME_MAX = MAX_NAME_LEN - _REPORT_DELIVERY.size
REPORT_FEATURES_NAME_MAX = REPORT_DELIVERY_NAME_MAX - _REPORT_FEATURES.size


@dataclass(frozen=True)
class Request:
    name: str
    req_id: int
    type: RequestType
    args: tuple[float | int | bytes, ...] = ()


@dataclass(frozen=True)
class Response:
    req_id: int
    status: Status
    values: tuple[float | int, ...] = ()


def check_name(name: str) -> bytes:
    raw = name.encode()
    if not raw:
        raise WireError("client name is empty")
    if len(raw) > MAX_NAME_LEN:
        raise WireError(f"client name {name!r} is {len(raw)} bytes; the limit is {MAX_NAME_LEN}")
    if b"\0" in raw:
        raise WireError(f"client name {name!r} contains a NUL byte")
    return raw


def quota_args(req: Request) -> tuple[float, float, float | None]:
    """A QUOTA request's overuse_ms, burst_ms and gpu_wait_ms (None: not said).  A burst or an
    overuse that is not a finite number is none said (0): the adaptive quota follows each
    burst from the last, and one NaN made it NaN for good; an infinite overuse was charged as
    a whole window, and held a capped client back for 20 s."""
    overuse, burst, *rest = req.args
    gpu_wait = float(rest[0]) if rest and rest[0] is not None else None  # type: ignore[arg-type]
    burst_ms, overuse_ms = float(burst), float(overuse)  # type: ignore[arg-type]
    return (overuse_ms if math.isfinite(overuse_ms) else 0.0,
            burst_ms if math.isfinite(burst_ms) else 0.0, gpu_wait)


def quota_run(req: Request) -> tuple[float, int, bool]:
    """A QUOTA request's run: its GPU time (ms), its count, and whether that counts graph
    launches (RUN_GRAPHS) or launches ((0.0, 0, False): none measured, or not said)."""
    rest = req.args[3:]
    if len(rest) < 2:
        return 0.0, 0, False
    word = int(rest[1])  # type: ignore[arg-type]
    return float(rest[0]), word & RUN_COUNT_MAX, bool(word & RUN_GRAPHS)  # type: ignore[arg-type]


def run_word(count: int, graphs: bool) -> int:
    """The run_launches word for `count` launches, or graph launches."""
    return min(max(count, 0), RUN_COUNT_MAX) | (RUN_GRAPHS if graphs else 0)


def quota_alias(name: str) -> str:
    """The name a QUOTA request carries for a client whose own is longer than
    QUOTA_RUN_NAME_MAX bytes (QUOTA_ALIAS_LEN above says why)."""
    h = 0xCBF29CE484222325  # FNV-1a 64
    for byte in name.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"#{h:016x}"


def quota_name(name: str) -> str:
    """What a QUOTA request of this client carries for its name: itself, or its alias."""
    return name if _run_fits(name.encode()) else quota_alias(name)


def report_name(name: str) -> str:
    """What a REPORT of this client carries for its name: itself, or its alias (beside a name
    over REPORT_FEATURES_NAME_MAX bytes its delivery_ms and features had no room, and its
    grants were handed on at their end and never cut: a lowered cap ran on to its end)."""
    return name if _report_features_fit(name.encode()) else quota_alias(name)


def said_name(name: str) -> str:
    """A request's name for a log line: an alias that no client's name gave back says so."""
    if name.startswith("#") and len(name.encode()) == QUOTA_ALIAS_LEN:
        return f"{name} (a request's alias of a name over {QUOTA_RUN_NAME_MAX} bytes)"
    return name


def _gpu_wait_fits(raw_name: bytes) -> bool:
    return len(raw_name) <= QUOTA_GPU_WAIT_NAME_MAX


def _run_fits(raw_name: bytes) -> bool:
    return len(raw_name) <= QUOTA_RUN_NAME_MAX


def _delivery_fits(raw_name: bytes) -> bool:
    return len(raw_name) <= REPORT_DELIVERY_NAME_MAX


def _report_features_fit(raw_name: bytes) -> bool:
    return len(raw_name) <= REPORT_FEATURES_NAME_MAX


def encode_request(req: Request) -> bytes:
    """A QUOTA request's args: (overuse_ms, burst_ms[, gpu_wait_ms[, run_ms, run_launches]]),
    gpu_wait_ms None not sent.  A REPORT's: (mem_used, processes, waiting[, delivery_ms[,
    features]]).  Beside a long name either carries its alias (quota_name, report_name)."""
    raw = check_name(req.name)
    args = req.args
    extra = b""
    if req.type == RequestType.REPORT:
        raw = report_name(req.name).encode()
        args, rest = args[:3], args[3:]
        if rest:
            extra = _REPORT_DELIVERY.pack(rest[0])
            if len(rest) > 1:
                extra += _REPORT_FEATURES.pack(rest[1])
    if req.type == RequestType.PROCESS:
        args, rest = args[:2], args[2:]
        extra = _PROCESS_FEATURES.pack(rest[0] if rest else 0)
    if req.type == RequestType.QUOTA:
        raw = quota_name(req.name).encode()
        args, rest = args[:2], args[2:]
        if rest and rest[0] is not None:
            extra = _QUOTA_GPU_WAIT.pack(rest[0])
            if len(rest) >= 3:
                extra += _QUOTA_RUN.pack(rest[1], rest[2])
    payload = _REQ_PAYLOAD[req.type].pack(*args) + extra
    msg = _HEAD.pack(len(raw)) + raw + b"\0" + _IDS.pack(req.req_id, int(req.type)) + payload
    return msg.ljust(REQ_MSG_LEN, b"\0")


def decode_request(msg: bytes) -> Request:
    if len(msg) != REQ_MSG_LEN:
        raise WireError(f"request is {len(msg)} bytes, not {REQ_MSG_LEN}")
    (name_len,) = _HEAD.unpack_from(msg)
    if not 0 < name_len <= MAX_NAME_LEN:
        raise WireError(f"name length {name_len} is outside 1..{MAX_NAME_LEN}")
    end = 8 + name_len
    if msg[end] != 0:
        raise WireError("client name is not NUL-terminated")
    try:
        name = msg[8:end].decode()
    except UnicodeDecodeError as exc:
        raise WireError("client name is not UTF-8") from exc
    req_id, type_no = _IDS.unpack_from(msg, end + 1)
    try:
        req_type = RequestType(type_no)
    except ValueError as exc:
        raise UnknownRequestType(type_no, req_id) from exc
    layout = _REQ_PAYLOAD[req_type]
    args = layout.unpack_from(msg, end + 9)
    if req_type == RequestType.QUOTA and _gpu_wait_fits(msg[8:end]):
        args += _QUOTA_GPU_WAIT.unpack_from(msg, end + 9 + layout.size)
        if _run_fits(msg[8:end]):
            args += _QUOTA_RUN.unpack_from(msg, end + 9 + layout.size + _QUOTA_GPU_WAIT.size)
    if req_type == RequestType.REPORT and _delivery_fits(msg[8:end]):
        args += _REPORT_DELIVERY.unpack_from(msg, end + 9 + layout.size)
        if _report_features_fit(msg[8:end]):
            args += _REPORT_FEATURES.unpack_from(msg, end + 9 + layout.size + _REPORT_DELIVERY.size)
    if req_type == RequestType.PROCESS:  # (fits beside any name)
        args += _PROCESS_FEATURES.unpack_from(msg, end + 9 + layout.size)
    return Request(name, req_id, req_type, tuple(args))


def encode_response(req_type: RequestType, rsp: Response) -> bytes:
    """Encode a reply; the payload's words that `rsp.values` leaves out at its end are 0
    (not said), as a v1 peer sends them."""
    layout = _RSP_PAYLOAD[req_type]
    payload = layout.pack(*rsp.values, *_RSP_ZEROS[req_type][len(rsp.values):]) \
        if rsp.values else b""
    msg = bytearray(RSP_MSG_LEN)
    _RSP_ID.pack_into(msg, 0, rsp.req_id)
    msg[4 : 4 + len(payload)] = payload
    _RSP_STATUS.pack_into(msg, RSP_STATUS_OFFSET, int(rsp.status))
    return bytes(msg)


def encode_refusal(req_id: int, status: Status) -> bytes:
    """A reply that says only its status (no payload), to a request of any type."""
    return encode_response(RequestType.QUOTA, Response(req_id, status))


def decode_response(req_type: RequestType, msg: bytes) -> Response:
    """Decode a reply to a request of `req_type` (v1 replies carry no type of their own)."""
    if len(msg) != RSP_MSG_LEN:
        raise WireError(f"response is {len(msg)} bytes, not {RSP_MSG_LEN}")
    (req_id,) = _RSP_ID.unpack_from(msg)
    (status_no,) = _RSP_STATUS.unpack_from(msg, RSP_STATUS_OFFSET)
    try:
        status = Status(status_no)
    except ValueError as exc:
        raise WireError(f"unknown response status {status_no}") from exc
    values = _RSP_PAYLOAD[req_type].unpack_from(msg, 4)
    return Response(req_id, status, tuple(values))


class FrameReader:
    """Splits a byte stream into fixed-size frames; partial input waits for the rest."""

    def __init__(self, frame_len: int) -> None:
        self.frame_len = frame_len
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Take `data` in; every whole frame now in."""
        self.push(data)
        return list(iter(self.pop, None))

    def push(self, data: bytes) -> None:
        self._buf += data

    def pop(self) -> bytes | None:
        """The next whole frame, or None until one is in (for a reader that may stop between
        frames: a connection closing, replies that must wait)."""
        if len(self._buf) < self.frame_len:
            return None
        frame = bytes(self._buf[: self.frame_len])
        del self._buf[: self.frame_len]
        return frame

    def clear(self) -> None:
        self._buf.clear()

    @property
    def pending(self) -> int:
        return len(self._buf)
