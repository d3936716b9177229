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

Threads: per connection one reader (socket -> h2 -> per-stream queues),
per RPC one handler thread. The h2 state machine and socket writes are
guarded by the connection's lock; a handler sends its response with one
sendall.
"""

import socket
import ssl
import struct
import threading
from queue import SimpleQueue

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from hyperframe.frame import GoAwayFrame

# Windows we grant the peer: large, and acknowledged in batches, so a
# stream of small messages costs no WINDOW_UPDATE per message.
STREAM_WINDOW = 16 << 20
CONN_WINDOW = 64 << 20
ACK_EVERY = 1 << 20
RECV_BYTES = 256 << 10

_RESPONSE_HEADERS = [(b":status", b"200"), (b"content-type", b"application/grpc")]
_prefix = struct.Struct(">BI")


class _Abort(Exception):
    """Ends an RPC with a gRPC status (context.abort, a framing error)."""

    def __init__(self, code, details):
        super().__init__(details)
        self.code, self.details = code, details


class _Cancelled(Exception):
    """The client cancelled the RPC or the connection went away."""


_EOF = object()  # the client half-closed its side
_CANCEL = _Cancelled()


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
    """A stream's request iterator: blocks for the next message; ends at
    the client's half-close; raises at cancellation or a framing error."""

    def __init__(self, stream, deserialize):
        self._q, self._de, self._done = stream.q, deserialize, False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        m = self._q.get()
        if type(m) is bytes:
            return self._de(m)
        self._done = True
        if m is _EOF:
            raise StopIteration
        raise m


class _Stream:
    __slots__ = ("conn", "id", "q", "buf", "cancelled", "headers_sent", "remote_ended", "bad", "unacked",
                 "metadata")

    def __init__(self, conn, sid, metadata):
        self.conn, self.id, self.metadata = conn, sid, metadata
        self.q = SimpleQueue()
        self.buf = None  # bytes of an incomplete message, or None
        self.cancelled = self.headers_sent = self.remote_ended = self.bad = False
        self.unacked = 0

    def feed(self, data, max_len):
        """Splits data into messages onto q (reader thread)."""
        if self.bad:
            return
        if self.buf is None and len(data) >= 5 and data[0] == 0:
            n = int.from_bytes(data[1:5], "big")
            if n == len(data) - 5 and n <= max_len:  # one whole message: the common case
                self.q.put(data[5:])
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
            self.q.put(bytes(buf[pos + 5:pos + 5 + n]))
            pos += 5 + n
        self.buf = bytes(buf[pos:]) if pos < len(buf) else None

    def _fail(self, err):
        self.bad, self.buf = True, None
        self.q.put(err)

    def end(self):
        self.remote_ended = True
        if not self.bad:
            self.q.put(_Abort(grpc.StatusCode.INTERNAL, "half-closed inside a message") if self.buf else _EOF)

    def cancel(self):
        if not self.cancelled:
            self.cancelled = True
            self.q.put(_CANCEL)

    def send(self, payload):
        """Sends one response message (handler thread)."""
        conn = self.conn
        n = len(payload)
        if n > conn.server.max_message_bytes:
            raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         "Sent message larger than max (%d vs. %d)" % (n, conn.server.max_message_bytes))
        data = _prefix.pack(0, n) + payload
        h = conn.h2
        with conn.lock:
            if self.cancelled:
                raise _CANCEL
            try:
                if not self.headers_sent:
                    h.send_headers(self.id, _RESPONSE_HEADERS)
                    self.headers_sent = True
                if n + 5 <= h.max_outbound_frame_size and n + 5 <= h.local_flow_control_window(self.id):
                    h.send_data(self.id, data)  # the common case: one frame
                else:
                    self._send_chunked(data)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                raise _CANCEL
            conn.flush_locked()

    def _send_chunked(self, data):
        """Sends data in frames the peer's windows allow, waiting for
        WINDOW_UPDATEs (conn.lock held; the wait releases it)."""
        conn, h = self.conn, self.conn.h2
        view, pos = memoryview(data), 0
        while pos < len(data):
            if self.cancelled or conn.closed:
                raise _CANCEL
            room = min(h.local_flow_control_window(self.id), h.max_outbound_frame_size, len(data) - pos)
            if room <= 0:
                conn.flush_locked()
                conn.window.wait()
                continue
            h.send_data(self.id, view[pos:pos + room].tobytes())
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
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                return
            conn.flush_locked()


