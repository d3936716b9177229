"""A gRPC server on the h2 library (HTTP/2 over plain TCP with prior
knowledge, or TLS with ALPN "h2"): herd_env.serve's --grpc-impl h2.

grpcio's Python server spends ~100 us of CPU per message of a
bidirectional stream; this one serves the same servicer objects
(EnvServicer, ParallelEnvServicer: their Describe and Session methods, so
the session logic is serve.py's alone) at a fraction of it. It implements
what herd's Go client needs of gRPC: unary calls and bidirectional
streams, length-prefixed uncompressed messages, status in trailers,
several concurrent streams per connection (each RPC in its own thread, so
slow envs of different sessions overlap), cancellation (RST_STREAM, a
closed connection), flow control both ways, a message size limit, a limit
on concurrent RPCs (RESOURCE_EXHAUSTED past it) and a graceful stop.

Where the time goes, and what is done about it:
- h2 handles the connection's state: preface, SETTINGS, HEADERS and
  CONTINUATION (HPACK), RST_STREAM, GOAWAY, stream states. The three
  frames every message brings (DATA, and gRPC-Go's BDP PING and the
  WINDOW_UPDATE it sends before it) are parsed here, from the read buffer,
  and DATA, PING ACK and WINDOW_UPDATE are written here too: through h2
  they cost ~30 us of Python per message (a frame object each, a state
  machine step each, a repr for a trace log). So the flow-control windows
  both ways are counted here; h2 sees a DATA frame only as an empty one
  with END_STREAM, for its stream states.
- No reader thread to hand messages to: a thread that waits for its
  stream's next message reads the socket itself when no other thread is
  reading (leader/followers), and hands the reading on when its message
  has come; frames for other streams go to their queues. A per-connection
  thread reads only when nobody has for FALLBACK_S (new streams, PINGs and
  WINDOW_UPDATEs while every session steps its envs), so a message costs
  one wake-up (the socket's) instead of three.
- Large windows granted, acknowledged every ACK_EVERY bytes; one sendall
  per response; TCP_NODELAY.

Threads: per RPC one handler thread; per connection the fallback reader.
The h2 state machine, the windows and socket writes are guarded by the
connection's lock.
"""

import socket
import ssl
import struct
import threading
from queue import SimpleQueue

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

# Windows we grant the peer: large, and acknowledged in batches, so a
# stream of small messages costs no WINDOW_UPDATE per message.
STREAM_WINDOW = 16 << 20
CONN_WINDOW = 64 << 20
ACK_EVERY = 1 << 20
RECV_BYTES = 256 << 10
MAX_FRAME = 16384  # SETTINGS_MAX_FRAME_SIZE we keep (the default)
# How long a connection may go unread, while it has streams, before its own
# thread reads it: a handler waiting for its next message normally does.
FALLBACK_S = 0.002

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _PING, _WINDOW_UPDATE = 0x0, 0x1, 0x6, 0x8
_END_STREAM, _ACK, _PADDED = 0x1, 0x1, 0x8

_RESPONSE_HEADERS = [(b":status", b"200"), (b"content-type", b"application/grpc")]
_prefix = struct.Struct(">BI")
_frame_head = struct.Struct(">BHBBI")  # length as a byte and a short, type, flags, stream


def _frame(ftype, flags, sid, payload):
    n = len(payload)
    return _frame_head.pack(n >> 16, n & 0xFFFF, ftype, flags, sid) + payload


def _window_update(sid, inc):
    return _frame_head.pack(0, 4, _WINDOW_UPDATE, 0, sid) + inc.to_bytes(4, "big")


class _Abort(Exception):
    """Ends an RPC with a gRPC status (context.abort, a framing error)."""

    def __init__(self, code, details):
        super().__init__(details)
        self.code, self.details = code, details


class _Cancelled(Exception):
    """The client cancelled the RPC or the connection went away."""


class _ConnError(Exception):
    """A connection error: answered with GOAWAY, then the connection ends."""

    def __init__(self, code, why):
        super().__init__(why)
        self.code = code


_EOF = object()  # the client half-closed its side
_LEAD = object()  # a waiting handler is to read the socket next


def _grpc_message(s):
    """Percent-encodes s as the grpc-message header wants it."""
    out = []
    for b in s.encode("utf-8"):
        out.append(chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else "%%%02X" % b)
    return "".join(out).encode("ascii")


