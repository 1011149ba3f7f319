#!/usr/bin/env python3
# Writes the seed corpora that need structure (fuzz/corpus/<target>/):
# inputs in the decoders' formats (fuzz_*.c) that reach the interesting
# paths at once.  Run from anywhere; the files are committed.
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def u8(v): return struct.pack('<B', v & 0xff)
def u16(v): return struct.pack('<H', v & 0xffff)
def u32(v): return struct.pack('<I', v & 0xffffffff)
def u64(v): return struct.pack('<Q', v & 0xffffffffffffffff)


def write(target, name, data):
    d = os.path.join(HERE, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


# fuzz_ring.c: cfg, psns, pre-posted receives, then commands.
REQ, RSP, RAW, ACK, RNR, TAIL, CONSUME, RECV, SEND, DRIVE = range(10)
OP = {'SEND': 0, 'WRITE': 2, 'READ': 4, 'CAS': 5, 'FAA': 6, 'NOTE': 7}
SEG = {'MIDDLE': 0, 'FIRST': 1, 'LAST': 2, 'ONLY': 3}
MODE = 2 | 2 << 3  # npsn automatic, the PSN the victim expects


def ring_head(nrecv=2, uc=False, wrap_psn=False):
    cfg = (nrecv << 3) | (4 if uc else 0) | (3 if wrap_psn else 0)
    b = u8(cfg)
    b += u8(1) if wrap_psn else u32(0x100)
    b += b'' if wrap_psn else u32(0x200)
    for i in range(nrecv):
        b += u8(0) + u16(i * 2048) + u16(2048)
    return b


def req(op, seg='ONLY', length=0, flags=0, ext=b'', payload=None,
        msg_len=None):
    b = u8(REQ) + u8(OP[op]) + u8(SEG[seg]) + u8(flags)
    if op in ('SEND', 'WRITE'):
        b += u8(2) + u16(length)        # length(): u16 % 3000
    else:
        b += u8(1)                      # no payload
    if msg_len is None:
        b += u8(1)                      # msg_len = len
    else:
        b += u8(0) + u8(2) + u16(msg_len)  # length(): u16 % 8192
    b += u32(0x12345678)                # imm
    b += ext if ext else u8(1)          # no extension
    b += u8(MODE)
    b += payload if payload is not None else bytes(range(256)) * (length // 256) + bytes(length % 256)
    return b


def reth(off, dma_pick=1):
    return u8(2) + u16(off) + u8(2) + u8(dma_pick)


def atometh(off):
    return u8(2) + u16(off) + u8(2) + u8(1) + u64(5) + u64(0)


def drive(n=3): return u8(DRIVE) + u8(n)


base = ring_head()
write('ring', 'send_only', base + req('SEND', length=100) + drive() + u8(CONSUME))
write('ring', 'send_first_middle_last',
      base + req('SEND', 'FIRST', 1024, msg_len=1636) +
      req('SEND', 'MIDDLE', 512, msg_len=1636) +
      req('SEND', 'LAST', 100, msg_len=1636) + drive())
write('ring', 'write_only', base + req('WRITE', length=64, ext=reth(128)) + drive())
write('ring', 'write_imm', base + req('WRITE', length=64, flags=1, ext=reth(256)) + drive())
write('ring', 'write_note', base + req('NOTE', flags=1) + drive())
write('ring', 'read_req', ring_head() + u8(REQ) + u8(OP['READ']) + u8(3) + u8(0) +
      u8(1) + u8(0) + u8(2) + u16(300) + u32(0) + u8(2) + u16(0) + u8(2) + u8(1) +
      u8(MODE) + drive() + u8(CONSUME) + drive())
write('ring', 'atomics', base + req('CAS', ext=atometh(8)) + req('FAA', ext=atometh(16)) +
      drive() + u8(CONSUME))
# the victim reads 100 bytes; the peer answers, then ACKs a send
write('ring', 'victim_read_answered',
      base + u8(SEND) + u16(0) + u16(100) + u8(4) + u64(0x1000) + u32(7) + drive() +
      u8(CONSUME) + u8(RSP) + u8(0) + u8(3) + u8(0) + u8(2) + u16(100) + u8(1) +
      u32(0) + u8(1) + u8(MODE) + u8(0) + bytes(100) + drive())
write('ring', 'victim_send_acked',
      base + u8(SEND) + u16(0) + u16(100) + u8(0) + u64(0) + u32(0) + drive() +
      u8(CONSUME) + u8(ACK) + u8(1) + u8(0) + u8(1) + u8(0) + u16(1) + drive())
write('ring', 'victim_atomic_answered',
      base + u8(SEND) + u16(0) + u16(8) + u8(6) + u64(0x1000) + u32(7) + drive() +
      u8(CONSUME) + u8(RSP) + u8(1) + u8(3) + u8(0) + u8(1) + u8(1) + u32(0) +
      u64(41) + u8(MODE) + u8(0) + drive())
# RNR: a send with no receive, then one posted
write('ring', 'rnr_then_recv',
      ring_head(0) + req('SEND', length=64) + drive() + u8(RECV) + u8(0) + u16(0) +
      u16(128) + drive())
# many 1500-byte sends: the 16 KiB ring wraps (pads)
wrap = ring_head(0)
for i in range(14):
    wrap += u8(RECV) + u8(0) + u16(0) + u16(2048)
    wrap += req('SEND', length=1500) + drive(1)
write('ring', 'wrap', wrap)
write('ring', 'uc_send', ring_head(uc=True) + req('SEND', length=100) + drive())
write('ring', 'psn_wrap', ring_head(wrap_psn=True) + req('SEND', length=10) +
      req('SEND', length=10) + req('SEND', length=10) + drive())


# fuzz_link.c: pqpn offset, then commands (connect, accept, message on a
# connection, message + sv_link_check).
CONNECT, ACCEPT, MESSAGE, CHECK = 0, 2, 3, 4


def hello(kind=6, fds=(0xf0, 0xf0), extra=b''):
    b = u8(kind) + u32(0) + bytes(24)   # field choice, pd_id, tail bytes
    b += u8(1) if len(fds) == 2 else u8(0) + u8(len(fds))
    for k in fds:
        b += u8(k)
        if k == 0xf0:
            b += u8(2) + u8(1) + u8(11)  # 16 KiB, no descriptors, untouched
    return b + extra


write('link', 'hello_accepted', u8(0) + u8(CONNECT) + u8(1) + hello() +
      u8(ACCEPT) + u8(1) + u8(3) + u16(100) + u16(200) + u16(300) + u16(400))
write('link', 'hello_then_bye', u8(0) + u8(CONNECT) + u8(1) + hello() +
      u8(ACCEPT) + u8(1) + u8(0) + u16(64) +
      u8(CHECK) + u8(1) + u8(1) + u8(2) + u8(1) + u32(0) + bytes(24) + u8(1) + u8(0))
write('link', 'doorbells_then_hangup', u8(0) + u8(CONNECT) + u8(1) + hello() +
      u8(ACCEPT) + u8(1) + u8(0) + u16(64) + u8(CHECK) + u8(1) + u8(0) + u8(79) + u8(1))
write('link', 'silent_connections', u8(0) + (u8(CONNECT) + u8(0)) * 6 + u8(ACCEPT) + u8(0))
write('link', 'four_fds', u8(0) + u8(CONNECT) + u8(1) +
      hello(fds=(0xf0, 0xf0, 0x80, 0x81)) + u8(ACCEPT) + u8(1) + u8(0) + u16(0))


# fuzz_ud.c: cfg (receives, RTS), then commands.
U_RECV, U_DGRAM, U_RAW, U_DRAIN, U_ERR = 0, 1, 3, 4, 5


def dgram(plen, flags=0, field=15):
    b = u8(U_DGRAM) + u8(1) + u16(plen) + u8(flags) + u32(0x123) + u32(7)
    b += u8(field) + bytes(range(16)) + bytes(range(16, 32))
    return b + bytes((i * 7) & 0xff for i in range(plen))


recv1 = u8(1) + u16(0) + u8(1) + u8(1)  # one SGE at 0, to the MR's end
write('ud', 'one_datagram', u8(0x11) + recv1 + dgram(100) + u8(U_DRAIN))
write('ud', 'grh_imm', u8(0x12) + recv1 + recv1 + dgram(64, flags=7) + dgram(10))
write('ud', 'small_receive', u8(0x11) + u8(1) + u16(0) + u8(0) + u16(120) + u8(1) +
      dgram(100))
write('ud', 'two_sges', u8(0x11) + u8(0) + u16(0) + u8(0) + u16(30) + u8(1) + u16(100) +
      u8(1) + u8(1) + dgram(200))
write('ud', 'init_takes_nothing', u8(0x01) + recv1 + dgram(10))
write('ud', 'raw', u8(0x11) + recv1 + u8(U_RAW) + u8(64) + bytes(64))


# fuzz_rkey.c: sizes, seals, header choice, 16 entries, then queries.
def entries(valid=True):
    b = b''
    for i in range(16):
        b += u8(1) + u8(1) + u8(1) + u8(1) + u16(4096) + u8(1) + u16(i * 4096 % 16384)
        b += u8(1) + u8(1)
    return b


def query(i, off, length, access=0xf):
    return u8(i) + u8(1) + u8(1) + u8(1) + u16(off) + u8(1) + u16(length) + u8(access)


head = u8(2) + u8(1) + u8(1) + u8(1) + u8(11)   # 16 KiB arena, 1 page table
write('rkey', 'valid_table', head + entries() + u8(1) +
      query(0, 0, 64) + query(3, 4000, 96) + query(5, 100, 0) + query(7, 0, 4096))
write('rkey', 'bad_magic', u8(2) + u8(1) + u8(1) + u8(1) + u8(0) + u32(0) + entries() + u8(1))

# fuzz_ring.c with the peer's shared memory (cfg 0x20): key table entries
# at setup, then one-sided operations the victim executes itself and a
# send it places into a described receive (single copy).
DESC, KEY = 10, 11


def shared_head(nrecv=0):
    b = u8(0x20 | nrecv << 3) + u32(0x100) + u32(0x200)
    for i in range(16):
        b += u8(1) + u8(1) + u8(1) + u16(8192) + u8(1) + u16(i * 4096) + u8(1) + u8(1) + u8(1)
    return b


def victim_op(op, length, key=0, off=64):
    return u8(SEND) + u16(0) + u16(length) + u8(op) + u8(1) + u8(key) + u16(off)


write('ring', 'shared_direct_write', shared_head() + victim_op(2, 64) + drive())
write('ring', 'shared_direct_read', shared_head() + victim_op(4, 256, key=3) + drive())
write('ring', 'shared_direct_atomics', shared_head() + victim_op(6, 8, key=1, off=8) +
      victim_op(5, 8, key=2, off=16) + drive())
desc = u8(DESC) + u8(1) + u8(1) + u8(0) + u8(1) + (u8(1) + u16(0) + u8(1) + u16(4096)) * 7 + u8(1)
write('ring', 'shared_single_copy_send', shared_head() + desc +
      u8(SEND) + u16(0) + u16(2000) + u8(0) + u8(0) + u64(0) + u32(0) + drive() +
      u8(CONSUME) + u8(ACK) + u8(2) + u8(0) + u8(1) + u8(0) + u16(1) + drive())

# path MTU 4096 (cfg 0x40): a read answered in MTU-sized trains on the
# victim's response ring (a quarter of its 16 KiB request ring)
rd = (u8(REQ) + u8(OP['READ']) + u8(3) + u8(0) + u8(1) + u8(0) + u8(2) + u16(300) +
      u32(0) + u8(2) + u16(0) + u8(2) + u8(1) + u8(MODE))
write('ring', 'regress-read-mtu4096-empty-trains', u8(0x40) + u32(0x100) + u32(0x200) + rd + drive() +
      u8(CONSUME) + drive() + u8(CONSUME) + drive())


# fuzz_tcp.c: the hello's ring sizes, then commands (0-1 record, 2 pad,
# 3 state, 4 abort/bye, 5 raw, 6-7 run the transport and the engine).
def tcp_record(ring, k, hdr_op=0, seg=3, payload=b''):
    # ring, len choice (64 * (1 + k)), length as is (pick 8 != 0), at the
    # expected position (pick 8 != 0), the packet header (32 bytes), its
    # len fitting (pick 4 != 0), then 0..63 payload bytes, CRC kept
    pkt = u8(hdr_op) + u8(seg) + u8(0) + u8(0) + u32(0) + u32(1) + \
        u32(0) + u32(0) + u32(64 * (1 + k)) + u32(0) + u32(0)
    return u8(0) + u8(ring) + u8(k) + u8(1) + u8(1) + pkt + u8(1) + \
        u8(len(payload)) + payload + u8(1)


RUN = u8(6)
write('tcp', 'records_then_run',
      u8(0) + u8(0) + tcp_record(0, 0, payload=b'hello') +
      tcp_record(1, 1) + RUN + tcp_record(0, 3) + RUN)
write('tcp', 'state_and_bye',
      u8(1) + u8(1) + u8(3) + bytes(32) + u8(1) + u8(4) + u8(1) + RUN)
write('tcp', 'pad_then_record',
      u8(0) + u8(0) + u8(2) + u8(0) + u8(1) + RUN + tcp_record(0, 2) + RUN)


# fuzz_roce.c: cfg (bit 0 IPv6, 1 check the ICRC, 2 seal it), IP ID, UDP
# source port, segmenter length and index, then a RoCEv2 UDP payload
# (BTH, extensions, payload, pad, ICRC: sealed by the target).
def roce(op, ext=b'', payload=b'', cfg=0x06 | 0x40, pad=None):
    pad = (-len(payload)) % 4 if pad is None else pad
    bth = struct.pack('>BBHII', op, pad << 4, 0xffff, 0x000011,
                      0x80000007)
    pkt = bth + ext + payload + bytes((-len(payload)) % 4) + bytes(4)
    return u8(cfg) + u16(0x2e32) + u16(49152) + u32(4096) + \
        u32(0x03000001) + pkt


RETH = struct.pack('>QII', 0x7f0000001000, 0x1234, 1024)
write('roce', 'rc_send_only', roce(0x04, payload=b'hello'))
write('roce', 'rc_write_first_v6', roce(0x06, RETH, bytes(512), cfg=0x07))
write('roce', 'rc_ack', roce(0x11, struct.pack('>I', 0x1f000001)))
write('roce', 'rc_atomic_ack',
      roce(0x12, struct.pack('>IQ', 0x1f000002, 42)))
write('roce', 'rc_read_resp_last', roce(0x0f, struct.pack('>I', 0x1f000003),
                                       b'xyz'))
write('roce', 'ud_send_only_imm',
      roce(0x65, struct.pack('>II', 0x11111111, 0x99) + b'\1\2\3\4',
           b'datagram', cfg=0x16))
write('roce', 'xrc_cmp_swap',
      roce(0xb3, struct.pack('>I', 0x42) +
           struct.pack('>QIQQ', 0x7f0000002000, 0x5678, 5, 9), cfg=0x26))
write('roce', 'cnp', roce(0x81, bytes(16)))
write('roce', 'unsealed_unchecked', roce(0x0b, RETH + b'\xaa\xbb\xcc\xdd',
                                         b'imm', cfg=0x00))
write('roce', 'odd_pad', roce(0x04, payload=b'ab', pad=3))
