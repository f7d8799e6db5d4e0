"""spine endpoints from Python: the client side of the shared region an adapter hands
out (a memfd with a header, four AF_XDP-layout rings and a buffer area of fixed-size
frames), and the SCM_RIGHTS hand-over of its fds.

Pure Python over ``mmap``; the layout is the one in crates/spine-endpoint/src/layout.rs
and clients/c/spine_endpoint.c. Index words are written after the data they publish and
read before the data they cover, which x86-64's store order makes sufficient; on other
architectures use the C library (clients/c) through ctypes. Everything read from the
region is checked: an adapter cannot make this module read or write outside it.
"""

import mmap
import os
import socket
import struct

MAGIC = 0x50455053
VERSION = 2
HEADER_BYTES = 4096
CONSUMER_OFF = 64
ENTRIES_OFF = 128
# Messages this long or shorter travel inline: each transmit/receive ring entry has its own
# 64-byte slot (after the entries, at the same index); a descriptor with option
# DESC_INLINE (addr 0) carries its payload there instead of in a frame.
INLINE_BYTES = 64
DESC_INLINE = 1
# Multi-buffer frames (receive ring only, options exactly this): AF_XDP's XDP_PKT_CONTD,
# at bit 7 here (bit 0 is DESC_INLINE). On an endpoint opened with ``multi_buffer=True``
# a frame longer than one area frame arrives as several descriptors, every one but the
# last marked; the adapter posts them together. ``recv_frame`` gathers them;
# ``recv_marked`` returns them one by one with ``last_more`` set on all but the last.
DESC_CONTD = 128
# An active message (docs/ARCHITECTURE.md, "Active messages"): option bit 1, the handler
# number in bits 8..16 and, on the receive ring, the source (the sending extension's id)
# in bits 16..32 (on the transmit ring there: the one extension to run it, its id + 1, or
# 0 for every extension of the domain; see send_message's ``ext``); at most MSG_MAX
# bytes, inline or in a frame.
DESC_MESSAGE = 2
MSG_MAX = 240
# A bulk active message (with DESC_MESSAGE): no payload but a reference to ``len`` bytes
# (at least 1) at offset ``addr`` of the endpoint's buffer area, any frames. Sent with
# ``Endpoint.send_bulk_message``; received from an extension (``spine_msg_send_bulk``,
# bytes it wrote there with ``spine_msg_bulk_write``) by ``recv_marked``, which checks
# the reference against the area. The area stays the application's: reserve the region
# with ``Endpoint.reserve_area`` first, so that the adapter never receives into it.
DESC_BULK = 16
# A grant (transmit ring, options exactly this): lends ``len`` bytes at offset ``addr`` of
# the area to the adapter for one bulk message from another adapter over a tunnel, which
# arrives through ``recv_marked`` as a bulk message in that region (then the
# application's again). At most GRANTS outstanding. See ``Endpoint.grant_area``.
DESC_GRANT = 32
GRANTS = 8
# With DESC_MESSAGE | DESC_BULK on the transmit ring: the referenced bytes go to another
# adapter over the endpoint's tunnel port, in pieces the adapter reads out, for the
# endpoint whose id is in bits 16..32 over there, or its handlers with
# REMOTE_HANDLERS. See ``Endpoint.send_bulk_remote``.
DESC_REMOTE = 64
REMOTE_HANDLERS = 0xFFFF
# The largest bulk message a tunnel carries.
REMOTE_BULK_MAX = 16384
# Active messages between adapters (crates/spine-endpoint/src/remote.rs): one message per
# Ethernet frame of this ethertype, sent through an endpoint on a tunnel port; the
# adapter at the other end runs its handlers (to = REMOTE_TO_HANDLERS) or delivers the
# payload to its endpoint `to`.
REMOTE_ETHERTYPE = 0x88B6
REMOTE_TO_HANDLERS = 0xFFFFFFFF
REMOTE_HEADER_LEN = 28
_REMOTE = struct.Struct(">6s6sH2sBBIIH")


