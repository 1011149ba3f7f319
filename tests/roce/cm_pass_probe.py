#!/usr/bin/env python3
"""A hostile process of the host against the IB CM's passing of MADs
(rdmacm/ib_pass.c, provider/wire/cm_pass.h): it sends to a listener's
abstract name what another softverbs process would pass, and worse.

usage: cm_pass_probe.py other_user|malformed|flood PORT ADDR
       cm_pass_probe.py door_listen PORT ADDR READY_FILE
       cm_pass_probe.py door_send PORT ADDR
  other_user: 10 well-formed passed REQs (run it as another user: each is
              dropped as not our user, before anything in it is read)
  malformed:  one of each malformed kind, as our user
  flood:      20000 datagrams, MSG_DONTWAIT: prints how many the kernel's
              queue took ("flood: N sent, M refused")
  door_listen: binds the name a listener of PORT at ADDR has (nothing
              else: the UD door is the host's only member on 4791),
              touches READY_FILE, and checks the first datagram passed
              to it is door_send's REQ, from 10.77.0.2 to ADDR (10 s)
  door_send:  from 10.77.0.2 port 0xd872, that REQ to ADDR:4791
ADDR: the listener's IPv4 address (its name has it); port space TCP.
Exit 0 when everything was sent (what the listener did is in its log).
"""
import errno
import socket
import struct
import sys

MAGIC = 0x53764350
PS_TCP = 0x0106


def name(ps, port, addr):
    a = struct.unpack("!I", socket.inet_aton(addr))[0]
    return b"\0softverbs/cm/svc/%04x/%04x/%08x" % (ps, port, a)


def roce_mad(attr, port, cls=0x07, cls_version=2):
    """A RoCEv2 UD SEND to QP1 from QP1 carrying a 256-byte CM MAD: a REQ
    (or another attribute) naming service PS_TCP/port; its ICRC is not
    checked by a UDP receiver, so any 4 bytes do."""
    bth = struct.pack("!BBHBBHI", 0x64, 0, 0xFFFF, 0, 0, 1, 7)
    deth = struct.pack("!II", 0x80010000, 1)
    mad = bytearray(256)
    mad[0:4] = bytes([1, cls, cls_version, 3])
    mad[8:16] = struct.pack("!Q", 0x1234)
    mad[16:18] = struct.pack("!H", attr)
    mad[24:28] = struct.pack("!I", 0x0BAD0001)  # local comm ID
    mad[32:40] = struct.pack("!Q", PS_TCP << 16 | port)  # service ID
    return bth + deth + bytes(mad) + b"\0\0\0\0"


def passed(pkt, frm, to, by=2, length=None, magic=MAGIC, version=1):
    n = len(pkt) if length is None else length
    return (struct.pack("<IBBH", magic, version, by, n) +
            socket.inet_aton(frm) + socket.inet_aton(to) + pkt)


def main():
    mode, port, addr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    peer = "10.77.0.2"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.settimeout(10)
    to = name(PS_TCP, port, addr)
    req = roce_mad(0x0010, port)
    if mode == "other_user":
        for _ in range(10):
            s.sendto(passed(req, peer, addr), to)
        print("other_user: 10 sent as uid", __import__("os").getuid())
        return 0
    if mode == "malformed":
        kinds = {
            "short": b"\x50\x43\x76\x53\x01\x02",
            "magic": passed(req, peer, addr, magic=0x12345678),
            "version": passed(req, peer, addr, version=9),
            "length": passed(req, peer, addr, length=100),
            "from 0": passed(req, "0.0.0.0", addr),
            "by id": passed(req, peer, addr, by=1),
            "other port": passed(roce_mad(0x0010, port ^ 1), peer, addr),
            "not a MAD": passed(req[:-1], peer, addr),
            "class version": passed(roce_mad(0x0010, port, cls_version=1),
                                    peer, addr),
            "bad REQ": passed(req, peer, addr),
        }
        for k, v in kinds.items():
            s.sendto(v, to)
            print("malformed: sent", k)
        return 0
    if mode == "flood":
        s.setblocking(False)
        sent = full = 0
        junk = passed(req, peer, addr, magic=0)
        for _ in range(20000):
            try:
                s.sendto(junk, to)
                sent += 1
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    raise
                full += 1
        print("flood: %d sent, %d refused by the full queue" % (sent, full))
        return 0
    if mode == "door_listen":  # a listener's name only: what comes?
        s.bind(to)
        open(sys.argv[4], "w").close()  # ready
        try:
            b = s.recv(4096)
        except socket.timeout:
            print("door_listen: nothing passed to the name in 10 s")
            return 1
        magic, version, by, n = struct.unpack("<IBBH", b[:8])
        frm, dst = socket.inet_ntoa(b[8:12]), socket.inet_ntoa(b[12:16])
        ok = (magic == MAGIC and version == 1 and by == 2 and
              n == len(req) and b[16:] == req and frm == peer and dst == addr)
        print("door_listen: %s: by %d from %s to %s, %d bytes" %
              ("passed ok" if ok else "WRONG", by, frm, dst, n))
        return 0 if ok else 1
    if mode == "door_send":  # the peer's first REQ, over UDP to 4791
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((peer, 0xD872))
        u.sendto(req, (addr, 4791))
        print("door_send: a REQ for port %d sent to %s" % (port, addr))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