def _trailers(code, details):
    t = [(b"grpc-status", str(code.value[0]).encode("ascii"))]
    if details:
        t.append((b"grpc-message", _grpc_message(details)))
    return t


class _Context:
    """The part of grpc.ServicerContext herd_env's servicers use."""

    def __init__(self, stream):
        self._stream = stream

    def abort(self, code, details):
        raise _Abort(code, details)

    def is_active(self):
        return not self._stream.cancelled

    def invocation_metadata(self):
        return self._stream.metadata


class _Requests:
    """A stream's request iterator: the next message (reading the socket
    when it is this thread's turn); ends at the client's half-close;
    raises at cancellation or a framing error."""

    def __init__(self, stream, deserialize):
        self._s, self._de, self._done = stream, deserialize, False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        s = self._s
        m = s.conn.next_item(s)
        if type(m) is bytes:
            return m if self._de is None else self._de(m)
        self._done = True
        if m is _EOF:
            raise StopIteration
        raise m


class _Stream:
    __slots__ = ("conn", "id", "q", "buf", "cancelled", "headers_sent", "remote_ended", "bad", "unacked",
                 "metadata", "window", "waiting")

    def __init__(self, conn, sid, metadata, window):
        self.conn, self.id, self.metadata = conn, sid, metadata
        self.q = SimpleQueue()
        self.buf = None  # bytes of an incomplete message, or None
        self.cancelled = self.headers_sent = self.remote_ended = self.bad = self.waiting = False
        self.unacked = 0  # bytes received not yet granted back to the peer
        self.window = window  # what we may send on this stream

    def feed(self, data, max_len):
        """Splits data into messages onto q (the reading thread)."""
        if self.bad:
            return
        put = self.conn.deliver
        if self.buf is None and len(data) >= 5 and data[0] == 0:
            n = int.from_bytes(data[1:5], "big")
            if n == len(data) - 5 and n <= max_len:  # one whole message: the common case
                put(self, data[5:])
                return
        buf = data if self.buf is None else self.buf + data
        pos = 0
        while len(buf) - pos >= 5:
            flag, n = _prefix.unpack_from(buf, pos)
            if flag != 0:
                self._fail(_Abort(grpc.StatusCode.INTERNAL, "compressed message flag %d, but this server "
                                  "accepts no compression" % flag))
                return
            if n > max_len:
                self._fail(_Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  "Received message larger than max (%d vs. %d)" % (n, max_len)))
                return
            if len(buf) - pos - 5 < n:
                break
            put(self, bytes(buf[pos + 5:pos + 5 + n]))
            pos += 5 + n
        self.buf = bytes(buf[pos:]) if pos < len(buf) else None

    def _fail(self, err):
        self.bad, self.buf = True, None
        self.conn.deliver(self, err)

    def end(self):
        if self.remote_ended:
            return
        self.remote_ended = True
        if not self.bad:
            self.conn.deliver(self, _Abort(grpc.StatusCode.INTERNAL, "half-closed inside a message")
                              if self.buf else _EOF)

    def cancel(self):
        if not self.cancelled:
            self.cancelled = True
            self.conn.deliver(self, _Cancelled())

    def send(self, payload):
        """Sends one response message (handler thread)."""
        conn = self.conn
        n = len(payload)
        if n > conn.server.max_message_bytes:
            raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         "Sent message larger than max (%d vs. %d)" % (n, conn.server.max_message_bytes))
        n += 5
        with conn.lock:
            if self.cancelled or conn.closed:
                raise _Cancelled()
            if not self.headers_sent:
                try:
                    conn.h2.send_headers(self.id, _RESPONSE_HEADERS)
                except h2.exceptions.ProtocolError:
                    raise _Cancelled()
                conn.h2out()
                self.headers_sent = True
            if n <= conn.max_out_frame and n <= self.window and n <= conn.window:
                # The common case: one frame, header and message in one write.
                conn.wbuf.append(_frame_head.pack(n >> 16, n & 0xFFFF, _DATA, 0, self.id)
                                 + _prefix.pack(0, n - 5) + payload)
                self.window -= n
                conn.window -= n
            else:
                self._send_chunked(_prefix.pack(0, n - 5) + payload)
            conn.flush_locked()

    def _send_chunked(self, data):
        """Sends data in frames the peer's windows allow, waiting for its
        WINDOW_UPDATEs (conn.lock held; the wait releases it)."""
        conn = self.conn
        view, pos = memoryview(data), 0
        while pos < len(data):
            if self.cancelled or conn.closed:
                raise _Cancelled()
            room = min(self.window, conn.window, conn.max_out_frame, len(data) - pos)
            if room <= 0:
                conn.flush_locked()
                conn.blocked += 1
                try:
                    conn.window_cv.wait()
                finally:
                    conn.blocked -= 1
                continue
            conn.wbuf.append(_frame(_DATA, 0, self.id, view[pos:pos + room].tobytes()))
            self.window -= room
            conn.window -= room
            pos += room

    def finish(self, code, details):
        """Sends the trailers (or a trailers-only response) and ends the
        stream; a no-op on a cancelled one."""
        conn = self.conn
        trailers = _trailers(code, details)
        with conn.lock:
            if self.cancelled or conn.closed:
                return
            try:
                if not self.headers_sent:
                    trailers = _RESPONSE_HEADERS + trailers
                    self.headers_sent = True
                conn.h2.send_headers(self.id, trailers, end_stream=True)
                if not self.remote_ended:
                    # As grpc-go's server: the RPC is over, the client need
                    # send nothing more.
                    conn.h2.reset_stream(self.id, error_code=0)
            except h2.exceptions.ProtocolError:
                return
            conn.flush_locked()