def remote_frame(handler, to, sender, payload):
    """The frame of an active message for the adapter at the other end of a tunnel:
    for its ``handler`` (0..255), to its handlers or its endpoint ``to``, from
    ``sender`` (this endpoint's ``.id``: replies come back to it), carrying ``payload``
    (at most MSG_MAX bytes). Send it with ``Endpoint.send`` on an endpoint of the
    tunnel port."""
    if not 0 <= handler <= 255:
        raise ValueError("handler outside 0..255")
    if len(payload) > MSG_MAX:
        raise ValueError(f"message longer than {MSG_MAX} bytes")
    head = _REMOTE.pack(b"\xff" * 6, bytes(6), REMOTE_ETHERTYPE, b"SM", 1, handler,
                        to & 0xFFFFFFFF, sender & 0xFFFFFFFF, len(payload))
    return head + bytes(payload)


def parse_remote(frame):
    """``(handler, to, sender, payload)`` of a remote message frame; ValueError for a
    frame that is none (wrong ethertype, magic or version; a length past its end)."""
    if len(frame) < REMOTE_HEADER_LEN:
        raise ValueError("shorter than a remote message header")
    _, _, ethertype, magic, version, handler, to, sender, n = _REMOTE.unpack_from(frame)
    if ethertype != REMOTE_ETHERTYPE or magic != b"SM" or version != 1:
        raise ValueError("not a remote message frame")
    if n > MSG_MAX or REMOTE_HEADER_LEN + n > len(frame):
        raise ValueError("remote message length past the frame")
    return handler, to, sender, bytes(frame[REMOTE_HEADER_LEN:REMOTE_HEADER_LEN + n])


def _target(ext):
    """Bits 16..32 of a message's options on the transmit ring: 0 for every extension
    of the domain registering the handler, else extension ``ext``'s id + 1."""
    if ext is None:
        return 0
    if not 0 <= ext < 0xFFFF:
        raise ValueError("extension id outside 0..0xfffe")
    return (ext + 1) << 16


def _round_up(v, to):
    return (v + to - 1) // to * to


def _pow2_in(v, lo, hi):
    return lo <= v <= hi and v & (v - 1) == 0


class _Ring:
    def __init__(self, mem, base, entries, entry_bytes, producer):
        self.mem, self.base, self.entries = mem, base, entries
        self.entry_bytes, self.producer, self.local = entry_bytes, producer, 0
        self.inline_base = base + _round_up(ENTRIES_OFF + entries * 16, 64)

    def ready(self):
        """Producer: free slots; consumer: entries ready; None if the other side's index
        is impossible."""
        other_at = self.base + (CONSUMER_OFF if self.producer else 0)
        (other,) = struct.unpack_from("<I", self.mem, other_at)
        if self.producer:
            used = (self.local - other) & 0xFFFFFFFF
            return self.entries - used if used <= self.entries else None
        n = (other - self.local) & 0xFFFFFFFF
        return n if n <= self.entries else None

    def slot(self):
        idx = self.local & (self.entries - 1)
        return self.base + ENTRIES_OFF + idx * self.entry_bytes

    def inline_slot(self):
        return self.inline_base + (self.local & (self.entries - 1)) * INLINE_BYTES

    def advance(self):
        self.local = (self.local + 1) & 0xFFFFFFFF
        own_at = self.base + (0 if self.producer else CONSUMER_OFF)
        struct.pack_into("<I", self.mem, own_at, self.local)


