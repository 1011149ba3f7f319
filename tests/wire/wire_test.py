#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 14, acceptance 1 and 3: what softverbs shows of the wire.

  wire_test.py BUILD_DIR TEST

pcap_rc_pingpong[_tcp]: ibv_rc_pingpong -n 10, both sides captured
  (SOFTVERBS_PCAP, nothing else set: sends placed by single copy over
  shared memory); tshark decodes both files as InfiniBand with no
  plug-in and calls no packet malformed: the opcodes of 4 KiB messages at a 1024-byte MTU (SEND
  FIRST/MIDDLE/MIDDLE/LAST), the QPNs and first PSNs the program printed,
  every request PSN once per direction with no holes, ACKs for them, the
  two captures the mirror of each other; every packet whole (the default
  snap length is tcpdump's, 262144) and its ICRC recomputed here (zlib's
  CRC-32, IBA A17's masks).
pcap_write_bw: ib_write_bw -n 100 -s 8192 (two 4 KiB packets a write): the
  writes carry their RETH (the va/rkey the server printed, DMA length
  8192), PSNs from the client's, no holes; the client's capture with
  SOFTVERBS_PCAP_SNAP=200: every packet cut at 200 bytes of the frame,
  orig_len its true length.
pcap_conformance[_tcp|_snap]: conformance tests that between them send
  every opcode (SEND, +IMM, RDMA WRITE, +IMM, READ request and responses
  FIRST/MIDDLE/LAST/ONLY, CMP_SWP, FETCH_ADD and their ACKs, ACK, RNR and
  access NAKs, UC, UD with and without GRH), run with SOFTVERBS_PCAP over
  shared memory (sends placed by single copy, one-sided operations done
  in the peer's memory) or TCP (the responder's paths), with an SRQ, XRC
  and IPv6: tshark finds no malformed packet and no expert error, with
  the UDP and IP checksums checked (and its guess that a payload is an
  Ethernet frame, eth_over_ib, off: the tests' bytes are not); the opcodes and NAKs above are all there; every record is
  whole (incl_len = orig_len) but the target's view of a write with
  immediate done in its memory; ICRCs right; the payload bytes the tests
  sent are in the capture (a placed send, a direct write and read).
  Over TCP the softverbs door is on a free port of the test's own
  (SOFTVERBS_TCP_PORT), not the port every process of the user shares.
  _snap: SOFTVERBS_PCAP_SNAP=100 cuts every longer packet at 100 bytes
  with orig_len the true length; tshark still finds nothing malformed.
capture_fifo_reader_leaves|_no_reader|_reader_stalls: SOFTVERBS_PCAP naming
  a FIFO never kills or hangs the program (issue 24; capture_fifo says
  how).
stat_send_bw: softverbs-stat PID on a running ib_send_bw client: tx_pkts
  grows between two reads, every read agrees with the message size and
  MTU (tx_bytes = tx_pkts x 4096 within one train) and stays within the
  iterations the program reports; --json parses; errors for no process
  and for a process without softverbs.

Exits 77 (skipped) when tshark or the perftest programs are missing.
"""
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import zlib

BUILD = os.path.abspath(sys.argv[1])
TEST = sys.argv[2]
RUN = os.path.join(BUILD, "bin", "softverbs-run")
STAT = os.path.join(BUILD, "bin", "softverbs-stat")
DEADLINE = time.monotonic() + float(os.environ.get("SV_TEST_DEADLINE", 120)) - 10
TMP = None


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def need(prog):
    for d in os.environ.get("PATH", "").split(":"):
        if os.access(os.path.join(d, prog), os.X_OK):
            return
    skip(f"{prog} is not installed (scripts/install-deps installs it)")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def listening(port):
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in open(f).readlines()[1:]:
                a = line.split()
                if a[3] == "0A" and int(a[1].split(":")[1], 16) == port:
                    return True
        except OSError:
            pass
    return False


def left():
    return DEADLINE - time.monotonic()


def prog_env(env):
    e = dict(os.environ)
    e.update(env)
    rt = os.environ.get("SV_ASAN_RUNTIME")
    if rt:
        # Debian's programs are not instrumented: the ASan runtime first
        # (softverbs-run puts our library after it), as tests/programs
        e["LD_PRELOAD"] = rt
        e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    return e


def start(tag, argv, env):
    e = prog_env(env)
    out = open(os.path.join(TMP, tag + ".out"), "w")
    return subprocess.Popen([RUN] + argv, env=e, stdout=out,
                            stderr=subprocess.STDOUT)


def pair(prog, args, env_s, env_c):
    """Server, then the client once the server listens; both outputs."""
    port = free_port()
    srv = start("srv", [prog, "-p", str(port)] + args, env_s)
    procs = [srv]
    try:
        while not listening(port):
            if srv.poll() is not None:
                fail(f"{prog} server exited: " + output("srv"))
            if left() < 0:
                fail(f"{prog} server never listened on {port}")
            time.sleep(0.01)  # polling for the server, under the deadline
        cli = start("cli", [prog, "-p", str(port)] + args + ["localhost"],
                    env_c)
        procs.append(cli)
        for p in (cli, srv):
            try:
                p.wait(timeout=max(left(), 1))
            except subprocess.TimeoutExpired:
                fail(f"{prog} still running at the deadline\n"
                     + output("cli") + output("srv"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if cli.returncode or srv.returncode:
        fail(f"{prog}: client {cli.returncode}, server {srv.returncode}\n"
             + output("cli") + output("srv"))
    return output("srv"), output("cli")


def output(tag):
    return open(os.path.join(TMP, tag + ".out")).read()


def tshark(path, fields):
    r = subprocess.run(["tshark", "-r", path, "-Y", "infiniband", "-T",
                        "fields", "-E", "separator=|"] +
                       sum([["-e", f] for f in fields], []),
                       capture_output=True, text=True,
                       timeout=max(left(), 1))
    if r.returncode:
        fail(f"tshark -r {path}: {r.stderr}")
    rows = []
    for line in r.stdout.splitlines():
        v = line.split("|")
        rows.append(dict(zip(fields, v)))
    return rows


def num(s):
    return int(s, 0) if s else None


def pcap_records(path):
    """(incl, orig, frame bytes) of each record, checking the file."""
    d = open(path, "rb").read()
    if len(d) < 24:
        fail(f"{path}: no pcap header")
    magic, maj, mnr, _, _, snap, link = struct.unpack("<IHHiIII", d[:24])
    if magic != 0xA1B23C4D or (maj, mnr) != (2, 4) or link != 1:
        fail(f"{path}: header {magic:#x} {maj}.{mnr} link {link}")
    off, recs = 24, []
    while off < len(d):
        if off + 16 > len(d):
            fail(f"{path}: a cut record header at {off}")
        _, _, incl, orig = struct.unpack("<IIII", d[off:off + 16])
        if incl > orig or incl > snap or off + 16 + incl > len(d):
            fail(f"{path}: record at {off}: incl {incl} orig {orig}")
        recs.append((incl, orig, d[off + 16:off + 16 + incl]))
        off += 16 + incl
    return recs


def icrc_ok(frame):
    """IBA A17.3.3 / rxe_icrc.c: CRC-32 over 8 bytes of ones (for the
    LRH), the IP and UDP headers with their variant fields ones, the BTH
    with its reserved byte (FECN/BECN) ones, the rest; least byte first."""
    et = struct.unpack(">H", frame[12:14])[0]
    m = bytearray(frame[14:-4])
    if et == 0x0800:
        m[1] = 0xFF
        m[8] = 0xFF
        m[10:12] = b"\xff\xff"
        m[26:28] = b"\xff\xff"
        m[32] = 0xFF
    else:
        m[0] |= 0x0F
        m[1:4] = b"\xff\xff\xff"
        m[7] = 0xFF
        m[46:48] = b"\xff\xff"
        m[52] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF
    return struct.pack("<I", crc) == frame[-4:]


def addr(out, which):
    m = re.search(which + r" address:.*QPN (0x[0-9a-f]+).*PSN (0x[0-9a-f]+)"
                  r"(?:.*RKey (0x[0-9a-f]+) VAddr (0x[0-9a-f]+))?", out)
    if not m:
        fail(f"no '{which} address' line in:\n{out}")
    return [num(x) if x else None for x in m.groups()]


PP_FIELDS = ["frame.number", "infiniband.bth.opcode",
             "infiniband.bth.destqp", "infiniband.bth.psn",
             "infiniband.aeth.syndrome", "infiniband.aeth.msn",
             "frame.len", "frame.cap_len", "_ws.col.Info", "_ws.malformed"]


def check_requests(rows, dqp, psn0, count, ops, what):
    """count request packets to dqp: PSNs psn0.. once each, no holes,
    opcodes cycling through ops; ACKs back cover them."""
    req = [r for r in rows if num(r["infiniband.bth.destqp"]) == dqp
           and num(r["infiniband.bth.opcode"]) != 17]
    if len(req) != count:
        fail(f"{what}: {len(req)} request packets to {dqp:#x}, "
             f"expected {count}")
    for i, r in enumerate(req):
        want = (psn0 + i) & 0xFFFFFF
        if num(r["infiniband.bth.psn"]) != want:
            fail(f"{what}: packet {i} to {dqp:#x} has PSN "
                 f"{r['infiniband.bth.psn']}, expected {want}")
        op = num(r["infiniband.bth.opcode"])
        if op != ops[i % len(ops)]:
            fail(f"{what}: packet {i} opcode {op}, expected "
                 f"{ops[i % len(ops)]}")
    return req


def check_acks(rows, to_qp, psn0, count, what):
    acks = [num(r["infiniband.bth.psn"]) for r in rows
            if num(r["infiniband.bth.destqp"]) == to_qp
            and num(r["infiniband.bth.opcode"]) == 17]
    last = (psn0 + count - 1) & 0xFFFFFF
    if not acks or acks[-1] != last:
        fail(f"{what}: ACKs to {to_qp:#x} {acks[-3:]}, the last should "
             f"be {last:#x}")
    for a in acks:
        if (a - psn0) & 0xFFFFFF >= count:
            fail(f"{what}: ACK of PSN {a:#x} outside the requests")
    syn = {r["infiniband.aeth.syndrome"] for r in rows
           if num(r["infiniband.bth.opcode"]) == 17}
    if syn - {"0x1f", "31"}:
        fail(f"{what}: ACK syndromes {syn}, expected only 0x1f (ACK)")


def pcap_rc_pingpong(tcp):
    env = {}
    if tcp:
        env["SOFTVERBS_TRANSPORT"] = "tcp"
    es = dict(env, SOFTVERBS_PCAP=os.path.join(TMP, "srv-%p.pcap"))
    ec = dict(env, SOFTVERBS_PCAP=os.path.join(TMP, "cli.pcap"))
    so, co = pair("ibv_rc_pingpong", ["-n", "10"], es, ec)
    sp = [f for f in os.listdir(TMP) if f.startswith("srv-")]
    if len(sp) != 1 or not re.fullmatch(r"srv-\d+\.pcap", sp[0]):
        fail(f"%p not expanded: {sp}")
    cq, cpsn, _, _ = addr(co, "local")
    sq, spsn, _, _ = addr(so, "local")
    if addr(co, "remote")[:2] != [sq, spsn]:
        fail("the client's remote address is not the server's")
    seen = {}
    for side, path in (("client", os.path.join(TMP, "cli.pcap")),
                       ("server", os.path.join(TMP, sp[0]))):
        # payloads in clear: the owner's alone, whatever the umask
        mode = os.stat(path).st_mode & 0o777
        if mode != 0o600:
            fail(f"{side}: capture created mode {mode:03o}, not 600")
        rows = tshark(path, PP_FIELDS)
        ops = [0, 1, 1, 2]  # 4096 bytes at MTU 1024
        c2s = check_requests(rows, sq, cpsn, 40, ops, side + " c->s")
        s2c = check_requests(rows, cq, spsn, 40, ops, side + " s->c")
        check_acks(rows, cq, cpsn, 40, side + " acks to client")
        check_acks(rows, sq, spsn, 40, side + " acks to server")
        recs = pcap_records(path)
        if len(recs) != len(rows):
            fail(f"{side}: tshark saw {len(rows)} InfiniBand packets of "
                 f"{len(recs)}")
        whole = [f for i, o, f in recs if i == o]
        if len(whole) != len(recs):
            fail(f"{side}: {len(recs) - len(whole)} packets cut at the "
                 f"default snap length")
        bad = [r["frame.number"] for r in rows if r["_ws.malformed"]
               or "Malformed" in r["_ws.col.Info"]]
        if bad:
            fail(f"{side}: tshark calls frames {bad[:5]} malformed")
        bad = [k for k, f in enumerate(whole) if not icrc_ok(f)]
        if bad:
            fail(f"{side}: ICRC wrong in frames {bad[:5]}")
        for r in c2s + s2c:
            if r["frame.len"] != "1082":
                fail(f"{side}: a 1024-byte packet of {r['frame.len']}")
        seen[side] = [(r["infiniband.bth.opcode"], r["infiniband.bth.destqp"],
                       r["infiniband.bth.psn"]) for r in c2s + s2c]
    if seen["client"] != seen["server"]:
        fail("the two captures do not show the same requests")
    print(f"ok: 2 x {len(recs)} packets, QPN {cq:#x}/{sq:#x}, PSN "
          f"{cpsn:#x}/{spsn:#x}, ICRCs right")


def pcap_write_bw():
    need("ib_write_bw")
    es = {"SOFTVERBS_PCAP": os.path.join(TMP, "srv.pcap")}
    ec = {"SOFTVERBS_PCAP": os.path.join(TMP, "cli.pcap"),
          "SOFTVERBS_PCAP_SNAP": "200"}
    so, co = pair("ib_write_bw", ["-n", "100", "-s", "8192"], es, ec)
    cq, cpsn, _, _ = addr(co, "local")
    sq, spsn, rkey, va = addr(co, "remote")
    if addr(so, "local") != [sq, spsn, rkey, va]:
        fail("the client's remote address is not what the server printed")
    fields = PP_FIELDS + ["infiniband.reth.va", "infiniband.reth.r_key",
                          "infiniband.reth.dmalen"]
    rows = tshark(os.path.join(TMP, "cli.pcap"), fields)
    mtu = int(re.search(r"Mtu\s*:\s*(\d+)", co).group(1))
    per = (8192 + mtu - 1) // mtu
    ops = [0x0A] if per == 1 else [6] + [7] * (per - 2) + [8]
    req = check_requests(rows, sq, cpsn, 100 * per, ops, "writes")
    check_acks(rows, cq, cpsn, 100 * per, "acks")
    for k, r in enumerate(req):
        first = k % per == 0
        v = (num(r["infiniband.reth.va"]), num(r["infiniband.reth.r_key"]),
             num(r["infiniband.reth.dmalen"]))
        if first and (v[1] != rkey or v[2] != 8192 or v[0] is None
                      or not va <= v[0] < va + (1 << 26)):
            fail(f"write {k // per}: RETH {v}, expected va {va:#x}.., "
                 f"rkey {rkey:#x}, len 8192")
        if not first and v != (None, None, None):
            fail(f"write packet {k} carries a RETH")
    recs = pcap_records(os.path.join(TMP, "cli.pcap"))
    cut = [(i, o) for i, o, f in recs if i < o]
    if len(cut) != 100 * per:
        fail(f"{len(cut)} packets cut at the snap length, expected "
             f"{100 * per}")
    for i, o in cut:
        # Ethernet, IPv4, UDP, BTH (+RETH on the first), MTU, ICRC
        if i != 200 or o not in (54 + mtu + 4, 54 + 16 + mtu + 4):
            fail(f"a cut packet keeps {i} of {o} bytes")
    print(f"ok: {len(req)} write packets with RETH rkey {rkey:#x}, PSNs "
          f"from {cpsn:#x}; the target's capture has "
          f"{len(pcap_records(os.path.join(TMP, 'srv.pcap')))} packets")


# (binary, test): between them every opcode, both QP types that connect,
# UD, RNR and access NAKs; over TCP the single-copy test skips (77)
PCAP_CONF_TESTS = [
    ("test_conf", "send_basic"),
    ("test_conf", "send_with_imm"),
    ("test_conf", "send_larger_than_mtu"),
    ("test_conf", "single_copy_is_placed_by_the_sender"),
    ("test_conf", "single_copy_sizes_and_pieces"),
    ("test_conf", "srq_single_copy_is_placed_by_the_sender"),
    ("test_conf", "xrc_rdma_write_read_atomic"),
    ("test_conf", "rc_over_ipv6_loopback_gid"),
    ("test_conf", "uc_send_write_write_imm"),
    ("test_conf", "ud_send_recv_grh"),
    ("test_conf", "ud_send_with_imm"),
    ("test_conf", "rnr_retry_infinite"),
    ("test_conf", "srq_32_qps_under_load_exactly_once"),
    ("test_conf_rdma", "rdma_write_sizes_one_sge"),
    ("test_conf_rdma", "rdma_read_sizes_one_sge"),
    ("test_conf_rdma", "rdma_write_with_imm"),
    ("test_conf_rdma", "rdma_compare_and_swap"),
    ("test_conf_rdma", "rdma_fetch_and_add"),
    ("test_conf_rdma", "rdma_err_bad_rkey"),
    ("test_conf_rdma", "rdma_qp_ex_all_opcodes"),
    ("test_conf_mw", "mw_send_with_inv_small"),
    ("test_conf_mw", "mw_send_with_inv_large"),
]

# IBA opcodes (transport prefix | code) each capture must show
PCAP_RC_OPS = {0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST",
               0x04: "SEND_ONLY", 0x05: "SEND_ONLY_IMM",
               0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE", 0x08: "WRITE_LAST",
               0x0A: "WRITE_ONLY", 0x0C: "READ_REQUEST",
               0x0D: "READ_RESP_FIRST", 0x0E: "READ_RESP_MIDDLE",
               0x0F: "READ_RESP_LAST", 0x10: "READ_RESP_ONLY",
               0x11: "ACK", 0x12: "ATOMIC_ACK", 0x13: "CMP_SWAP",
               0x14: "FETCH_ADD", 0x16: "SEND_LAST_INV",
               0x17: "SEND_ONLY_INV", 0x64: "UD_SEND_ONLY",
               0x65: "UD_SEND_ONLY_IMM"}
# writes with immediate: the target of one done in its memory (shared
# memory) sees only its last packet, with no bytes at hand: cut
PCAP_NOTE_OPS = {0x09, 0x0B, 0x29, 0x2B}


def pattern(n, seed, at=0):
    """tests/conformance/pair.c sv_fill's bytes at..at+n."""
    out = bytearray(n)
    for k in range(n):
        x = ((at + k) * 2654435761 + seed * 40503) & 0xFFFFFFFF
        out[k] = ((x >> 13) ^ (x >> 5) ^ seed) & 0xFF
    return bytes(out)


def udp6_ok(frame):
    """RFC 8200 8.1 over a whole IPv6 frame (tshark checks it too)."""
    ip = frame[14:]
    ulen = struct.unpack(">H", ip[44:46])[0]
    u = bytearray(ip[40:40 + ulen])
    want = struct.unpack(">H", bytes(u[6:8]))[0]
    u[6:8] = b"\0\0"
    data = bytes(ip[8:40]) + struct.pack(">IxxxB", ulen, 17) + bytes(u)
    if len(data) & 1:
        data += b"\0"
    s = sum(struct.unpack(">%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    s = ~s & 0xFFFF
    return want == (s or 0xFFFF)


def no_payload_guess():
    """tshark options that leave the payload undecoded: the payloads are
    the tests' bytes, and tshark's heuristic guesses of what protocol an
    InfiniBand payload carries decode some as other protocols gone wrong
    (srq_32_qps_under_load_exactly_once's as Ethernet over IB with bogus
    IPv4, a 1-byte SEND LAST cut short of its train as RPC over RDMA)."""
    r = subprocess.run(["tshark", "-G", "heuristic-decodes"],
                       capture_output=True, text=True,
                       timeout=max(left(), 1))
    opts = []
    for ln in r.stdout.splitlines():
        t = ln.split("\t")
        if len(t) < 3 or t[0] != "infiniband.payload":
            continue
        if t[1] == "ethertype":  # packet-infiniband.c's own
            opts += ["--disable-heuristic", "eth_over_ib"]
        else:
            opts += ["--disable-protocol", t[1]]
    return opts


def pcap_conformance(tcp, snap):
    env = dict(os.environ)
    env.pop("SOFTVERBS_TRANSPORT", None)
    env.update({"SV_BUILD_DIR": BUILD, "SV_TEST_DEADLINE": "60"})
    if tcp:
        env["SOFTVERBS_TRANSPORT"] = "tcp"
        # a door of our own (a caller's SOFTVERBS_TCP_PORT kept): on the
        # default port every softverbs process of the user shares the
        # door (SO_REUSEPORT), and a call the kernel hands to a stopped
        # or starved process's door waits 25, 50, 100 .. 1000 ms for it
        # (tcp.c DOOR_WAIT_NS): one listener there that never accepted
        # made xrc_rdma_write_read_atomic miss its 5 s in 1 run of 15
        env.setdefault("SOFTVERBS_TCP_PORT", str(free_port()))
    if snap:
        env["SOFTVERBS_PCAP_SNAP"] = str(snap)
    ran = 0
    for binary, name in PCAP_CONF_TESTS:
        env["SOFTVERBS_PCAP"] = os.path.join(TMP, name + "-%p.pcap")
        r = subprocess.run([os.path.join(BUILD, "tests", binary), name],
                           env=env, capture_output=True, text=True,
                           timeout=max(left(), 1))
        if r.returncode == 77 and tcp:
            continue
        if r.returncode:
            fail(f"{binary} {name}: rc {r.returncode}\n{r.stdout}"
                 f"{r.stderr}")
        ran += 1
    files = sorted(f for f in os.listdir(TMP) if f.endswith(".pcap"))
    if not files:
        fail("no capture written")
    recs = []
    for f in files:
        recs += pcap_records(os.path.join(TMP, f))
    merged = os.path.join(TMP, "all.pcapng")
    r = subprocess.run(["mergecap", "-w", merged] +
                       [os.path.join(TMP, f) for f in files],
                       capture_output=True, text=True,
                       timeout=max(left(), 1))
    if r.returncode:
        fail(f"mergecap: {r.stderr}")
    fields = ["frame.len", "frame.cap_len", "infiniband.bth.opcode",
              "infiniband.aeth.syndrome", "_ws.col.Info", "_ws.malformed",
              "_ws.expert.severity", "_ws.expert.message"]
    r = subprocess.run(["tshark", "-n", "-r", merged] + no_payload_guess() +
                       ["-o", "udp.check_checksum:TRUE",
                        "-o", "ip.check_checksum:TRUE",
                        "-T", "fields", "-E", "separator=|",
                        "-E", "occurrence=a"] +
                       sum([["-e", f] for f in fields], []),
                       capture_output=True, text=True,
                       timeout=max(left(), 1))
    if r.returncode:
        fail(f"tshark: {r.stderr}")
    rows = [dict(zip(fields, ln.split("|"))) for ln in r.stdout.splitlines()]
    if len(rows) != len(recs):
        fail(f"tshark read {len(rows)} packets of {len(recs)}")
    ops, syn = {}, set()
    for k, w in enumerate(rows):
        what = f"packet {k + 1} ({w['_ws.col.Info']})"
        if not w["infiniband.bth.opcode"]:
            fail(f"{what}: not decoded as InfiniBand")
        if w["_ws.malformed"]:
            fail(f"{what}: malformed")
        sev = [int(x, 0) for x in w["_ws.expert.severity"].split(",") if x]
        if any(x >= 0x00800000 for x in sev):  # PI_ERROR
            fail(f"{what}: expert error {w['_ws.expert.message']}")
        op = num(w["infiniband.bth.opcode"])
        cut = w["frame.len"] != w["frame.cap_len"]
        if not cut and "Malformed" in w["_ws.col.Info"]:
            fail(f"{what}: a whole packet that tshark calls malformed")
        ops.setdefault(op, [0, 0])[cut] += 1
        for s in w["infiniband.aeth.syndrome"].split(","):
            if s:
                syn.add(num(s))
    missing = [n for o, n in PCAP_RC_OPS.items() if o not in ops]
    if not any(0x20 <= o <= 0x2B for o in ops):
        missing.append("UC")
    if not ops.keys() & {0x03, 0x05}:
        missing.append("SEND with immediate")
    if not ops.keys() & {0x09, 0x0B}:
        missing.append("WRITE with immediate")
    if not any(0x20 <= s < 0x40 for s in syn):
        missing.append("RNR NAK")
    if 0x62 not in syn:
        missing.append("NAK remote access")
    if missing:
        fail(f"opcodes/syndromes not seen: {missing}; seen "
             f"{sorted(hex(o) for o in ops)}, syndromes "
             f"{sorted(hex(s) for s in syn)}")
    for incl, orig, frame in recs:
        op = frame[14 + (20 if frame[12:14] == b"\x08\x00" else 40) + 8]
        if incl != min(orig, snap or 262144) and not (
                op in PCAP_NOTE_OPS and incl < orig):
            fail(f"a record of opcode {op:#x} keeps {incl} of {orig} "
                 f"bytes (snap {snap})")
        if incl == orig and not icrc_ok(frame):
            fail(f"ICRC wrong in a {orig}-byte packet")
        if incl == orig and frame[12:14] == b"\x86\xdd" and \
                not udp6_ok(frame):
            fail(f"UDP checksum wrong in a {orig}-byte IPv6 packet")
    for op in PCAP_NOTE_OPS:
        whole, cut = ops.get(op, [0, 0])
        if cut > whole:
            fail(f"opcode {op:#x}: {cut} cut, {whole} whole: the "
                 f"initiator's packets must be whole")
    if snap:
        print(f"ok: {ran} tests, {len(files)} captures, {len(rows)} "
              f"packets cut at {snap}: none malformed, no expert error")
        return
    # (test, seed of its bytes, copies): both ends of a pair are in one
    # process, so a placed send shows its bytes as sent (the gather list)
    # and as received (the receive buffer it was placed in); single copy
    # is shared memory's (the tests skip over TCP)
    for name, seed, want in (
            ("single_copy_is_placed_by_the_sender", 3, 2),
            ("srq_single_copy_is_placed_by_the_sender", 5, 2),
            ("rdma_write_sizes_one_sge", 5, 1),
            ("rdma_read_sizes_one_sge", 35, 1)):
        if tcp and "single_copy" in name:
            continue
        blob = b"".join(open(os.path.join(TMP, f), "rb").read()
                        for f in files if f.startswith(name + "-"))
        for at in (0, 41000, 65400):
            got = blob.count(pattern(100, seed, at))
            if got < want:
                fail(f"{name}: bytes {at}..{at + 100} (seed {seed}) are "
                     f"in the capture {got} times, expected {want}")
    print(f"ok: {ran} tests, {len(files)} captures, {len(rows)} packets, "
          f"{len(ops)} opcodes, syndromes {sorted(hex(s) for s in syn)}: "
          f"none malformed, no expert error, payloads there")



def fifo_reader(path, take, hold):
    """A thread that opens the FIFO for reading, takes `take` bytes (all
    of them: None), then closes it; or holds it open unread (hold)."""
    import threading
    done = threading.Event()

    def run():
        fd = os.open(path, os.O_RDONLY)
        got = 0
        while not hold and (take is None or got < take):
            b = os.read(fd, 65536 if take is None else take - got)
            if not b:
                break
            got += len(b)
        if hold:
            done.wait()
        os.close(fd)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return done


def capture_fifo(case):
    """Issue 24 item 4: SOFTVERBS_PCAP naming a FIFO never kills or hangs
    the program.  reader_leaves: the reader takes 1000 bytes and closes
    (`head -c 1000`): the server of ibv_rc_pingpong -n 1000 goes on to
    exit 0 with one line (before: SIGPIPE, exit 141).  no_reader: nobody
    opens the FIFO: ibv_devinfo exits 0 within 10 s and the ping-pong
    completes, each with one line (before: blocked in open(2) for ever).
    reader_stalls: the reader opens the FIFO and reads nothing: the
    capture stops after a second with one line and the ping-pong
    completes (before: blocked in write(2) for ever)."""
    global DEADLINE
    DEADLINE = min(DEADLINE, time.monotonic() + 40)
    fifo = os.path.join(TMP, "cap.fifo")
    os.mkfifo(fifo)
    lines = {"reader_leaves": "the reader went away",
             "no_reader": "no reader opened the FIFO",
             "reader_stalls": "the reader took nothing for a second"}
    line = lines[case]
    done = None
    if case == "reader_leaves":
        done = fifo_reader(fifo, 1000, False)
    elif case == "reader_stalls":
        done = fifo_reader(fifo, None, True)
    else:
        t0 = time.monotonic()
        try:
            r = subprocess.run([RUN, "ibv_devinfo"], capture_output=True,
                               text=True, timeout=30,
                               env=prog_env({"SOFTVERBS_PCAP": fifo}))
        except subprocess.TimeoutExpired:
            fail("ibv_devinfo with a FIFO nobody reads: still running "
                 "after 30 s")
        took = time.monotonic() - t0
        if r.returncode or took > 10 or r.stderr.count(line) != 1:
            fail(f"ibv_devinfo with a FIFO nobody reads: rc "
                 f"{r.returncode} after {took:.1f} s: {r.stderr}")
    try:
        so, co = pair("ibv_rc_pingpong", ["-n", "1000"],
                      {"SOFTVERBS_PCAP": fifo}, {})
    finally:
        if done:
            done.set()
    if so.count(line) != 1 or "softverbs" in co:
        fail(f"expected one line '{line}' from the server:\n{so}\n"
             f"client:\n{co}")
    print(f"ok: {case}: exit 0, '{line}'")


def stat_json(pid):
    r = subprocess.run([STAT, "--json", str(pid)], capture_output=True,
                       text=True, timeout=max(left(), 1))
    if r.returncode:
        return None, r
    return json.loads(r.stdout), r


def stat_send_bw():
    need("ib_send_bw")
    # long enough for several refreshes of the table (SV_STAT_PERIOD_NS,
    # 250 ms), whatever the speed: a count of messages was either over in
    # under a second (600,000 once shared memory moved 40 GB/s: tx_pkts
    # seen to move once) or, on a loaded machine, past the deadline
    # (2,000,000 took over 110 s); -D runs for seconds
    port = free_port()
    args = ["-D", "4", "-f", "1", "-s", "65536", "-p", str(port)]
    srv = start("srv", ["ib_send_bw"] + args, {})
    cli = None
    reads = []
    try:
        while not listening(port):
            if srv.poll() is not None or left() < 0:
                fail("ib_send_bw server: " + output("srv"))
            time.sleep(0.01)
        cli = start("cli", ["ib_send_bw"] + args + ["localhost"], {})
        # softverbs-run execs the program: the pid is the program's
        while cli.poll() is None and left() > 0:
            j, r = stat_json(cli.pid)
            if j and j["contexts"] and j["contexts"][0]["qps"]:
                q = j["contexts"][0]["qps"][0]["counters"]
                if q["tx_pkts"] and (not reads or
                                     q["tx_pkts"] != reads[-1]["tx_pkts"]):
                    reads.append(q)
            time.sleep(0.05)
        cli.wait(timeout=max(left(), 1))
        srv.wait(timeout=max(left(), 1))
    finally:
        for p in (srv, cli):
            if p and p.poll() is None:
                p.kill()
                p.wait()
    if cli.returncode or srv.returncode:
        fail("ib_send_bw failed:\n" + output("cli") + output("srv"))
    m = re.search(r"^\s*65536\s+(\d+)\s", output("cli"), re.M)
    if not m or not int(m.group(1)):
        fail("no result line with the iterations:\n" + output("cli"))
    # the messages of -D's measured window (2 s of the 4: -f 1 leaves a
    # second of margin at each end, which sends too): the counters may say
    # twice that, and a slow start or end a little more
    n = 3 * int(m.group(1))
    mtu = int(re.search(r"Mtu\s*:\s*(\d+)", output("cli")).group(1))
    per = 65536 // mtu
    if len(reads) < 2:
        fail(f"softverbs-stat saw tx_pkts move {len(reads)} times "
             f"(need 2)")
    if not reads[1]["tx_pkts"] > reads[0]["tx_pkts"]:
        fail(f"tx_pkts did not grow: {reads[0]} then {reads[1]}")
    for q in reads:
        # only what is counted is named: a success is not (sv_stat_wc
        # counts errors), so a wc_success would read 0 however many
        if "wc_success" in q or "wc_wr_flush_err" not in q:
            fail(f"counters: {sorted(q)}")
        # tx_pkts and tx_bytes of one train may straddle a refresh
        if abs(q["tx_bytes"] - q["tx_pkts"] * mtu) > 65536:
            fail(f"tx_bytes {q['tx_bytes']} is not tx_pkts "
                 f"{q['tx_pkts']} x {mtu}")
        # the run's messages, and perftest's own warm-up/handshake sends
        if q["tx_pkts"] > (n + 1000) * per:
            fail(f"tx_pkts {q['tx_pkts']} > {n} messages x {per}")
    # errors said clearly
    dead = subprocess.run([STAT, str(cli.pid)], capture_output=True,
                          text=True)
    if dead.returncode != 1 or "no process" not in dead.stderr:
        fail(f"for a pid gone: rc {dead.returncode}: {dead.stderr}")
    none = subprocess.run([STAT, str(os.getpid())], capture_output=True,
                          text=True)
    if none.returncode != 2 or "no softverbs device" not in none.stderr:
        fail(f"for a process without softverbs: rc {none.returncode}: "
             f"{none.stderr}")
    print(f"ok: {len(reads)} reads, tx_pkts {reads[0]['tx_pkts']} -> "
          f"{reads[-1]['tx_pkts']} of {n} x {per}")


def main():
    global TMP
    import tempfile
    need("tshark") if TEST.startswith("pcap") else None
    need("mergecap") if TEST.startswith("pcap_conformance") else None
    need("ibv_rc_pingpong")
    with tempfile.TemporaryDirectory(prefix="sv-wire-") as TMP:
        if TEST == "pcap_rc_pingpong":
            pcap_rc_pingpong(False)
        elif TEST == "pcap_rc_pingpong_tcp":
            pcap_rc_pingpong(True)
        elif TEST == "pcap_write_bw":
            pcap_write_bw()
        elif TEST == "pcap_conformance":
            pcap_conformance(False, 0)
        elif TEST == "pcap_conformance_tcp":
            pcap_conformance(True, 0)
        elif TEST == "pcap_conformance_snap":
            pcap_conformance(False, 100)
        elif TEST == "stat_send_bw":
            stat_send_bw()
        elif TEST.startswith("capture_fifo_"):
            capture_fifo(TEST[len("capture_fifo_"):])
        else:
            fail("no test " + TEST)


main()
