"""Worker processes for herd_env.serve --procs K.

One Python process steps one env at a time (the GIL), so a server that
should step several sessions at once runs them in K worker processes. The
server's process keeps the listening sockets and hands each new
connection (a shm session's Unix socket, or an h2 gRPC connection, which
herd's client opens per session) to the live worker with the fewest, over
a socket pair with SCM_RIGHTS: a tag byte (b"s" shm, b"g" gRPC) and the
descriptor. The worker answers b"e" when that connection ends, so the
counts stay true, and exits at the pair's EOF: a server killed with
SIGKILL leaves no worker behind. A worker that dies gets no more
connections; its own clients see EOF at once.

Each worker is `python3 -m herd_env.serve` with the server's own flags and
--procs-child-fd FD, so it builds the same envs the same way.
"""

import os
import socket
import subprocess
import sys
import threading

import grpc


class _Worker:
    def __init__(self, index, argv, lock):
        self.index, self.lock = index, lock
        self.conns, self.alive = 0, True
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            self.proc = subprocess.Popen(argv + ["--procs-child-fd", str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), env=env)
        finally:
            theirs.close()
        threading.Thread(target=self._ends, daemon=True, name="herd-env-worker-%d" % index).start()

    def _ends(self):
        while True:
            try:
                b = self.sock.recv(64)
            except OSError:
                b = b""
            if not b:
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
                self.lost()
                return
            with self.lock:
                self.conns -= len(b)

    def lost(self):
        with self.lock:
            was, self.alive = self.alive, False
        if was and self.proc.poll() not in (None, 0):
            print("herd_env: worker process %d (pid %d) exited with %s; its sessions ended"
                  % (self.index, self.proc.pid, self.proc.returncode), file=sys.stderr, flush=True)


class Workers:
    """The K worker processes of a server, started by start()."""

    def __init__(self, k, argv):
        self.k, self.argv = k, argv
        self.lock = threading.Lock()
        self.workers = []

    def start(self):
        with self.lock:
            if not self.workers:
                self.workers = [_Worker(i, self.argv, self.lock) for i in range(self.k)]

    def hand_over(self, kind, conn, limit):
        """Passes conn (closing this process's copy) to the live worker
        with the fewest connections, the lowest index on a tie, so K
        sessions opened together land in K processes. Returns None, or the
        (grpc.StatusCode, message) why it could not: then conn is still
        open, for the caller to answer and close. limit bounds the
        connections of all workers together."""
        with self.lock:
            live = [w for w in self.workers if w.alive]
            if not live:
                return grpc.StatusCode.UNAVAILABLE, "no worker process is alive (see the server's log)"
            if sum(w.conns for w in live) >= limit:
                return grpc.StatusCode.RESOURCE_EXHAUSTED, "%d sessions are open, the most this server takes" % limit
            w = min(live, key=lambda w: (w.conns, w.index))
            w.conns += 1
        try:
            socket.send_fds(w.sock, [kind], [conn.fileno()])
        except OSError:
            with self.lock:
                w.conns -= 1
            w.lost()
            return grpc.StatusCode.UNAVAILABLE, "worker process %d is gone" % w.index
        conn.close()
        return None

    def stop(self):
        with self.lock:
            workers = list(self.workers)
            for w in workers:
                w.alive = False
        for w in workers:
            try:
                w.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for w in workers:
            try:
                w.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                w.proc.kill()


def serve_child(fd, handlers):
    """A worker's life: runs each connection the server passes over fd
    with handlers[tag](sock) in a thread of its own, answers b"e" when it
    returns, and exits when the server goes (the pair's EOF), whatever its
    connections are doing."""
    parent = socket.socket(fileno=fd)
    done = threading.Lock()

    def run(handle, conn):
        try:
            handle(conn)
        finally:
            with done:
                try:
                    parent.sendall(b"e")
                except OSError:
                    pass
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(parent, 1, 1, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            break
        if not msg or not fds:
            for f in fds:
                os.close(f)
            break
        handle = handlers.get(msg)
        conn = socket.socket(fileno=fds[0])
        if handle is None:
            conn.close()
            with done:
                parent.sendall(b"e")
            continue
        threading.Thread(target=run, args=(handle, conn), daemon=True).start()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