class _Conn:
    def __init__(self, server, sock):
        self.server, self.sock = server, sock
        self.tls = None  # an ssl.SSLObject over memory BIOs, with TLS
        self.lock = threading.Lock()  # h2, the windows, wbuf, socket writes
        self.window_cv = threading.Condition(self.lock)  # the peer granted window
        self.blocked = 0  # senders waiting on window_cv
        self.streams = {}
        self.closed = False
        self.wbuf = []  # bytes to write, in order
        self.window = 65535  # what we may send on the connection
        self.max_out_frame = 16384
        self.recv_window = 65535  # what the peer may still send us
        self.recv_unacked = 0
        self.rbuf = b""  # the start of a frame not yet whole (the reading thread's)
        self.rmem = bytearray(RECV_BYTES)
        self.rmem_view = memoryview(self.rmem)
        self.for_leader = False  # this read brought the reading handler its message
        self.deferred = False  # wbuf holds frames left for that handler's answer
        self.deferred_seen = False
        # Who reads the socket: None, a _Stream, or self (the fallback).
        self.lead_lock = threading.Lock()
        self.lead_cv = threading.Condition(self.lead_lock)
        self.leader = None
        self.waiters = set()  # streams whose handlers wait with an empty queue
        self.lead_gen = 0
        cfg = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                        validate_inbound_headers=False, normalize_inbound_headers=False,
                                        validate_outbound_headers=False, normalize_outbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=cfg)

    # Writing (conn.lock held).

    def h2out(self):
        """Moves what h2 has queued into wbuf, keeping the order of writes."""
        out = self.h2.data_to_send()
        if out:
            self.wbuf.append(out)

    def flush_locked(self):
        self.h2out()
        self.deferred = False
        if not self.wbuf:
            return
        out = b"".join(self.wbuf) if len(self.wbuf) > 1 else self.wbuf[0]
        self.wbuf.clear()
        if self.tls is not None:
            self.tls.write(out)
            out = self.tls_out.read()
        try:
            self.sock.sendall(out)
        except OSError:
            self._close_locked()

    # Reading: whoever leads.

    def _recv(self):
        if self.tls is None:
            # Into a buffer kept for it: recv(RECV_BYTES) would allocate
            # (mmap, past malloc's threshold) and shrink that much per read.
            n = self.sock.recv_into(self.rmem)
            return self.rmem_view[:n].tobytes()
        raw = None  # nothing read yet: the handshake's last read may hold records
        while True:
            with self.lock:
                if raw is not None:
                    if raw:
                        self.tls_in.write(raw)
                    else:
                        self.tls_in.write_eof()
                chunks = []
                try:
                    while True:
                        c = self.tls.read(RECV_BYTES)
                        if not c:
                            raw = b""
                            break
                        chunks.append(c)
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    raw = b""
                pending = self.tls_out.read()
                if pending:  # TLS 1.3 session tickets, key updates
                    self.sock.sendall(pending)
            if chunks:
                return b"".join(chunks)
            if raw == b"":
                return b""
            raw = self.sock.recv(RECV_BYTES)

    def _read_once(self):
        """One recv, and every whole frame in it handled; the frames to
        write (PING ACK, WINDOW_UPDATE, SETTINGS ACK) are written now, or
        with the answer when the reading handler got its message (one
        write per message instead of two; the fallback thread writes them
        if the answer takes longer than FALLBACK_S)."""
        try:
            data = self._recv()
        except (OSError, ssl.SSLError):
            data = b""
        with self.lock:
            if not data:
                self._close_locked()
                return
            self.for_leader = False
            try:
                self._frames(self.rbuf + data if self.rbuf else data)
            except _ConnError as e:
                self._goaway_locked(e.code)
                self._close_locked()
            except h2.exceptions.ProtocolError:
                self.flush_locked()  # h2 has queued its GOAWAY
                self._close_locked()
            except Exception:  # a bug of ours: end this connection, not the handler reading it
                self._goaway_locked(h2.errors.ErrorCodes.INTERNAL_ERROR)
                self._close_locked()
            else:
                if self.for_leader:
                    self.h2out()
                    self.deferred = bool(self.wbuf)
                else:
                    self.flush_locked()

    def _frames(self, buf):
        n, pos, to_h2 = len(buf), 0, None
        while n - pos >= 9:
            length = int.from_bytes(buf[pos:pos + 3], "big")
            if length > MAX_FRAME:
                raise _ConnError(h2.errors.ErrorCodes.FRAME_SIZE_ERROR, "frame of %d bytes" % length)
            end = pos + 9 + length
            if end > n:
                break
            ftype = buf[pos + 3]
            if ftype == _DATA or ftype == _PING or ftype == _WINDOW_UPDATE:
                if to_h2 is not None:
                    self._h2_frames(buf[to_h2:pos])
                    to_h2 = None
                flags = buf[pos + 4]
                sid = int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF
                if ftype == _DATA:
                    self._data(sid, flags, buf, pos + 9, end)
                elif ftype == _PING:
                    if sid != 0 or length != 8:
                        raise _ConnError(h2.errors.ErrorCodes.PROTOCOL_ERROR, "bad PING")
                    if not flags & _ACK:
                        self.wbuf.append(_frame_head.pack(0, 8, _PING, _ACK, 0) + buf[pos + 9:end])
                else:
                    if length != 4:
                        raise _ConnError(h2.errors.ErrorCodes.FRAME_SIZE_ERROR, "bad WINDOW_UPDATE")
                    self._window_update(sid, int.from_bytes(buf[pos + 9:end], "big") & 0x7FFFFFFF)
            elif to_h2 is None:
                to_h2 = pos
            pos = end
        if to_h2 is not None:
            self._h2_frames(buf[to_h2:pos])
        self.rbuf = buf[pos:]

    def _h2_frames(self, data):
        for ev in self.h2.receive_data(data):
            try:
                self._event(ev)
            except h2.exceptions.StreamClosedError:
                pass  # a stream the peer has closed meanwhile

    def _data(self, sid, flags, buf, start, end):
        if sid == 0:
            raise _ConnError(h2.errors.ErrorCodes.PROTOCOL_ERROR, "DATA on stream 0")
        flen = end - start
        self.recv_window -= flen
        if self.recv_window < 0:
            raise _ConnError(h2.errors.ErrorCodes.FLOW_CONTROL_ERROR, "past the connection's window")
        self.recv_unacked += flen
        if self.recv_unacked >= ACK_EVERY:
            self.wbuf.append(_window_update(0, self.recv_unacked))
            self.recv_window += self.recv_unacked
            self.recv_unacked = 0
        s = self.streams.get(sid)
        if s is not None and flen:
            if flags & _PADDED:
                pad = buf[start]
                if pad >= flen:
                    raise _ConnError(h2.errors.ErrorCodes.PROTOCOL_ERROR, "padding past the frame")
                start, end = start + 1, end - pad
            if end > start:
                s.feed(buf[start:end], self.server.max_message_bytes)
            # Granted back on arrival, not when the handler takes the
            # message: a message may be larger than the stream's window.
            s.unacked += flen
            if s.unacked >= ACK_EVERY and not flags & _END_STREAM:
                self.wbuf.append(_window_update(sid, s.unacked))
                s.unacked = 0
        if flags & _END_STREAM:
            # h2 keeps the stream states: it sees the end as an empty frame.
            self._h2_frames(_frame_head.pack(0, 0, _DATA, _END_STREAM, sid))

    def _window_update(self, sid, inc):
        if sid == 0:
            self.window += inc
        else:
            s = self.streams.get(sid)
            if s is None:
                return
            s.window += inc
        if self.blocked:
            self.window_cv.notify_all()

    def _event(self, ev):
        t = type(ev)
        if t is h2.events.RequestReceived:
            self._request(ev)
        elif t is h2.events.StreamEnded:
            s = self.streams.get(ev.stream_id)
            if s is not None:
                s.end()
        elif t is h2.events.StreamReset:
            s = self.streams.pop(ev.stream_id, None)
            if s is not None:
                s.cancel()
                if self.blocked:
                    self.window_cv.notify_all()
        elif t is h2.events.RemoteSettingsChanged:
            c = ev.changed_settings.get(h2.settings.SettingCodes.INITIAL_WINDOW_SIZE)
            if c is not None and c.original_value is not None:
                for s in self.streams.values():
                    s.window += c.new_value - c.original_value
            self.max_out_frame = self.h2.max_outbound_frame_size
            self.window_cv.notify_all()
        elif t is h2.events.ConnectionTerminated:
            self._close_locked()

    def _request(self, ev):
        sid = ev.stream_id
        headers = dict(ev.headers)
        path = headers.get(b":path", b"")
        ctype = headers.get(b"content-type", b"")
        if headers.get(b":method") != b"POST" or not ctype.startswith(b"application/grpc"):
            self.h2.send_headers(sid, [(b":status", b"415")], end_stream=True)
            return
        handler = self.server.handlers.get(path)
        code = details = None
        if handler is None:
            code, details = grpc.StatusCode.UNIMPLEMENTED, "Method not found!"
        elif headers.get(b"grpc-encoding", b"identity") != b"identity":
            code, details = grpc.StatusCode.UNIMPLEMENTED, "grpc-encoding %s: not supported" % (
                headers[b"grpc-encoding"].decode("latin-1"),)
        elif not self.server._admit():
            code, details = grpc.StatusCode.RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded!"
        if code is not None:
            self.h2.send_headers(sid, _RESPONSE_HEADERS + _trailers(code, details), end_stream=True)
            try:
                self.h2.reset_stream(sid, error_code=0)
            except h2.exceptions.StreamClosedError:
                pass  # the request's own end came in the same read
            return
        s = _Stream(self, sid, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in ev.headers
                                if not k.startswith(b":")], self.h2.remote_settings.initial_window_size)
        self.streams[sid] = s
        if ev.stream_ended is not None:
            s.end()
        threading.Thread(target=self._serve, args=(s, handler), daemon=True,
                         name="h2grpc-%d" % sid).start()

    def _goaway_locked(self, code, last=None):
        """A GOAWAY written past h2, whose own close_connection would stop
        the streams still running from answering."""
        last = self.h2.highest_inbound_stream_id if last is None else last
        self.wbuf.append(_frame(0x7, 0, 0, struct.pack(">II", last & 0x7FFFFFFF, int(code))))
        self.flush_locked()

    def _close_locked(self):
        if self.closed:
            return
        self.closed = True
        for s in list(self.streams.values()):
            s.cancel()
        self.streams.clear()
        self.window_cv.notify_all()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        with self.lead_lock:
            self.lead_cv.notify_all()

    # Who reads.

    def deliver(self, s, item):
        """Puts item on s's queue (the reading thread, conn.lock held)."""
        s.q.put(item)
        if s is self.leader:
            self.for_leader = True
        elif s.waiting:
            with self.lead_lock:
                if s.waiting:
                    s.waiting = False
                    self.waiters.discard(s)

    def _pass_lead_locked(self):
        """The reading thread is done (lead_lock held): a waiting handler
        reads next, else nobody until a handler waits or FALLBACK_S pass."""
        if self.waiters and not self.closed:
            w = self.waiters.pop()
            w.waiting = False
            self.leader = w
            w.q.put(_LEAD)
            return
        self.leader = None
        self.lead_gen += 1
        if not self.streams:
            self.lead_cv.notify()  # the fallback reads at once

    def _lead(self, who):
        try:
            self._read_once()
        finally:
            with self.lead_lock:
                if self.leader is who:
                    self._pass_lead_locked()

    def next_item(self, s):
        """s's next queue item, reading the socket when no one else is."""
        q = s.q
        while True:
            m = None if q.empty() else q.get()  # only this thread takes from q
            if m is not None and m is not _LEAD:
                return m
            with self.lead_lock:
                if m is _LEAD and self.leader is not s:
                    continue  # stale: handed over while a message was on its way
                if m is _LEAD or (self.leader is None and not self.closed):
                    self.leader = s
                    lead = True
                else:
                    lead = False
                    s.waiting = True
                    self.waiters.add(s)
            if lead:
                self._lead(s)
                continue
            m = q.get()
            with self.lead_lock:
                if s.waiting:
                    s.waiting = False
                    self.waiters.discard(s)
                if m is _LEAD:
                    if self.leader is not s:
                        continue
                elif self.leader is s:
                    # Chosen to read while this message was on its way: pass it on.
                    self._pass_lead_locked()
            if m is _LEAD:
                self._lead(s)
                continue
            return m

    def _fallback(self):
        """Reads when no handler has for FALLBACK_S (at once while the
        connection has no streams), and writes frames left for an answer
        that has not come within about as long."""
        while True:
            take = False
            with self.lead_lock:
                if self.closed:
                    return
                gen = self.lead_gen
                if self.leader is not None or self.streams:
                    self.lead_cv.wait(FALLBACK_S)
                take = self.leader is None and not self.closed and (gen == self.lead_gen or not self.streams)
                if take:
                    self.leader = self
            if take:
                self._lead(self)
            elif self.deferred:
                if self.deferred_seen:
                    with self.lock:
                        if self.deferred:
                            self.flush_locked()
                    self.deferred_seen = False
                else:
                    self.deferred_seen = True
            else:
                self.deferred_seen = False

    def _handshake(self, ctx):
        self.tls_in, self.tls_out = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(self.tls_in, self.tls_out, server_side=True)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                out = self.tls_out.read()
                if out:
                    self.sock.sendall(out)
                raw = self.sock.recv(RECV_BYTES)
                if not raw:
                    raise ConnectionError("closed during the TLS handshake")
                self.tls_in.write(raw)
        out = self.tls_out.read()
        if out:
            self.sock.sendall(out)
        if tls.selected_alpn_protocol() not in (None, "h2"):
            raise ConnectionError("ALPN %r, want h2" % tls.selected_alpn_protocol())
        self.tls = tls

    def run(self):
        """The connection's own thread: the preface, then the fallback."""
        try:
            if self.server.ssl_context is not None:
                self._handshake(self.server.ssl_context)
            data = b""
            while len(data) < len(PREFACE):
                more = self._recv()
                if not more:
                    raise ConnectionError("closed before the preface")
                data += more
            if not data.startswith(PREFACE):
                raise ConnectionError("no HTTP/2 preface (a client without prior knowledge, or TLS?)")
            with self.lock:
                h = self.h2
                h.local_settings = h2.settings.Settings(client=False, initial_values={
                    h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                    h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000,
                    h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 1 << 16})
                h.initiate_connection()
                h.increment_flow_control_window(CONN_WINDOW - 65535)
                self.recv_window = CONN_WINDOW
                h.receive_data(PREFACE)
                try:
                    self._frames(data[len(PREFACE):])
                except (_ConnError, h2.exceptions.ProtocolError):
                    self._goaway_locked(h2.errors.ErrorCodes.PROTOCOL_ERROR)
                    raise ConnectionError("protocol error")
                self.flush_locked()
            self._fallback()
        except (OSError, ValueError, ssl.SSLError, ConnectionError):
            pass
        finally:
            with self.lock:
                self._close_locked()
            try:
                self.sock.close()
            except OSError:
                pass
            self.server._conn_done(self)

    def _serve(self, s, handler):
        """One RPC, in its own thread."""
        streaming, deserialize, fn = handler
        gen = None
        status = (grpc.StatusCode.OK, "")
        try:
            ctx = _Context(s)
            if streaming:
                gen = fn(_Requests(s, deserialize), ctx)
                for resp in gen:
                    s.send(resp if type(resp) is bytes else resp.SerializeToString())
            else:
                req = next(_Requests(s, deserialize), None)
                if req is None:
                    raise _Abort(grpc.StatusCode.INTERNAL, "unary call without a request message")
                s.send(fn(req, ctx).SerializeToString())
        except _Abort as a:
            status = (a.code, a.details)
        except _Cancelled:
            status = None
        except Exception as ex:  # grpcio's status and words for it
            status = (grpc.StatusCode.UNKNOWN, "%s: %s" % (
                "Exception iterating responses" if streaming else "Exception calling application", ex))
        finally:
            try:
                if gen is not None:
                    gen.close()  # the servicer's finally closes the session's envs
            finally:
                # The slot frees before the status goes out: a client that
                # starts its next call on seeing it must find it free.
                self.server._release()
                with self.lock:
                    if self.streams.get(s.id) is s:
                        del self.streams[s.id]
        if status is not None:
            s.finish(*status)

    def goaway(self):
        """Tells the client to start no new streams (graceful stop)."""
        with self.lock:
            if not self.closed:
                self._goaway_locked(0)

    def close(self):
        with self.lock:
            self._close_locked()


