#!/usr/bin/env python3
"""Issue 23: an rdma_cm client whose TCP link the listener closes before
answering dials again.  A listener under a flood drops its oldest silent
callers (cm.listener_flood); on a loaded machine the real client can be
one of them, before its REQ goes or before the listener reads it, and it
then failed with UNREACHABLE ("it is closed").  Here a proxy stands in
front of `rping -s` (SOFTVERBS_TRANSPORT=tcp: the CM over TCP on
127.0.0.1) and drops the client's first DROPS connections the way the
listener does, in MODE:
  rst-at-accept  at accept, unread, with RST (SO_LINGER 0)
  fin-at-accept  at accept, with an orderly close
  rst-after-req  after reading the 300-byte REQ (never passed on), RST
then passes later connections through.  `rping -c -C 10` must finish,
having dialled DROPS + 1 times.  Before the fix every mode failed with
UNREACHABLE at the first drop.

usage: cm_redial.py BUILD_DIR [MODE ...]   (77: rping is missing)
"""
import os
import selectors
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cm_flood import free_port, skip  # noqa: E402

DROPS = 2
DEADLINE_S = 60
REC = 300  # a CM record on the TCP link (rdmacm/wire.h)
MODES = ("rst-at-accept", "fin-at-accept", "rst-after-req")


def rst(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                 b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()


class Proxy:
    """Listens on a free port; drops the first DROPS callers (mode),
    splices the others to the server's port."""

    def __init__(self, mode, server_port):
        self.mode, self.server_port = mode, server_port
        self.sel = selectors.DefaultSelector()
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.sel.register(self.lsock, selectors.EVENT_READ, self.accept)
        self.callers = 0
        self.dropped = 0

    def accept(self, _):
        c, _ = self.lsock.accept()
        self.callers += 1
        if self.dropped < DROPS:
            if self.mode == "rst-at-accept":
                self.dropped += 1
                rst(c)
            elif self.mode == "fin-at-accept":
                self.dropped += 1
                c.close()
            else:
                c.setblocking(False)
                self.sel.register(c, selectors.EVENT_READ,
                                  self.reader(c, b""))
            return
        s = socket.create_connection(("127.0.0.1", self.server_port))
        for a, b in ((c, s), (s, c)):
            a.setblocking(False)
            self.sel.register(a, selectors.EVENT_READ, self.splice(a, b))

    def reader(self, c, got):
        """rst-after-req: reads the REQ, then resets unanswered."""
        def step(_):
            nonlocal got
            try:
                chunk = c.recv(REC - len(got))
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            got += chunk
            if chunk and len(got) < REC:
                return
            self.sel.unregister(c)
            if len(got) == REC:
                self.dropped += 1
            rst(c)
        return step

    def splice(self, a, b):
        def step(_):
            try:
                data = a.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                for x in (a, b):
                    try:
                        self.sel.unregister(x)
                    except (KeyError, ValueError):
                        pass
                    x.close()
                return
            b.setblocking(True)
            b.sendall(data)
            b.setblocking(False)
        return step

    def step(self, wait):
        for key, _ in self.sel.select(wait):
            key.data(key.fileobj)


def wait_listening(port, proc, t_end):
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        if proc.poll() is not None or time.monotonic() > t_end:
            return False
        time.sleep(0.02)  # nothing says when another process listens


def one(run, env, mode):
    t_end = time.monotonic() + DEADLINE_S
    sport = free_port()
    server = subprocess.Popen(
        [run, "rping", "-s", "-a", "127.0.0.1", "-p", str(sport), "-C",
         "10"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if not wait_listening(sport, server, t_end):
        server.kill()
        print("FAIL %s: the server did not listen: %s" %
              (mode, server.communicate()[0].decode(errors="replace")))
        return False
    proxy = Proxy(mode, sport)
    client = subprocess.Popen(
        [run, "rping", "-c", "-a", "127.0.0.1", "-p", str(proxy.port),
         "-C", "10", "-v"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    while client.poll() is None and time.monotonic() < t_end:
        proxy.step(0.05)
    if client.poll() is None:
        client.kill()
    cout = client.communicate()[0].decode(errors="replace")
    # a failed client leaves the server waiting: give it a moment, then end
    s_end = min(t_end, time.monotonic() + (10 if client.returncode == 0
                                           else 2))
    while server.poll() is None and time.monotonic() < s_end:
        proxy.step(0.05)
    if server.poll() is None:
        server.kill()
    sout = server.communicate()[0].decode(errors="replace")
    pings = cout.count("ping data")
    print("%s: %d callers, %d dropped; client exit %d with %d pings, "
          "server exit %d" % (mode, proxy.callers, proxy.dropped,
                              client.returncode, pings, server.returncode))
    bad = []
    if proxy.dropped != DROPS:
        bad.append("the proxy dropped %d callers, not %d" %
                   (proxy.dropped, DROPS))
    if client.returncode != 0 or pings != 10:
        bad.append("the client failed")
    if server.returncode != 0:
        bad.append("the server failed")
    if proxy.callers != DROPS + 1:
        bad.append("%d dials, not %d" % (proxy.callers, DROPS + 1))
    if bad:
        print("FAIL %s: %s" % (mode, "; ".join(bad)))
        print("client output:\n" + cout[-1500:])
        print("server output:\n" + sout[-1500:])
        return False
    return True


def main():
    build = sys.argv[1]
    modes = sys.argv[2:] or MODES
    run = os.path.join(build, "bin", "softverbs-run")
    if subprocess.call(["sh", "-c", "command -v rping"],
                       stdout=subprocess.DEVNULL) != 0:
        skip("needs rping (rdmacm-utils)")
    env = dict(os.environ, SOFTVERBS_TRANSPORT="tcp")
    rt = os.environ.get("SV_ASAN_RUNTIME")
    if rt:
        # Debian's rping is not instrumented: the ASan runtime first
        env["LD_PRELOAD"] = rt
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    ok = all([one(run, env, m) for m in modes])
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
