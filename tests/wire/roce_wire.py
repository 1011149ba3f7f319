#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 26: the RoCEv2 codec (provider/wire/roce.c) against checkers that
are not the codec.

  roce_wire.py BUILD_DIR TEST

icrc_zlib: roce_gen writes every opcode (RC, UC, UD, XRC, CNP) over IPv4
  (IP IDs as rxe's, DF clear on some) and IPv6, several payload lengths;
  here each packet's ICRC is recomputed with zlib's CRC-32 over the
  frame's own headers masked as IBA A17.3.3 says, its IPv4 header
  checksum or IPv6 UDP checksum checked, and its BTH read back.
tshark: tshark decodes the same file with IP and UDP checksums checked
  and the payload guessers off: every packet RoCE with our opcode, none
  malformed, no expert error or warning; every opcode Wireshark knows
  named (Wireshark 4.0 knows neither XRC's nor CNP's: their BTH only).
  Wireshark 4.0 shows the Invariant CRC but cannot check it (no
  preference, no status field): icrc_zlib is that check.  Skipped (77)
  without tshark.
parse_foreign: packets built here, by an encoder of this file's own from
  IBA table 40 (random IPv4 IDs, IPv6, every opcode), and damaged copies
  (ICRC, a payload byte, the IP ID, pad past the payload, an unknown
  opcode, a header version, cut headers): roce_gen parse must take each
  good one with its fields and refuse each damaged one with its reason;
  the fields outside the ICRC (TTL, TOS, BTH byte 4) changed must not
  matter.
"""
import os
import random
import struct
import subprocess
import sys
import zlib

BUILD = os.path.abspath(sys.argv[1])
TEST = sys.argv[2]
GEN = os.path.join(BUILD, "tests", "roce_gen")
TMP = os.path.join(BUILD, "tests", "roce_wire." + TEST)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


# IBA table 40, written out here: operation -> (extension headers,
# payload); the transport adds DETH (UD) or XRCETH (XRC requests).
OPS = {
    0x00: ([], True), 0x01: ([], True), 0x02: ([], True),
    0x03: (["IMM"], True), 0x04: ([], True), 0x05: (["IMM"], True),
    0x06: (["RETH"], True), 0x07: ([], True), 0x08: ([], True),
    0x09: (["IMM"], True), 0x0a: (["RETH"], True),
    0x0b: (["RETH", "IMM"], True), 0x0c: (["RETH"], False),
    0x0d: (["AETH"], True), 0x0e: ([], True), 0x0f: (["AETH"], True),
    0x10: (["AETH"], True), 0x11: (["AETH"], False),
    0x12: (["AETH", "ATOMACK"], False), 0x13: (["ATOMETH"], False),
    0x14: (["ATOMETH"], False), 0x16: (["IETH"], True),
    0x17: (["IETH"], True),
}
EXT_LEN = {"DETH": 8, "XRCETH": 4, "RETH": 16, "ATOMETH": 28, "AETH": 4,
           "ATOMACK": 8, "IMM": 4, "IETH": 4, "CNP": 16}
RESPONSES = {0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12}


def layout(op):
    """(extension headers in order, payload?) of opcode op, or None."""
    tp, o = op & 0xE0, op & 0x1F
    if op == 0x81:
        return ["CNP"], False
    if tp in (0x00, 0xA0) and o in OPS:
        ext, pay = OPS[o]
        if tp == 0xA0 and o not in RESPONSES:
            ext = ["XRCETH"] + ext
        return ext, pay
    if tp == 0x20 and o <= 0x0B:
        return OPS[o]
    if tp == 0x60 and o in (0x04, 0x05):
        ext, pay = OPS[o]
        return ["DETH"] + ext, pay
    return None


ALL_OPS = [op for op in range(256) if layout(op)]


def icrc(frame):
    """IBA A17.3.3 over a whole Ethernet frame: 8 bytes of ones, IP and
    UDP with TOS/TTL/checksum (IPv4) or class/flow/hop limit (IPv6) and
    the UDP checksum ones, BTH byte 4 ones, the rest; least byte first."""
    et = struct.unpack(">H", frame[12:14])[0]
    m = bytearray(frame[14:-4])
    if et == 0x0800:
        m[1] = 0xFF
        m[8] = 0xFF
        m[10:12] = b"\xff\xff"
        u = 20
    else:
        m[0] |= 0x0F
        m[1:4] = b"\xff\xff\xff"
        m[7] = 0xFF
        u = 40
    m[u + 6:u + 8] = b"\xff\xff"
    m[u + 8 + 4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF)


def csum16(data):
    if len(data) & 1:
        data += b"\0"
    s = sum(struct.unpack(">%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp6_sum(ip):
    ulen = struct.unpack(">H", ip[44:46])[0]
    u = bytearray(ip[40:40 + ulen])
    u[6:8] = b"\0\0"
    return csum16(bytes(ip[8:40]) + struct.pack(">IxxxB", ulen, 17)
                  + bytes(u)) or 0xFFFF


def read_pcap(path):
    d = open(path, "rb").read()
    off, out = 24, []
    while off < len(d):
        _, _, incl, orig = struct.unpack("<IIII", d[off:off + 16])
        if incl != orig:
            fail(f"{path}: a cut record")
        out.append(d[off + 16:off + 16 + incl])
        off += 16 + incl
    return out


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i + 1, 0, len(fr), len(fr)))
            f.write(fr)


def gen_write():
    os.makedirs(TMP, exist_ok=True)
    path = os.path.join(TMP, "codec.pcap")
    r = subprocess.run([GEN, "write", path], capture_output=True,
                       text=True, timeout=30)
    if r.returncode:
        fail(f"roce_gen write: {r.returncode} {r.stderr}")
    built = [tuple(int(x) for x in ln.split())
             for ln in r.stdout.splitlines()]
    frames = read_pcap(path)
    if len(frames) != len(built):
        fail(f"{len(frames)} frames for {len(built)} packets built")
    return path, frames, built


def bth_of(frame):
    u = 14 + (20 if frame[12:14] == b"\x08\x00" else 40)
    return frame[u + 8:u + 20]


def test_icrc_zlib():
    _, frames, built = gen_write()
    seen = set()
    v4 = ids = nodf = 0
    for i, (fr, (op, dqpn, psn, ln)) in enumerate(zip(frames, built)):
        if icrc(fr) != fr[-4:]:
            fail(f"packet {i} (opcode {op:#x}): ICRC {fr[-4:].hex()}, "
                 f"zlib says {icrc(fr).hex()}")
        if fr[12:14] == b"\x08\x00":
            v4 += 1
            if csum16(fr[14:34]):
                fail(f"packet {i}: IPv4 header checksum wrong")
            ids += fr[18:20] != b"\0\0"
            nodf += not fr[20] & 0x40
        elif struct.unpack(">H", fr[14 + 46:14 + 48])[0] != udp6_sum(
                fr[14:]):
            fail(f"packet {i}: IPv6 UDP checksum wrong")
        b = bth_of(fr)
        ext, pay = layout(op)
        hl = 12 + sum(EXT_LEN[e] for e in ext)
        pad = (b[1] >> 4) & 3
        u = 14 + (20 if fr[12:14] == b"\x08\x00" else 40)
        if (b[0] != op or struct.unpack(">I", b[4:8])[0] != dqpn
                or struct.unpack(">I", b[8:12])[0] & 0xFFFFFF != psn
                or len(fr) - u - 8 - hl - 4 - pad != ln or (ln + pad) % 4):
            fail(f"packet {i}: BTH {b.hex()} length {len(fr)} is not "
                 f"opcode {op:#x} dqpn {dqpn:#x} psn {psn:#x} len {ln}")
        seen.add(op)
    if sorted(seen) != ALL_OPS:
        fail(f"opcodes missing: {sorted(set(ALL_OPS) - seen)}")
    if not (v4 and ids and nodf and len(frames) - v4):
        fail(f"{v4} IPv4 ({ids} with an ID, {nodf} without DF), "
             f"{len(frames) - v4} IPv6: not the mix")
    print(f"{len(frames)} packets, {len(seen)} opcodes: every ICRC is "
          f"zlib's ({v4} IPv4, {ids} with a nonzero ID, {nodf} without "
          f"DF; {len(frames) - v4} IPv6)")


def no_payload_guess():
    """The payloads are test bytes: tshark's guesses of what protocol
    they carry (RPC over RDMA, Mellanox EoIB, ...) would call them
    malformed."""
    r = subprocess.run(["tshark", "-G", "heuristic-decodes"],
                       capture_output=True, text=True, timeout=30)
    opts = []
    for ln in r.stdout.splitlines():
        t = ln.split("\t")
        if len(t) >= 3 and t[0] == "infiniband.payload":
            opts += (["--disable-heuristic", "eth_over_ib"]
                     if t[1] == "ethertype"
                     else ["--disable-protocol", t[1]])
    return opts


def test_tshark():
    if not any(os.access(os.path.join(d, "tshark"), os.X_OK)
               for d in os.environ.get("PATH", "").split(":")):
        print("SKIP: tshark is not installed")
        sys.exit(77)
    path, frames, built = gen_write()
    fields = ["infiniband.bth.opcode", "infiniband.bth.destqp",
              "infiniband.bth.psn", "infiniband.invariant.crc",
              "_ws.col.Info", "_ws.malformed", "_ws.expert.severity",
              "_ws.expert.message"]
    r = subprocess.run(["tshark", "-n", "-r", path] + no_payload_guess() +
                       ["-o", "udp.check_checksum:TRUE",
                        "-o", "ip.check_checksum:TRUE",
                        "-T", "fields", "-E", "separator=|",
                        "-E", "occurrence=a"] +
                       sum([["-e", f] for f in fields], []),
                       capture_output=True, text=True, timeout=50)
    if r.returncode:
        fail(f"tshark: {r.stderr}")
    rows = [dict(zip(fields, ln.split("|"))) for ln in r.stdout.splitlines()]
    if len(rows) != len(frames):
        fail(f"tshark read {len(rows)} packets of {len(frames)}")
    named, shown = set(), 0
    for i, (w, fr, (op, dqpn, psn, _)) in enumerate(zip(rows, frames,
                                                        built)):
        what = f"packet {i + 1} (opcode {op:#x}: {w['_ws.col.Info']})"
        if not w["infiniband.bth.opcode"]:
            fail(f"{what}: not decoded as InfiniBand")
        if (int(w["infiniband.bth.opcode"], 0) != op
                or int(w["infiniband.bth.destqp"], 0) != dqpn
                or int(w["infiniband.bth.psn"], 0) != psn):
            fail(f"{what}: BTH read as {w}")
        if w["_ws.malformed"] or "Malformed" in w["_ws.col.Info"]:
            fail(f"{what}: malformed")
        sev = [int(x, 0) for x in w["_ws.expert.severity"].split(",") if x]
        if any(x >= 0x00600000 for x in sev):  # PI_WARN and up
            fail(f"{what}: expert {w['_ws.expert.message']}")
        # tshark shows the ICRC's bytes in wire order, as a number,
        # where it decodes the packet to its end (not past an opcode it
        # does not know, nor past a payload it offered its guessers)
        crc = w["infiniband.invariant.crc"]
        if crc and int(crc, 0) != struct.unpack(">I", fr[-4:])[0]:
            fail(f"{what}: tshark reads the ICRC as {crc}")
        shown += bool(crc)
        if "Unknown" not in w["_ws.col.Info"]:
            named.add(op)
    unnamed = sorted(set(ALL_OPS) - named)
    if any(op & 0xE0 not in (0xA0, 0x80) for op in unnamed):
        fail(f"tshark names no opcode {[hex(o) for o in unnamed]}")
    if shown < len(rows) // 2:
        fail(f"tshark showed the ICRC of {shown} packets of {len(rows)}")
    print(f"{len(rows)} packets decoded, none malformed, no expert "
          f"warning; {len(named)} opcodes named, {len(unnamed)} "
          f"(XRC, CNP) unknown to this Wireshark but framed; the ICRC "
          f"it shows ({shown} packets) is ours")


def frame_of(op, v6, ip_id, df, ext_bytes, payload, pad=None, tver=0,
             fb=0, ttl=64, tos=0, rng=None):
    """A whole frame built here: Ethernet, IP, UDP, BTH, ext_bytes,
    payload, pad, ICRC."""
    pad = (-len(payload)) % 4 if pad is None else pad
    dqpn = rng.randrange(1 << 24)
    psn = rng.randrange(1 << 24)
    bth = struct.pack(">BBHII", op, (pad << 4) | tver, 0xFFFF,
                      (fb << 24) | dqpn, psn)
    ib = bth + ext_bytes + payload + b"\0" * ((-len(payload)) % 4) + b"\0" * 4
    ulen = 8 + len(ib)
    udp = struct.pack(">HHHH", 49152 + rng.randrange(1000), 4791, ulen, 0)
    if v6:
        ip = (struct.pack(">IHBB", 0x60000000, ulen, 17, ttl)
              + bytes.fromhex("fd00" + "00" * 13 + "01")
              + bytes.fromhex("fd00" + "00" * 13 + "02"))
        et = b"\x86\xdd"
    else:
        ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, tos, 20 + ulen,
                                   ip_id, 0x4000 if df else 0, ttl, 17, 0,
                                   bytes([10, 77, 0, 1]),
                                   bytes([10, 77, 0, 2])))
        ip[10:12] = struct.pack(">H", csum16(bytes(ip)))
        ip = bytes(ip)
        et = b"\x08\x00"
    fr = bytearray(b"\x02" * 12 + et + ip + udp + ib)
    fr[-4:] = icrc(bytes(fr))
    if v6:
        fr[14 + 46:14 + 48] = struct.pack(">H", udp6_sum(bytes(fr[14:])))
    return bytes(fr), dqpn, psn


def reseal(fr):
    fr = bytearray(fr)
    fr[-4:] = icrc(bytes(fr))
    return bytes(fr)


def test_parse_foreign():
    rng = random.Random(26)
    cases = []  # (frame, verdict, opcode, dqpn, psn, len)
    for op in ALL_OPS:
        ext, pay = layout(op)
        for v6 in (0, 1):
            for ln in ((0, 1, 3, 4, 1000, 4096) if pay else (0,)):
                eb = bytes(rng.randrange(256)
                           for _ in range(sum(EXT_LEN[e] for e in ext)))
                pl = bytes(rng.randrange(256) for _ in range(ln))
                fr, dq, ps = frame_of(op, v6, rng.randrange(65536),
                                      rng.randrange(4) > 0, eb, pl, rng=rng)
                cases.append((fr, "ok", op, dq, ps, ln))
    good = len(cases)
    # damaged copies of good ones, each with its reason
    bad = []
    for fr, _, op, dq, ps, ln in cases[::7]:
        f = bytearray(fr)
        f[-1] ^= 0x01
        bad.append((bytes(f), "bad_icrc"))
        if ln:
            f = bytearray(fr)
            f[-5 - ((-ln) % 4)] ^= 0x80  # the payload's last byte
            bad.append((bytes(f), "bad_icrc"))
        if fr[12:14] == b"\x08\x00":
            f = bytearray(fr)  # another IP ID, header checksum fixed
            f[18] ^= 0x40
            f[24:26] = b"\0\0"
            f[24:26] = struct.pack(">H", csum16(bytes(f[14:34])))
            bad.append((bytes(f), "bad_icrc"))
            f = bytearray(fr)  # TTL and TOS: outside the ICRC
            f[15] = 0x2E
            f[22] = 3
            f[24:26] = b"\0\0"
            f[24:26] = struct.pack(">H", csum16(bytes(f[14:34])))
            cases.append((bytes(f), "ok", op, dq, ps, ln))
        f = bytearray(fr)  # BTH byte 4 (FECN/BECN): outside
        u = 14 + (20 if fr[12:14] == b"\x08\x00" else 40) + 8
        f[u + 4] = 0xC0
        cases.append((bytes(f), "ok", op, dq, ps, ln))
    for fr, why in bad:
        cases.append((fr, why, -1, None, None, None))
    # malformed but well sealed: the parser's own reasons
    def sealed(op, tail, v6=0, **kw):
        fr, _, _ = frame_of(op, v6, 7, True, tail, b"", rng=rng, **kw)
        return reseal(fr)
    cases += [
        (sealed(0x04, b"", pad=1), "bad_pad", -1, None, None, None),
        (sealed(0x04, b"ab", pad=3), "bad_pad", -1, None, None, None),
        (sealed(0x11, b"\0" * 4, pad=2), "bad_pad", -1, None, None, None),
        (sealed(0x11, b"\0" * 8), "bad_length", -1, None, None, None),
        (sealed(0x15, b""), "bad_opcode", -1, None, None, None),
        (sealed(0x44, b""), "bad_opcode", -1, None, None, None),
        (sealed(0x2C, b"\0" * 16), "bad_opcode", -1, None, None, None),
        (sealed(0x04, b"", tver=2), "bad_tver", -1, None, None, None),
        (sealed(0x0C, b"\0" * 12), "truncated_headers", -1, None, None,
         None),
        (sealed(0xB4, b"\0" * 20, v6=1), "truncated_headers", -1, None,
         None, None),
    ]
    os.makedirs(TMP, exist_ok=True)
    path = os.path.join(TMP, "foreign.pcap")
    write_pcap(path, [c[0] for c in cases])
    r = subprocess.run([GEN, "parse", path], capture_output=True,
                       text=True, timeout=30)
    if r.returncode:
        fail(f"roce_gen parse: {r.returncode} {r.stderr}")
    got = r.stdout.splitlines()
    if len(got) != len(cases):
        fail(f"{len(got)} verdicts for {len(cases)} packets")
    for i, (c, line) in enumerate(zip(cases, got)):
        v, op, dq, ps, ln = line.split()
        want = c[1:]
        if v != want[0]:
            fail(f"packet {i} (opcode {c[0][14 + 28:14 + 29].hex()}): "
                 f"{v}, expected {want[0]}")
        if v == "ok" and (int(op), int(dq), int(ps), int(ln)) != want[1:]:
            fail(f"packet {i}: parsed {line}, built {want}")
    print(f"{good} good packets of {len(ALL_OPS)} opcodes taken with their "
          f"fields; {len(cases) - good} altered: each with its verdict")


{"icrc_zlib": test_icrc_zlib, "tshark": test_tshark,
 "parse_foreign": test_parse_foreign}[TEST]()