class H2Server:
    """A gRPC server for unary and bidirectional-stream methods, with
    grpc.Server's start and stop.

    handlers maps b"/package.Service/Method" to (streaming, deserialize,
    fn): fn(request, context) returns the response for a unary method,
    fn(request_iterator, context) yields them for a streaming one
    (deserialize None: the requests as bytes; a response may be bytes,
    sent as they are, or a message to serialize)."""

    def __init__(self, handlers, host, port, max_message_bytes, max_rpcs, ssl_context=None, workers=None,
                 listen=True):
        self.handlers = handlers
        # workers (herd_env.procs.Workers): connections run in worker
        # processes; listen=False: this is one, fed by serve_conn.
        self.workers = workers
        self.max_message_bytes = max_message_bytes
        self.max_rpcs = max_rpcs
        self.ssl_context = ssl_context
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.rpcs = 0
        self.conns = set()
        self.stopping = False
        self._accepter = self.listener = None
        self.port = port
        if not listen:
            return
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        self.listener = socket.create_server((host, port), family=family, backlog=128)
        self.port = self.listener.getsockname()[1]

    def start(self):
        if self.workers is not None:
            self.workers.start()
        self._accepter = threading.Thread(target=self._accept, daemon=True, name="h2grpc-accept")
        self._accepter.start()

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return  # the listener closed: stopping
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.workers is not None:
                if self.workers.hand_over(b"g", sock, self.max_rpcs) is not None:
                    sock.close()  # the client sees the connection end: UNAVAILABLE
                continue
            self._start_conn(sock)

    def serve_conn(self, sock):
        """Runs one connection a --procs server passed to this worker,
        returning when it ends."""
        c = self._start_conn(sock)
        if c is not None:
            c.run()

    def _start_conn(self, sock):
        c = _Conn(self, sock)
        with self.lock:
            if self.stopping:
                sock.close()
                return None
            self.conns.add(c)
        if self.listener is not None:
            threading.Thread(target=c.run, daemon=True, name="h2grpc-conn").start()
        return c

    def _admit(self):
        with self.lock:
            if self.stopping or self.rpcs >= self.max_rpcs:
                return False
            self.rpcs += 1
            return True

    def _release(self):
        with self.lock:
            self.rpcs -= 1
            self.idle.notify_all()

    def _conn_done(self, c):
        with self.lock:
            self.conns.discard(c)

    def stop(self, grace=None):
        """Stops accepting connections and RPCs; lets the running RPCs end
        for grace seconds, then cancels them (their sessions close their
        envs). Returns an Event set once every RPC has ended."""
        done = threading.Event()
        with self.lock:
            self.stopping = True
            conns = list(self.conns)
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
        if self.workers is not None:
            self.workers.stop()
        for c in conns:
            c.goaway()

        def finish():
            with self.lock:
                self.idle.wait_for(lambda: self.rpcs == 0, timeout=grace or 0)
                conns = list(self.conns)
            for c in conns:
                c.close()
            with self.lock:
                self.idle.wait_for(lambda: self.rpcs == 0)
            done.set()

        threading.Thread(target=finish, daemon=True, name="h2grpc-stop").start()
        return done


def ssl_context(cert, key, client_ca=None):
    """A server TLS context offering ALPN h2 (gRPC-Go requires it), with
    client certificates required when client_ca is given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"])
    if client_ca:
        ctx.load_verify_locations(client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