class _Conn:
    def __init__(self, server, sock, tls):
        self.server, self.sock = server, sock
        self.tls = tls  # an ssl.SSLObject over memory BIOs, or None
        self.lock = threading.Lock()
        self.window = threading.Condition(self.lock)  # notified when the peer grants window
        self.streams = {}
        self.closed = False
        self.unacked = 0
        cfg = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                        validate_inbound_headers=False, normalize_inbound_headers=False,
                                        validate_outbound_headers=False, normalize_outbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=cfg)

    # Socket I/O; with TLS through the SSLObject, whose every use holds
    # the lock (OpenSSL objects are not for concurrent use).

    def flush_locked(self):
        out = self.h2.data_to_send()
        if not out:
            return
        if self.tls is not None:
            self.tls.write(out)
            out = self.tls_out.read()
        try:
            self.sock.sendall(out)
        except OSError:
            self._close_locked()

    def _recv(self):
        if self.tls is None:
            return self.sock.recv(RECV_BYTES)
        while True:
            raw = self.sock.recv(RECV_BYTES)
            with self.lock:
                if not raw:
                    self.tls_in.write_eof()
                else:
                    self.tls_in.write(raw)
                chunks = []
                try:
                    while True:
                        c = self.tls.read(RECV_BYTES)
                        if not c:
                            break
                        chunks.append(c)
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    raw = b""
                pending = self.tls_out.read()
                if pending:  # e.g. TLS 1.3 session tickets, key updates
                    self.sock.sendall(pending)
            if chunks:
                return b"".join(chunks)
            if not raw:
                return b""

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
        """The connection's reader thread."""
        try:
            if self.server.ssl_context is not None:
                self._handshake(self.server.ssl_context)
            with self.lock:
                h = self.h2
                h.local_settings = h2.settings.Settings(client=False, initial_values={
                    h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                    h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000,
                    h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 1 << 16})
                h.initiate_connection()
                h.increment_flow_control_window(CONN_WINDOW - 65535)
                self.flush_locked()
            while not self.closed:
                data = self._recv()
                if not data:
                    break
                with self.lock:
                    try:
                        events = self.h2.receive_data(data)
                    except h2.exceptions.ProtocolError:
                        self.flush_locked()  # h2 queued a GOAWAY
                        break
                    for ev in events:
                        try:
                            self._event(ev)
                        except h2.exceptions.ProtocolError:
                            pass  # a stream the peer has closed meanwhile
                    self.flush_locked()
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

    def _close_locked(self):
        if self.closed:
            return
        self.closed = True
        for s in self.streams.values():
            s.cancel()
        self.streams.clear()
        self.window.notify_all()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _event(self, ev):
        t = type(ev)
        if t is h2.events.DataReceived:
            s = self.streams.get(ev.stream_id)
            if s is not None:
                s.feed(ev.data, self.server.max_message_bytes)
                s.unacked += ev.flow_controlled_length
                if s.unacked >= ACK_EVERY:
                    self.h2.acknowledge_received_data(s.unacked, ev.stream_id)
                    s.unacked = 0
            else:  # a stream we are done with: its bytes still count for the connection
                self.unacked += ev.flow_controlled_length
                if self.unacked >= ACK_EVERY:
                    self.h2.acknowledge_received_data(self.unacked, ev.stream_id)
                    self.unacked = 0
            if ev.stream_ended is not None and s is not None:
                s.end()
        elif t is h2.events.RequestReceived:
            self._request(ev)
        elif t is h2.events.StreamEnded:
            s = self.streams.get(ev.stream_id)
            if s is not None and not s.remote_ended:
                s.end()
        elif t is h2.events.StreamReset:
            s = self.streams.pop(ev.stream_id, None)
            if s is not None:
                s.cancel()
                self.window.notify_all()
        elif t is h2.events.WindowUpdated or t is h2.events.RemoteSettingsChanged:
            self.window.notify_all()
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
                # h2 has taken in the whole read already: a request that
                # ended in a later frame of it is closed by now.
                self.h2.reset_stream(sid, error_code=0)
            except h2.exceptions.StreamClosedError:
                pass
            return
        s = _Stream(self, sid, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in ev.headers
                                if not k.startswith(b":")])
        self.streams[sid] = s
        if ev.stream_ended is not None:
            s.end()
        threading.Thread(target=self._serve, args=(s, handler), daemon=True,
                         name="h2grpc-%d" % sid).start()

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
                    s.send(resp.SerializeToString())
            else:
                req = next(_Requests(s, deserialize), None)
                if req is None:
                    raise _Abort(grpc.StatusCode.INTERNAL, "unary call without a request message")
                s.send(fn(req, ctx).SerializeToString())
        except _Abort as a:
            status = (a.code, a.details)
        except _Cancelled:
            status = None
        except Exception as ex:
            status = (grpc.StatusCode.UNKNOWN, "Exception calling application: %r" % (ex,))
        finally:
            try:
                if gen is not None:
                    gen.close()  # the servicer's finally closes the session's envs
            finally:
                # The slot frees before the status goes out: a client that
                # starts its next call on seeing it must find it free.
                self.server._release()
                self._forget(s)
        if status is not None:
            s.finish(*status)

    def _forget(self, s):
        with self.lock:
            if self.streams.get(s.id) is s:
                del self.streams[s.id]
            if s.unacked and not self.closed:
                # Bytes the stream got but did not acknowledge still count
                # against the connection's window.
                self.unacked += s.unacked
                s.unacked = 0
                if self.unacked >= ACK_EVERY:
                    try:
                        self.h2.acknowledge_received_data(self.unacked, s.id)
                        self.flush_locked()
                    except h2.exceptions.ProtocolError:
                        pass
                    self.unacked = 0

    def goaway(self):
        """Tells the client to start no new streams (graceful stop): a
        GOAWAY written past h2, whose own close_connection would end the
        streams still running."""
        with self.lock:
            if self.closed:
                return
            f = GoAwayFrame(0)
            f.last_stream_id = self.h2.highest_inbound_stream_id
            f.error_code = 0
            out = f.serialize()
            if self.tls is not None:
                self.tls.write(out)
                out = self.tls_out.read()
            try:
                self.sock.sendall(out)
            except OSError:
                pass

    def close(self):
        with self.lock:
            self._close_locked()


class H2Server:
    """A gRPC server for unary and bidirectional-stream methods, with
    grpc.Server's start and stop.

    handlers maps b"/package.Service/Method" to (streaming, deserialize,
    fn): fn(request, context) returns the response for a unary method,
    fn(request_iterator, context) yields them for a streaming one."""

    def __init__(self, handlers, host, port, max_message_bytes, max_rpcs, ssl_context=None):
        self.handlers = handlers
        self.max_message_bytes = max_message_bytes
        self.max_rpcs = max_rpcs
        self.ssl_context = ssl_context
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.rpcs = 0
        self.conns = set()
        self.stopping = False
        self.listener = socket.create_server((host, port), reuse_port=False, backlog=128)
        self.port = self.listener.getsockname()[1]
        self._accepter = None

    def start(self):
        self._accepter = threading.Thread(target=self._accept, daemon=True, name="h2grpc-accept")
        self._accepter.start()

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return  # the listener closed: stopping
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = _Conn(self, sock, None)
            with self.lock:
                if self.stopping:
                    sock.close()
                    continue
                self.conns.add(c)
            threading.Thread(target=c.run, daemon=True, name="h2grpc-conn").start()

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
        try:
            self.listener.close()
        except OSError:
            pass
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
