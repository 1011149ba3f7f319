#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ud_forge.py SECRET_FILE HOST QPN [PORT]: what a stranger on the path does
with softverbs UD datagrams sealed under a shared secret (provider/transport/ud/mac.c,
wire.h struct sv_ud_mac), sent over UDP to HOST's listener (port 4791).
Knowing the secret, it makes datagrams as a sender does, then sends, to
the sink's QP QPN (Q_Key 0x11223344), in order:

  good-1                       sealed, seq 1          taken
  good-1 again, same bytes     a replay               dropped (replay)
  flip-2: one payload bit off  a change on the way    dropped (auth)
  plain-3: no MAC, a good CRC  a peer with no secret  dropped (auth)
  good-4                       sealed, seq 4          taken
  good-4 again                 a replay               dropped (replay)
  old-2 (seq 2 < 4, new)       late, inside window    taken

So the sink must print "got good-1", "got good-4", "got old-2" only, and
count 2 auth drops and 2 replay drops.  The key is derived as auth.c
does: HMAC-SHA-256(secret file bytes, "softverbs-v1 ud datagram")."""
import hashlib
import hmac
import os
import socket
import struct
import sys

MAGIC, VERSION, QKEY = 0x53565544, 1, 0x11223344
F_MAC = 1 << 3


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def header(flags, dst, length, rsvd=0):
    # magic version flags src_qpn dst_qpn qkey imm len rsvd sgid dgid
    return struct.pack("<IHHIIIIII16s16s", MAGIC, VERSION, flags, 0x123,
                       dst, QKEY, 0, length, rsvd, b"\0" * 16, b"\0" * 16)


def sealed(key, sender, seq, dst, payload):
    hdr = header(F_MAC, dst, len(payload))
    ids = struct.pack("<QQ", sender, seq)
    mac = hmac.new(key, hdr + payload + ids, hashlib.sha256).digest()[:16]
    return hdr + payload + ids + mac


def plain(dst, payload):
    d = header(0, dst, len(payload)) + payload
    return header(0, dst, len(payload), crc32c(d)) + payload


def main():
    secret = open(sys.argv[1], "rb").read()
    host, qpn = sys.argv[2], int(sys.argv[3])
    port = int(sys.argv[4]) if len(sys.argv) > 4 else 4791
    key = hmac.new(secret, b"softverbs-v1 ud datagram",
                   hashlib.sha256).digest()
    sender = struct.unpack("<Q", os.urandom(8))[0] | 1
    good1 = sealed(key, sender, 1, qpn, b"good-1")
    flip = bytearray(sealed(key, sender, 2, qpn, b"flip-2"))
    flip[64] ^= 0x01  # the payload's first byte: "glip-2"
    good4 = sealed(key, sender, 4, qpn, b"good-4")
    old2 = sealed(key, sender, 2, qpn, b"old-2")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    for d in (good1, good1, bytes(flip), plain(qpn, b"plain-3"), good4,
              good4, old2):
        s.sendto(d, (host, port))
    print("sent 7")


main()