class Endpoint:
    """An open endpoint. ``send`` copies a message into a free frame and posts it;
    ``recv`` copies one received message out and gives its frame back."""

    def __init__(self, memfd, wake_fd=None):
        size = os.fstat(memfd).st_size
        if size < HEADER_BYTES:
            raise ValueError("not an endpoint region: too small")
        self.mem = mmap.mmap(memfd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        magic, version, entries, frame_size, frames = struct.unpack_from("<5I", self.mem, 0)
        ring_bytes = _round_up(ENTRIES_OFF + entries * 16, 64) + entries * INLINE_BYTES
        area = _round_up(HEADER_BYTES + 4 * ring_bytes, 4096)
        if (
            magic != MAGIC
            or version != VERSION
            or not _pow2_in(entries, 2, 1 << 16)
            or not _pow2_in(frame_size, 64, 1 << 16)
            or frames == 0
            or frames * frame_size > 1 << 31
            or area + frames * frame_size > size
        ):
            self.mem.close()
            raise ValueError("not an endpoint region (header or size)")
        self.frame_size, self.frames, self.area = frame_size, frames, area
        rb = HEADER_BYTES
        self.tx = _Ring(self.mem, rb, entries, 16, True)
        self.rx = _Ring(self.mem, rb + ring_bytes, entries, 16, False)
        self.fill = _Ring(self.mem, rb + 2 * ring_bytes, entries, 8, True)
        self.comp = _Ring(self.mem, rb + 3 * ring_bytes, entries, 8, False)
        self.free = [f * frame_size for f in range(frames)]
        self.wake_fd = wake_fd
        # The connection the fds came over, when ``connect`` opened it.
        self.conn = None
        self.last_bulk = None
        self.last_more = False
        for _ in range(max(frames // 2, 1)):
            self._refill_one()

    def _refill_one(self):
        if not self.free or not self.fill.ready():
            return False
        struct.pack_into("<Q", self.mem, self.fill.slot(), self.free.pop())
        self.fill.advance()
        return True

    def _reclaim(self):
        for _ in range(self.comp.ready() or 0):
            (addr,) = struct.unpack_from("<Q", self.mem, self.comp.slot())
            self.comp.advance()
            addr -= addr % self.frame_size
            if addr < self.frames * self.frame_size and len(self.free) < self.frames:
                self.free.append(addr)

    def send(self, data):
        """True: sent; False: no frame or transmit slot free now (retry later)."""
        return self._send(data, 0)

    def send_message(self, handler, data, ext=None):
        """Sends an active message for ``handler`` (0..255) of the extensions in the
        endpoint's domain, carrying ``data`` (at most MSG_MAX bytes); with ``ext`` (an
        extension id, from ``extension``), for that one extension only. True: sent;
        False: no room now."""
        if not 0 <= handler <= 255:
            raise ValueError("handler outside 0..255")
        if len(data) > MSG_MAX:
            raise ValueError(f"message longer than {MSG_MAX} bytes")
        return self._send(data, DESC_MESSAGE | handler << 8 | _target(ext))

    def _send(self, data, extra):
        if len(data) > self.frame_size:
            raise ValueError("message longer than a frame")
        self._reclaim()
        if not self.tx.ready():
            return False
        if len(data) <= INLINE_BYTES:
            addr, options, at = 0, DESC_INLINE | extra, self.tx.inline_slot()
        else:
            if not self.free:
                return False
            addr = self.free.pop()
            options, at = extra, self.area + addr
        self.mem[at : at + len(data)] = data
        struct.pack_into("<QII", self.mem, self.tx.slot(), addr, len(data), options)
        self.tx.advance()
        return True

    def reserve_area(self, frames):
        """Takes ``frames`` consecutive frames this side holds (none on the fill ring or in
        flight) out of the module's own use, for bulk data; returns the area offset of the
        first, or None when no such run is free now. They stay the application's (the
        adapter never receives into them) until ``release_area``."""
        self._reclaim()
        fs, n = self.frame_size, max(frames, 1)
        held = set(self.free)
        for first in sorted(held):
            if all(first + i * fs in held for i in range(n)):
                run = range(first, first + n * fs, fs)
                self.free = [a for a in self.free if a not in run]
                return first
        return None

    def release_area(self, off, frames):
        """Gives ``frames`` frames from ``off`` (a ``reserve_area`` result) back."""
        fs = self.frame_size
        for a in range(off, off + max(frames, 1) * fs, fs):
            if a < self.frames * fs and a % fs == 0 and len(self.free) < self.frames:
                self.free.append(a)

    def write_area(self, off, data):
        """Copies ``data`` to offset ``off`` of the buffer area; ValueError when it does
        not fit inside the area."""
        if off < 0 or off + len(data) > self.frames * self.frame_size:
            raise ValueError("outside the buffer area")
        self.mem[self.area + off : self.area + off + len(data)] = data

    def send_bulk_message(self, handler, off, length, ext=None):
        """Sends a bulk active message for ``handler``: a reference to ``length`` bytes at
        offset ``off`` of the buffer area (keep them unchanged until the handler has
        answered). The adapter checks it (a bad reference is counted ``bad_desc``).
        ``ext`` as for ``send_message``. True: sent; False: no transmit slot free now."""
        if not 0 <= handler <= 255:
            raise ValueError("handler outside 0..255")
        target = _target(ext)
        if not self.tx.ready():
            return False
        options = DESC_MESSAGE | DESC_BULK | handler << 8 | target
        struct.pack_into("<QII", self.mem, self.tx.slot(), off, length, options)
        self.tx.advance()
        return True

    def send_bulk_remote(self, dest, handler, off, length):
        """Sends a bulk active message to another adapter over the tunnel port this
        endpoint is bound to: ``length`` bytes (1..REMOTE_BULK_MAX) at offset ``off`` of
        the buffer area, which the adapter reads out and sends in pieces, for ``handler``
        of endpoint ``dest`` over there (REMOTE_HANDLERS: its handlers), from this
        endpoint's id (keep the bytes unchanged until the descriptor is taken). The
        adapter checks it. True: sent; False: no transmit slot free now."""
        if not 0 <= handler <= 255 or not 0 <= dest <= 0xFFFF:
            raise ValueError("handler outside 0..255 or dest outside 0..65535")
        options = DESC_MESSAGE | DESC_BULK | DESC_REMOTE | handler << 8 | dest << 16
        return self._post_tx(off, length, options)

    def grant_area(self, off, length):
        """Lends ``length`` bytes at offset ``off`` of the buffer area (reserve them with
        ``reserve_area`` first) to the adapter for one bulk message from another adapter
        (DESC_GRANT); it arrives through ``recv_marked``. True: sent; False: no transmit
        slot free now."""
        return self._post_tx(off, length, DESC_GRANT)

    def _post_tx(self, addr, length, options):
        if not self.tx.ready():
            return False
        struct.pack_into("<QII", self.mem, self.tx.slot(), addr, length, options)
        self.tx.advance()
        return True

    def recv(self):
        """One received message as bytes (an active message's payload too), or None
        when none is ready. A descriptor the adapter wrote outside the area or across
        frames raises ValueError (skipped)."""
        got = self.recv_marked()
        return None if got is None else got[0]

    def recv_marked(self):
        """As ``recv``, as ``(bytes, mark)``: ``mark`` is ``(handler, source)`` for an
        active message, None for a frame. A bulk message an extension sent comes as the
        bytes of the area region it refers to (copied; the region stays the
        application's, see ``reserve_area``); ``last_bulk`` then holds its area offset,
        and None after any other message. A reference outside the area raises ValueError
        (skipped)."""
        return self._recv()

    def _recv(self):
        if not self.rx.ready():
            return None
        addr, length, options = struct.unpack_from("<QII", self.mem, self.rx.slot())
        mark = None
        self.last_bulk = None
        self.last_more = options == DESC_CONTD
        if self.last_more:
            options = 0
        if options & 0xFF == DESC_MESSAGE | DESC_BULK:
            # A bulk message an extension wrote into the area: nothing goes back on the
            # fill ring (the region is this side's).
            self.rx.advance()
            if length == 0 or addr + length > self.frames * self.frame_size:
                raise ValueError("bulk reference outside the buffer area")
            at = self.area + addr
            self.last_bulk = addr
            return bytes(self.mem[at : at + length]), ((options >> 8) & 0xFF, options >> 16)
        if options & DESC_MESSAGE:
            if options & 0xFC or length > MSG_MAX:
                self.rx.advance()
                raise ValueError("impossible message descriptor from the adapter")
            mark = ((options >> 8) & 0xFF, options >> 16)
            options &= DESC_INLINE
        if options == DESC_INLINE:
            # The slot is the adapter's again once the index moves: copy first.
            at = self.rx.inline_slot()
            msg = bytes(self.mem[at : at + min(length, INLINE_BYTES)])
            self.rx.advance()
            if addr != 0 or length > INLINE_BYTES:
                raise ValueError("impossible inline descriptor from the adapter")
            return msg, mark
        self.rx.advance()
        fs = self.frame_size
        if (
            options != 0
            or addr >= self.frames * fs
            or length > fs
            or (length and (addr + length - 1) // fs != addr // fs)
        ):
            raise ValueError("impossible descriptor from the adapter")
        at = self.area + addr
        msg = bytes(self.mem[at : at + length])
        if len(self.free) < self.frames:
            self.free.append(addr - addr % fs)
        self._refill_one()
        return msg, mark

    def recv_frame(self):
        """As ``recv``, a multi-buffer frame's pieces (DESC_CONTD) gathered into one
        bytes object; None when none is ready. A frame whose last piece is missing raises
        ValueError."""
        got = self._recv()
        if got is None:
            return None
        parts = [got[0]]
        while self.last_more:
            piece = self._recv()
            if piece is None:
                raise ValueError("a multi-buffer frame without its last piece")
            parts.append(piece[0])
        return b"".join(parts)

    def wait(self, timeout):
        """Sleeps on the eventfd up to ``timeout`` seconds (without one, returns)."""
        if self.wake_fd is None:
            return
        import select

        r, _, _ = select.select([self.wake_fd], [], [], timeout)
        if r:
            os.read(self.wake_fd, 8)

    def close(self):
        self.mem.close()
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def recv_fds(sock, max_fds=4):
    """The fds sent with SCM_RIGHTS over the Unix socket ``sock`` (region, eventfd)."""
    _, fds, _, _ = socket.recv_fds(sock, 1, max_fds)
    if not fds:
        raise ValueError("no fds in the message")
    return fds


def connect(path):
    """Opens the endpoint whose fds the adapter sends on the Unix socket at ``path``. The
    endpoint keeps the connection open until ``close``: the adapter reclaims an endpoint
    once its connection is closed (the process exited or was killed)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        fds = recv_fds(s)
    except BaseException:
        s.close()
        raise
    ep = Endpoint(fds[0], fds[1] if len(fds) > 1 else None)
    ep.conn = s
    return ep


class Refused(Exception):
    """The adapter refused an endpoint request: ``kind`` is stable (``no_port``,
    ``bad_tag``, ``too_many``, ``tag_taken``, ``bad_size``, ``bad_json``, ...), ``message``
    names what was wrong."""

    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


def endpoint_socket(control):
    """The endpoint socket of the adapter whose control socket is ``control``."""
    return control if control.endswith(".ep") else control + ".ep"


def _ask(control, req):
    """Sends one request line to the endpoint socket; returns the socket and the
    answer (Refused when it is an error)."""
    import json

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(endpoint_socket(control))
        s.sendall(json.dumps(req).encode() + b"\n")
        # The answer line a byte at a time: fds, if any, ride on the byte after it.
        line = bytearray()
        while True:
            b = s.recv(1)
            if not b:
                raise ConnectionError("the adapter closed the endpoint socket")
            if b == b"\n":
                break
            line += b
        answer = json.loads(line)
        if "error" in answer:
            raise Refused(answer["error"]["kind"], answer["error"]["message"])
    except BaseException:
        s.close()
        raise
    return s, answer


def extension(control, name):
    """``{"id", "name", "domain"}`` of the loaded extension ``name`` of the adapter whose
    control socket is ``control`` (Refused ``no_extension`` when there is none): its id
    addresses that one extension's handlers (``send_message(..., ext=id)``)."""
    s, answer = _ask(control, {"extension": {"name": name}})
    s.close()
    return answer["extension"]


def open_on(control, port, ethertype=None, ip_proto=None, dst_port=None, vlan=None,
            ring_entries=None, frame_size=None, frames=None, domain=None, multi_buffer=False):
    """Asks the running adapter whose control socket is ``control`` for an endpoint on
    ``port`` receiving the frames that match every field given (docs/API.md,
    "Endpoints"), its active messages run by the handlers of ``domain`` (default:
    the adapter's ``default``). With ``multi_buffer`` a frame longer than one area frame
    arrives in pieces (read it with ``Endpoint.recv_frame``). Returns the Endpoint (its adapter id in ``.id``); raises Refused when
    the adapter says no. The endpoint lives until ``close`` or the process ends."""
    match = {k: v for k, v in (("ethertype", ethertype), ("ip_proto", ip_proto),
                               ("dst_port", dst_port), ("vlan", vlan)) if v is not None}
    req = {"port": port, "match": match}
    for k, v in (("ring_entries", ring_entries), ("frame_size", frame_size), ("frames", frames),
                 ("domain", domain)):
        if v is not None:
            req[k] = v
    if multi_buffer:
        req["multi_buffer"] = True
    s, answer = _ask(control, req)
    try:
        fds = recv_fds(s)
    except BaseException:
        s.close()
        raise
    ep = Endpoint(fds[0], fds[1] if len(fds) > 1 else None)
    ep.conn = s
    ep.id = answer["endpoint"]["id"]
    return ep
