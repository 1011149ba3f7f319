// SPDX-License-Identifier: MIT
/*
 * The matrix's rows: what each program does on softverbs0 today and why.
 * When a feature arrives (librdmacm, one-sided RDMA, SRQ/UD/UC/XRC), its
 * rows flip to MX_WORKS here; a row that does not match fails its test.
 * tests/matrix/CMakeLists.txt makes a ctest test of every `.name = "..."`.
 */
#include "matrix.h"

#include <stddef.h>

#define SV0	 "-d", "softverbs0"
#define FAST	 10 /* s: a clean failure is quick */
#define RUN	 30 /* s: a working row, sanitizers included */
#define WAIT_FOR 3  /* s: a row that waits for ever is killed here */
/* s: two MPI ranks under mpirun.  Under ASan+UBSan the no-openib row took
 * 17.7-19.2 s on an idle 2-CPU machine and ran past 30 s in 4 of 4 runs
 * beside two busy loops (the other MPI rows 13-20 s); 2.9 s plain. */
#define RUN_MPI 90

#define CM_OK	 "softverbs' librdmacm.so.1 (rdmacm/), one host"
#define RSOCKETS "softverbs' rsockets (rdmacm/rsocket*.c), one host"
#define NO_RSOCKET_DGRAM                                                  \
	"softverbs' rsockets are SOCK_STREAM only: a SOCK_DGRAM rsocket " \
	"fails with EOPNOTSUPP and says so once on stderr"
#define NO_RAW_ETH                                                        \
	"softverbs0's link layer is InfiniBand: perftest's raw Ethernet " \
	"tests need an Ethernet port"

/* clang-format off: argument vectors read best as command lines */
/* ucx_perftest's uct test TEST over transport TL of softverbs0:1 (the
 * fields after .name, which stays literal: CMake makes tests of names). */
#define UCT_ROW(tl, test)                                                   \
	.pkg = "ucx-utils", .expect = MX_WORKS,                             \
	.reason = "uct " #test " over " #tl " on softverbs0",               \
	.server = {"ucx_perftest", "-d",    "softverbs0:1", "-x", #tl,      \
		   "-p",	   "@PORT@"},                               \
	.client = {"ucx_perftest", "-d",       "softverbs0:1", "-x",  #tl,  \
		   "-p",	   "@PORT@",   "-t",	       #test, "-n", \
		   "2000",	   "127.0.0.1"},                            \
	.deadline_s = RUN, .says = "Final:"

/* UCX_TLS for the ucp rows and Open MPI: rc_verbs with ud_verbs for
 * wire-up only, or ud_verbs alone. */
#define UCX_TLS_rc "UCX_TLS=rc_verbs,ud_verbs:aux"
#define UCX_TLS_ud "UCX_TLS=ud_verbs"

/* ucx_perftest's ucp test TEST with UCX restricted to TL on softverbs0,
 * whose endpoint configuration shows LANE(TL_verbs/softverbs0:1). */
#define UCP_ROW(tl, test, lane)                                        \
	.pkg = "ucx-utils", .expect = MX_WORKS,                        \
	.reason = "ucp " #test ", UCX restricted to " #tl "_verbs on " \
		  "softverbs0",                                        \
	.server = {"ucx_perftest", "-p", "@PORT@"},                    \
	.client = {"ucx_perftest", "-p", "@PORT@", "-t",               \
		   #test,	   "-n", "2000",   "127.0.0.1"},       \
	.deadline_s = RUN,                                             \
	.env = {UCX_TLS_##tl, "UCX_NET_DEVICES=softverbs0:1",          \
		"UCX_LOG_LEVEL=info"},                                 \
	.says = "Final:", .also_says = lane "(" #tl "_verbs/softverbs0:1)"

/* Two MPI ranks over Open MPI's UCX PML, UCX restricted to TL. */
#define MPI_UCX_ROW(tl)                                              \
	.pkg = "openmpi-bin", .expect = MX_WORKS,                    \
	.reason = "two ranks, --mca pml ucx, UCX restricted to " #tl \
		  "_verbs on softverbs0",                            \
	.client = {"mpirun",                                         \
		   "--allow-run-as-root",                            \
		   "--oversubscribe",                                \
		   "--mca",                                          \
		   "pml",                                            \
		   "ucx",                                            \
		   "-x",                                             \
		   "UCX_TLS",                                        \
		   "-x",                                             \
		   "UCX_NET_DEVICES",                                \
		   "-x",                                             \
		   "UCX_LOG_LEVEL",                                  \
		   "-np",                                            \
		   "2",                                              \
		   "@BUILD@/tests/mpi_pingpong"},                    \
	.deadline_s = RUN_MPI,                                       \
	.env = {UCX_TLS_##tl, "UCX_NET_DEVICES=softverbs0:1",        \
		"UCX_LOG_LEVEL=info"},                               \
	.says = "round trips", .also_says = "tag(" #tl "_verbs/softverbs0:1)"
/* clang-format on */

const struct mx_row mx_rows[] = {
	/* rdmacm-utils on softverbs' librdmacm.so.1 (issue 12) */
	{
		.name = "rping",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK "; the server RDMA-reads the client's buffer "
				"and writes it back, 1000 times",
		.server = {"rping", "-s", "-a", "127.0.0.1", "-p", "@PORT@",
			   "-C", "1000", "-v"},
		.client = {"rping", "-c", "-a", "127.0.0.1", "-p", "@PORT@",
			   "-C", "1000", "-v"},
		.deadline_s = RUN,
		.says = "server ping data: rdma-ping-999: ",
		.also_says = "\nping data: rdma-ping-999: ",
	},
	{
		.name = "ucmatose",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK "; 16 connections at once on one listener",
		.server = {"ucmatose", "-p", "@PORT@", "-c", "16", "-C", "10"},
		.client = {"ucmatose", "-s", "127.0.0.1", "-p", "@PORT@", "-c",
			   "16", "-C", "10"},
		.deadline_s = RUN,
		.says = "cmatose: disconnecting\ndisconnected",
		.also_says = "sending replies\ndata transfers complete",
	},
	{
		.name = "rping_ipv6_loopback",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK ", over IPv6 (::1): the GID of ::1 is in "
				"softverbs0's table",
		.server = {"rping", "-s", "-a", "::1", "-p", "@PORT@", "-C",
			   "100", "-v"},
		.client = {"rping", "-c", "-a", "::1", "-p", "@PORT@", "-C",
			   "100", "-v"},
		.deadline_s = RUN,
		.says = "server ping data: rdma-ping-99: ",
		.also_says = "\nping data: rdma-ping-99: ",
	},
	{
		.name = "ucmatose_ipv6_loopback",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK ", over IPv6 (::1) to a listener on the IPv4 "
				"wildcard (not AFONLY: both families)",
		.server = {"ucmatose", "-p", "@PORT@", "-c", "4", "-C", "10"},
		.client = {"ucmatose", "-s", "::1", "-p", "@PORT@", "-c", "4",
			   "-C", "10"},
		.deadline_s = RUN,
		.says = "cmatose: disconnecting\ndisconnected",
		.also_says = "sending replies\ndata transfers complete",
	},
	{
		.name = "udaddy",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK "; UD: SIDR gives the client the server's QPN "
				"and qkey (udaddy's port is its fixed 7174)",
		.server = {"udaddy", "-C", "10"},
		.client = {"udaddy", "-s", "127.0.0.1", "-C", "10"},
		.deadline_s = RUN,
		.ready_port = 7174,
		.says = "receiving data transfers\nsending replies\ndata "
			"transfers complete",
		.also_says = "initiating data transfers\nreceiving data "
			     "transfers\ndata transfers complete",
	},
	{
		.name = "rdma_server_client",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK "; rdma_getaddrinfo, rdma_create_ep, "
				"synchronous ids, rdma_get_request",
		.server = {"rdma_server", "-p", "@PORT@"},
		.client = {"rdma_client", "-s", "127.0.0.1", "-p", "@PORT@"},
		.deadline_s = RUN,
		.says = "rdma_server: end 0",
		.also_says = "rdma_client: end 0",
	},
	{
		.name = "rdma_xserver_xclient",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK
		"; their default, RC: rdma_xclient's "
		"IBV_SEND_INLINE on a QP that asked for no inline "
		"data (the room of its SGE, as rxe's)",
		.server = {"rdma_xserver", "-p", "@PORT@"},
		.client = {"rdma_xclient", "-s", "127.0.0.1", "-p", "@PORT@"},
		.deadline_s = RUN,
		.says = "rdma_xserver: end 0",
		.also_says = "rdma_xclient: end 0",
	},
	{
		.name = "rdma_xserver_xclient_xrc",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason =
			CM_OK "; -c x: RDMA_PS_IB, an XRC_RECV id with an "
			      "XRC SRQ whose number goes in the REP's private "
			      "data, an XRC_SEND id sending to it",
		.server = {"rdma_xserver", "-p", "@PORT@", "-c", "x"},
		.client = {"rdma_xclient", "-s", "127.0.0.1", "-p", "@PORT@",
			   "-c", "x"},
		.deadline_s = RUN,
		.says = "rdma_xserver: end 0",
		.also_says = "rdma_xclient: end 0",
	},
	{
		.name = "rcopy",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; the copy is compared with its source",
		.server = {"rcopy", "-p", "@PORT@"},
		.client = {"sh", "-c",
			   "rcopy /usr/bin/rcopy "
			   "127.0.0.1:/tmp/sv-matrix-rcopy.@PORT@ -p @PORT@ && "
			   "cmp /usr/bin/rcopy "
			   "/tmp/sv-matrix-rcopy.@PORT@ && echo rcopy: copy "
			   "identical; rm -f /tmp/sv-matrix-rcopy.@PORT@"},
		.deadline_s = RUN,
		.says = "rcopy: copy identical",
		.also_says = "closing...done",
		.flags = MX_DAEMON,
	},
	{
		.name = "rstream",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; non-blocking calls (rstream's default)",
		.server = {"rstream", "-p", "@PORT@", "-S", "4096", "-C", "10"},
		.client = {"rstream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "4096", "-C", "10"},
		.deadline_s = RUN,
		.says = "custom    4k      10      1       80k",
	},
	{
		.name = "rstream_1m",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; 1 MiB transfers, 200 MB in all, data "
				   "verified (-T v)",
		.server = {"rstream", "-p", "@PORT@", "-S", "1048576", "-C",
			   "100", "-T", "v"},
		.client = {"rstream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "1048576", "-C", "100", "-T", "v"},
		.deadline_s = RUN,
		.says = "custom    1m      100     1       200m",
	},
	{
		.name = "rstream_blocking",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; blocking calls with MSG_WAITALL (-T b)",
		.server = {"rstream", "-p", "@PORT@", "-S", "65536", "-C",
			   "100", "-T", "b"},
		.client = {"rstream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "65536", "-C", "100", "-T", "b"},
		.deadline_s = RUN,
		.says = "custom    64k     100     1       12m",
	},
	{
		.name = "riostream_pingpong_64b",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; 2,000 round trips of 64 B: each side "
				   "spins on its buffer's last byte, then "
				   "writes its own marker there (a stale "
				   "second store of a peer's byte undid it: "
				   "sv_place)",
		.server = {"riostream", "-p", "@PORT@", "-S", "64", "-C", "1",
			   "-I", "2000"},
		.client = {"riostream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "64", "-C", "1", "-I", "2000"},
		.deadline_s = RUN,
		.says = "custom    64      1       2k",
	},
	{
		.name = "rstream_async",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; rpoll before each call (-T a)",
		.server = {"rstream", "-p", "@PORT@", "-S", "65536", "-C",
			   "100", "-T", "a"},
		.client = {"rstream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "65536", "-C", "100", "-T", "a"},
		.deadline_s = RUN,
		.says = "custom    64k     100     1       12m",
	},
	{
		.name = "rstream_keepalive",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; SO_KEEPALIVE and TCP_KEEPIDLE are "
				   "accepted and read back (-k)",
		.server = {"rstream", "-p", "@PORT@", "-S", "4096", "-C", "10",
			   "-k", "10"},
		.client = {"rstream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "4096", "-C", "10", "-k", "10"},
		.deadline_s = RUN,
		.says = "custom    4k      10      1       80k",
		.also_says = "Keepalive: ON",
	},
	{
		.name = "rstream_sockets",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = "rstream -T s uses plain TCP sockets, not rsockets: "
			  "the rows' baseline (softverbs-run changes nothing)",
		.server = {"rstream", "-p", "@PORT@", "-S", "65536", "-C",
			   "100", "-T", "s"},
		.client = {"rstream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "65536", "-C", "100", "-T", "s"},
		.deadline_s = RUN,
		.says = "custom    64k     100     1       12m",
	},
	{
		.name = "riostream",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; riomap/riowrite, the receiver polls its "
				   "memory for the last byte",
		.server = {"riostream", "-p", "@PORT@", "-S", "4096", "-C",
			   "10"},
		.client = {"riostream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "4096", "-C", "10"},
		.deadline_s = RUN,
		.says = "custom    4k      10      1       80k",
	},
	{
		.name = "riostream_64k",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = RSOCKETS "; 64 KiB riowrites, verified (-T v)",
		.server = {"riostream", "-p", "@PORT@", "-S", "65536", "-C",
			   "100", "-T", "v"},
		.client = {"riostream", "-s", "127.0.0.1", "-p", "@PORT@", "-S",
			   "65536", "-C", "100", "-T", "v"},
		.deadline_s = RUN,
		.says = "custom    64k     100     1       12m",
	},
	{
		.name = "cmtime",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK "; the server serves until stopped; the client "
				"reports each step's rate",
		.server = {"cmtime", "-p", "@PORT@"},
		.client = {"cmtime", "-s", "127.0.0.1", "-p", "@PORT@", "-c",
			   "100"},
		.deadline_s = RUN,
		.says = "connect      :",
		.also_says = "us / conn",
		.flags = MX_DAEMON,
	},
	{
		.name = "mckey",
		.pkg = "rdmacm-utils",
		.expect = MX_WORKS,
		.reason = CM_OK "; a multicast group among two processes (the "
				"sender starts once the receiver has joined)",
		.server = {"stdbuf", "-oL", "mckey", "-m", "239.1.1.1", "-b",
			   "127.0.0.1", "-C", "10"},
		.client = {"mckey", "-m", "239.1.1.1", "-b", "127.0.0.1", "-s",
			   "-C", "10"},
		.deadline_s = RUN,
		.ready_says = "joined dgid: ::ffff:239.1.1.1",
		.says = "receiving data transfers\ndata transfers complete",
		.also_says = "initiating data transfers\ndata transfers "
			     "complete",
	},
	{
		.name = "udpong",
		.pkg = "rdmacm-utils",
		.expect = MX_FAILS,
		.reason = NO_RSOCKET_DGRAM,
		.server = {"udpong", "-p", "@PORT@"},
		.client = {"udpong", "-s", "127.0.0.1", "-p", "@PORT@"},
		.deadline_s = FAST,
		.says = "rsocket failed: Operation not supported",
		.also_says = "only SOCK_STREAM rsockets are implemented",
	},

	/* perftest */
	{
		.name = "ib_send_lat",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RC send/recv",
		.server = {"ib_send_lat", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_send_lat", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_send_bw",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RC send/recv",
		.server = {"ib_send_bw", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_send_bw", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_send_bw_srq",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RC send/recv into a shared receive queue",
		.server = {"ib_send_bw", SV0, "--use-srq", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_send_bw", SV0, "--use-srq", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_send_lat_rdma_cm",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = CM_OK "; perftest -R: connected by rdma_cm",
		.server = {"ib_send_lat", "-R", SV0, "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_send_lat", "-R", SV0, "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_typical[usec]",
	},
	{
		.name = "ib_send_bw_rdma_cm",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = CM_OK "; perftest -R: connected by rdma_cm",
		.server = {"ib_send_bw", "-R", SV0, "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_send_bw", "-R", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_write_lat_rdma_cm",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = CM_OK "; perftest -R: connected by rdma_cm",
		.server = {"ib_write_lat", "-R", SV0, "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_write_lat", "-R", SV0, "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_typical[usec]",
	},
	{
		.name = "ib_read_bw_rdma_cm",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = CM_OK "; perftest -R: connected by rdma_cm",
		.server = {"ib_read_bw", "-R", SV0, "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_read_bw", "-R", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_write_lat",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9); both sides spin on "
			  "their buffers, not on verbs",
		.server = {"ib_write_lat", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_write_lat", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_write_bw",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9)",
		.server = {"ib_write_bw", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_write_bw", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_read_lat",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9)",
		.server = {"ib_read_lat", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_read_lat", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_read_bw",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9)",
		.server = {"ib_read_bw", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_read_bw", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_atomic_lat",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9)",
		.server = {"ib_atomic_lat", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_atomic_lat", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_atomic_bw",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9)",
		.server = {"ib_atomic_bw", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ib_atomic_bw", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "raw_ethernet_bw",
		.pkg = "perftest",
		.expect = MX_FAILS,
		.reason = NO_RAW_ETH,
		.server = {"raw_ethernet_bw", SV0, "-n", "10", "--server", "-B",
			   "02:00:00:00:00:01", "-E", "02:00:00:00:00:02"},
		.client = {"raw_ethernet_bw", SV0, "-n", "10", "--client", "-B",
			   "02:00:00:00:00:02", "-E", "02:00:00:00:00:01"},
		.deadline_s = FAST,
		.says = "can only run on Ethernet link",
	},
	{
		.name = "raw_ethernet_lat",
		.pkg = "perftest",
		.expect = MX_FAILS,
		.reason = NO_RAW_ETH,
		.server = {"raw_ethernet_lat", SV0, "-n", "10", "--server",
			   "-B", "02:00:00:00:00:01", "-E",
			   "02:00:00:00:00:02"},
		.client = {"raw_ethernet_lat", SV0, "-n", "10", "--client",
			   "-B", "02:00:00:00:00:02", "-E",
			   "02:00:00:00:00:01"},
		.deadline_s = FAST,
		.says = "can only run on Ethernet link",
	},
	{
		.name = "raw_ethernet_burst_lat",
		.pkg = "perftest",
		.expect = MX_FAILS,
		.reason = NO_RAW_ETH,
		.server = {"raw_ethernet_burst_lat", SV0, "-n", "10",
			   "--server", "-B", "02:00:00:00:00:01", "-E",
			   "02:00:00:00:00:02"},
		.client = {"raw_ethernet_burst_lat", SV0, "-n", "10",
			   "--client", "-B", "02:00:00:00:00:02", "-E",
			   "02:00:00:00:00:01"},
		.deadline_s = FAST,
	},
	{
		.name = "raw_ethernet_fs_rate",
		.pkg = "perftest",
		.expect = MX_FAILS,
		.reason = NO_RAW_ETH,
		.server = {"raw_ethernet_fs_rate", SV0, "-n", "10", "--server",
			   "-B", "02:00:00:00:00:01", "-E",
			   "02:00:00:00:00:02"},
		.client = {"raw_ethernet_fs_rate", SV0, "-n", "10", "--client",
			   "-B", "02:00:00:00:00:02", "-E",
			   "02:00:00:00:00:01"},
		.deadline_s = FAST,
		.says = "can only run on Ethernet link",
	},
	{
		.name = "run_perftest_loopback",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest's own loopback script (it sleeps 1 s), "
			  "RC send/recv",
		.client = {"run_perftest_loopback", "0", "1", "ib_send_bw", SV0,
			   "-n", "100", "-p", "@PORT@"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},

	/* qperf */
	{
		.name = "qperf_rc_lat_cm1",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = CM_OK "; qperf -cm1 connects by rdma_cm",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cm1", "-t",
			   "1", "rc_lat"},
		.deadline_s = RUN,
		.says = "latency  =",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_lat",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "RC send/recv, waiting on completion events; "
			  "qperf's SIGALRM ends the wait with EINTR (it hung "
			  "at times before ibv_get_cq_event returned EINTR)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-t", "1",
			   "rc_lat"},
		.deadline_s = RUN,
		.says = "latency",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_lat_poll",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "RC send/recv, polling the CQs (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_lat"},
		.deadline_s = RUN,
		.says = "latency",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_rdma_write_lat",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9), polling (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_rdma_write_lat"},
		.deadline_s = RUN,
		.says = "latency",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_rdma_write_poll_lat",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9), polling (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_rdma_write_poll_lat"},
		.deadline_s = RUN,
		.says = "latency",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_rdma_read_lat",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9), polling (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_rdma_read_lat"},
		.deadline_s = RUN,
		.says = "latency",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_rdma_write_bw",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9), polling (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_rdma_write_bw"},
		.deadline_s = RUN,
		.says = "bw",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_rdma_read_bw",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9), polling (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_rdma_read_bw"},
		.deadline_s = RUN,
		.says = "bw",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_compare_swap_mr",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9), polling (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_compare_swap_mr"},
		.deadline_s = RUN,
		.says = "msg_rate",
		.flags = MX_DAEMON,
	},
	{
		.name = "qperf_rc_fetch_add_mr",
		.pkg = "qperf",
		.expect = MX_WORKS,
		.reason = "one-sided RDMA (issue 9), polling (-cp 1)",
		.server = {"qperf", "-lp", "@PORT@"},
		.client = {"qperf", "127.0.0.1", "-lp", "@PORT@", "-cp", "1",
			   "-t", "1", "rc_fetch_add_mr"},
		.deadline_s = RUN,
		.says = "msg_rate",
		.flags = MX_DAEMON,
	},

	/* UCX */
	{
		.name = "ucx_info",
		.pkg = "ucx-utils",
		.expect = MX_WORKS,
		.reason =
			"lists UCX's devices with softverbs' libibverbs loaded",
		.client = {"ucx_info", "-d"},
		.deadline_s = RUN,
		.says = "Transport: self",
	},
	{
		.name = "ucx_perftest_sm",
		.pkg = "ucx-utils",
		.expect = MX_WORKS,
		.reason =
			"UCX over shared memory, softverbs' libibverbs loaded",
		.server = {"ucx_perftest", "-c", "0", "-p", "@PORT@"},
		.client = {"ucx_perftest", "-c", "1", "-p", "@PORT@", "-t",
			   "tag_lat", "-n", "1000", "127.0.0.1"},
		.deadline_s = RUN,
		.env = {"UCX_TLS=sm,self"},
		.says = "Final:",
	},

	/* UCX on softverbs0 (issue 10): softverbs-run's devfiles give UCX the
	 * device files it looks for; uct tests name device and transport
	 * (-d, -x: no such resource fails), ucp tests and Open MPI say
	 * theirs at UCX_LOG_LEVEL=info ("tag(rc_verbs/softverbs0:1)").
	 * rc_verbs needs ud_verbs for wire-up (UCX's "rc" alias does the
	 * same): ud_verbs:aux only carries the connection set-up. */
	{
		.name = "devfiles_sysfs",
		.pkg = "coreutils",
		.expect = MX_WORKS,
		.reason = "devfiles: softverbs0's port in sysfs, its uverbs "
			  "node a character device",
		.client = {"sh", "-c",
			   "cat /sys/class/infiniband/softverbs0/ports/1/state "
			   "/sys/class/infiniband_verbs/uverbs0/ibdev && "
			   "stat -L -c '%F' /dev/infiniband/uverbs0"},
		.deadline_s = RUN,
		.says = "4: ACTIVE\nsoftverbs0\n",
		.also_says = "character special file",
	},
	{
		.name = "devfiles_check",
		.pkg = "softverbs",
		.expect = MX_WORKS,
		.reason = "devfiles: every file of softverbs0 read with fopen, "
			  "stat, access, open, opendir, realpath says what the "
			  "verbs answer (tests/matrix/devfiles_check.c)",
		.client = {"@BUILD@/tests/devfiles_check"},
		.deadline_s = RUN,
		.says = "checks passed",
	},
	{
		.name = "ucx_info_softverbs0",
		.pkg = "ucx-utils",
		.expect = MX_WORKS,
		.reason = "softverbs0 listed with rc_verbs and ud_verbs "
			  "(devfiles: /dev/infiniband/uverbs0 and sysfs)",
		.client = {"ucx_info", "-d"},
		.deadline_s = RUN,
		.says = "Transport: rc_verbs\n#         Device: softverbs0:1",
		.also_says =
			"Transport: ud_verbs\n#         Device: softverbs0:1",
	},
	{
		.name = "ucx_perftest_rc_verbs_put_lat",
		UCT_ROW(rc_verbs, put_lat),
	},
	{
		.name = "ucx_perftest_rc_verbs_put_bw",
		UCT_ROW(rc_verbs, put_bw),
	},
	{
		.name = "ucx_perftest_rc_verbs_am_lat",
		UCT_ROW(rc_verbs, am_lat),
	},
	{
		.name = "ucx_perftest_rc_verbs_am_bw",
		UCT_ROW(rc_verbs, am_bw),
	},
	{
		.name = "ucx_perftest_ud_verbs_am_lat",
		UCT_ROW(ud_verbs, am_lat),
	},
	{
		.name = "ucx_perftest_ud_verbs_am_bw",
		UCT_ROW(ud_verbs, am_bw),
	},
	{
		.name = "ucx_perftest_rc_verbs_tag_lat",
		UCP_ROW(rc, tag_lat, "tag"),
	},
	{
		.name = "ucx_perftest_rc_verbs_tag_bw",
		UCP_ROW(rc, tag_bw, "tag"),
	},
	{
		.name = "ucx_perftest_rc_verbs_ucp_put_lat",
		UCP_ROW(rc, ucp_put_lat, "rma"),
	},
	{
		.name = "ucx_perftest_rc_verbs_ucp_am_lat",
		UCP_ROW(rc, ucp_am_lat, "am"),
	},
	{
		.name = "ucx_perftest_rc_verbs_ucp_am_bw",
		UCP_ROW(rc, ucp_am_bw, "am"),
	},
	{
		.name = "ucx_perftest_ud_verbs_tag_lat",
		UCP_ROW(ud, tag_lat, "tag"),
	},
	{
		.name = "ucx_perftest_ud_verbs_tag_bw",
		UCP_ROW(ud, tag_bw, "tag"),
	},
	{
		.name = "ucx_perftest_ud_verbs_ucp_put_lat",
		UCP_ROW(ud, ucp_put_lat, "rma_am"),
	},
	{
		.name = "ucx_perftest_ud_verbs_ucp_am_lat",
		UCP_ROW(ud, ucp_am_lat, "am"),
	},
	{
		.name = "ucx_perftest_ud_verbs_ucp_am_bw",
		UCP_ROW(ud, ucp_am_bw, "am"),
	},

	/* libfabric */
	{
		.name = "fi_info",
		.pkg = "libfabric-bin",
		.expect = MX_WORKS,
		.reason = "all providers, verbs among them",
		.client = {"fi_info"},
		.deadline_s = RUN,
		.says = "provider: verbs",
	},
	{
		.name = "fi_info_verbs",
		.pkg = "libfabric-bin",
		.expect = MX_WORKS,
		.reason = "the verbs provider sees softverbs0 (it used to hang "
			  "in "
			  "its exit handler)",
		.client = {"fi_info", "-p", "verbs"},
		.deadline_s = RUN,
		.says = "domain: softverbs0",
	},
	{
		.name = "fi_pingpong_verbs",
		.pkg = "libfabric-bin",
		.expect = MX_WORKS,
		.reason = CM_OK "; libfabric's verbs provider (FI_EP_MSG) "
				"connects with rdma_cm",
		.server = {"fi_pingpong", "-p", "verbs", "-B", "@PORT@", "-I",
			   "10", "-S", "64"},
		.client = {"fi_pingpong", "-p", "verbs", "-P", "@PORT@", "-I",
			   "10", "-S", "64", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "64      10      =10",
		.also_says = "usec/xfer",
	},
	/* as Open MPI's OFI MTL uses verbs: ofi_rxm's RDM endpoint over
	 * verbs MSG endpoints; its close at the peer's DISCONNECTED took our
	 * ACKed last send with it (rdmacm/channel.c hold_disconnect) */
	{
		.name = "fi_pingpong_verbs_rxm",
		.pkg = "libfabric-bin",
		.expect = MX_WORKS,
		.reason = CM_OK "; libfabric's ofi_rxm (FI_EP_RDM) over its "
				"verbs provider, shared memory",
		.server = {"fi_pingpong", "-p", "verbs;ofi_rxm", "-e", "rdm",
			   "-B", "@PORT@", "-I", "100", "-S", "1024"},
		.client = {"fi_pingpong", "-p", "verbs;ofi_rxm", "-e", "rdm",
			   "-P", "@PORT@", "-I", "100", "-S", "1024",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "1k      100     =100",
		.also_says = "usec/xfer",
	},
	{
		.name = "fi_pingpong_verbs_rxm_tcp",
		.pkg = "libfabric-bin",
		.expect = MX_WORKS,
		.reason = CM_OK "; libfabric's ofi_rxm (FI_EP_RDM) over its "
				"verbs provider, softverbs' TCP transport",
		.server = {"fi_pingpong", "-p", "verbs;ofi_rxm", "-e", "rdm",
			   "-B", "@PORT@", "-I", "100", "-S", "1024"},
		.client = {"fi_pingpong", "-p", "verbs;ofi_rxm", "-e", "rdm",
			   "-P", "@PORT@", "-I", "100", "-S", "1024",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.env = {"SOFTVERBS_TRANSPORT=tcp"},
		.says = "1k      100     =100",
		.also_says = "usec/xfer",
	},

	/* Open MPI: tests/matrix/mpi_pingpong.c, built when MPI is found */
	{
		.name = "mpi_pingpong",
		.pkg = "openmpi-bin",
		.expect = MX_WORKS,
		.reason =
			"two ranks, Open MPI's defaults, softverbs' libibverbs "
			"in both",
		.client = {"mpirun", "--allow-run-as-root", "--oversubscribe",
			   "-np", "2", "@BUILD@/tests/mpi_pingpong"},
		.deadline_s = RUN_MPI,
		.says = "round trips",
	},
	{
		.name = "mpi_pingpong_no_openib",
		.pkg = "openmpi-bin",
		.expect = MX_WORKS,
		.reason =
			"two ranks, btl ^openib, softverbs' libibverbs in both",
		.client = {"mpirun", "--allow-run-as-root", "--oversubscribe",
			   "--mca", "btl", "^openib", "-np", "2",
			   "@BUILD@/tests/mpi_pingpong"},
		.deadline_s = RUN_MPI,
		.says = "round trips",
	},

	{
		.name = "mpi_pingpong_ucx_rc_verbs",
		MPI_UCX_ROW(rc),
	},
	{
		.name = "mpi_pingpong_ucx_ud_verbs",
		MPI_UCX_ROW(ud),
	},

	/* rdma-core's examples (ibverbs-utils) */
	{
		.name = "ibv_devices",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "the device list",
		.client = {"ibv_devices"},
		.deadline_s = RUN,
		.says = "softverbs0",
	},
	{
		.name = "ibv_devinfo",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "device and port queries",
		.client = {"ibv_devinfo"},
		.deadline_s = RUN,
		.says = "PORT_ACTIVE",
	},
	{
		.name = "ibv_devinfo_v",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "every attribute, the GID table",
		.client = {"ibv_devinfo", "-v"},
		.deadline_s = RUN,
		.says = "GID[  0]",
	},
	{
		.name = "ibv_rc_pingpong",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "RC send/recv",
		.server = {"ibv_rc_pingpong", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_uc_pingpong",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "UC send/recv",
		.server = {"ibv_uc_pingpong", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ibv_uc_pingpong", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_ud_pingpong",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "UD send/recv, address handles, GRH",
		.server = {"ibv_ud_pingpong", SV0, "-n", "100", "-p", "@PORT@"},
		.client = {"ibv_ud_pingpong", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_srq_pingpong",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "16 RC QPs receiving from one SRQ on each side",
		.server = {"ibv_srq_pingpong", SV0, "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ibv_srq_pingpong", SV0, "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_xsrq_pingpong",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "XRC: an XRC domain by file, XRC SRQs, XRC QPs",
		.server = {"ibv_xsrq_pingpong", SV0, "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ibv_xsrq_pingpong", SV0, "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "success",
	},
	/* perftest -c XRC gives its XRC_SEND and XRC_RECV QPs RC's whole
	 * masks; the kernel drops what each side ignores (qp_state.c
	 * sv_qp_mask_heeded).  An XRC domain by file on each side, an XRC
	 * SRQ, a send and a receive QP per connection. */
	{
		.name = "ib_send_bw_ud_srq",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "UD QPs on a shared receive queue, two of them",
		.server = {"ib_send_bw", SV0, "-c", "UD", "--use-srq", "-q",
			   "2", "-n", "200", "-p", "@PORT@"},
		.client = {"ib_send_bw", SV0, "-c", "UD", "--use-srq", "-q",
			   "2", "-n", "200", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_send_bw_xrc",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "XRC sends into an XRC SRQ, two connections",
		.server = {"ib_send_bw", SV0, "-c", "XRC", "-q", "2", "-n",
			   "200", "-p", "@PORT@"},
		.client = {"ib_send_bw", SV0, "-c", "XRC", "-q", "2", "-n",
			   "200", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_read_bw_xrc",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "XRC RDMA reads",
		.server = {"ib_read_bw", SV0, "-c", "XRC", "-n", "200", "-p",
			   "@PORT@"},
		.client = {"ib_read_bw", SV0, "-c", "XRC", "-n", "200", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_atomic_lat_xrc",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "XRC atomics, one at a time",
		.server = {"ib_atomic_lat", SV0, "-c", "XRC", "-n", "200", "-p",
			   "@PORT@"},
		.client = {"ib_atomic_lat", SV0, "-c", "XRC", "-n", "200", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ibv_asyncwatch",
		.pkg = "ibverbs-utils",
		.expect = MX_TIMES_OUT,
		.reason =
			"waits for async events for ever by design; none come",
		.client = {"ibv_asyncwatch"},
		.deadline_s = WAIT_FOR,
		.says = "softverbs0: async event FD",
	},

	/* issue 28 item 5: completion timestamps (ibv_create_cq_ex with
	 * IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, the start/next/end_poll
	 * iterator), over shared memory and over TCP */
	{
		.name = "ibv_rc_pingpong_ts",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "RC send/recv polled through the extended CQ, "
			  "completion timestamps in ns (1 GHz hca_core_clock)",
		.server = {"ibv_rc_pingpong", SV0, "--ts", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "--ts", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "Average receive completion clock cycles",
		.also_says = "100 iters in",
	},
	{
		.name = "ibv_rc_pingpong_ts_tcp",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "the same over the TCP transport",
		.server = {"ibv_rc_pingpong", SV0, "--ts", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "--ts", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.env = {"SOFTVERBS_TRANSPORT=tcp"},
		.says = "Average receive completion clock cycles",
		.also_says = "100 iters in",
	},
	/* perftest --use_old_post_send: ibv_post_send, where the rows above
	 * use the ibv_wr_* builder (perftest's default) */
	{
		.name = "ib_send_bw_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_send_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_send_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_write_bw_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_write_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_write_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_read_bw_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_read_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_read_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_atomic_bw_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_atomic_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_atomic_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_send_lat_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_send_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_send_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_write_lat_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_write_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_write_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_read_lat_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_read_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_read_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_atomic_lat_old_post_send",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send: ibv_post_send",
		.server = {"ib_atomic_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_atomic_lat", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_write_bw_old_post_send_tcp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "perftest --use_old_post_send over the TCP transport",
		.server = {"ib_write_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ib_write_bw", SV0, "--use_old_post_send", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.env = {"SOFTVERBS_TRANSPORT=tcp"},
		.says = "BW average[MB/sec]",
	},
	/* on-demand paging (issue 28 item 3, verbs/odp.c): ODP MRs are
	 * not moved onto the arena, so one-sided operations on them go
	 * through the target's responder.  perftest itself refuses
	 * --odp with atomics and with UC ("ODP does not support ..."):
	 * those are conf_odp.c's. */
	{
		.name = "ibv_rc_pingpong_odp",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "RC send/recv on an ODP MR",
		.server = {"ibv_rc_pingpong", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_rc_pingpong_iodp",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "RC send/recv through one implicit ODP MR (NULL, "
			  "SIZE_MAX)",
		.server = {"ibv_rc_pingpong", SV0, "--iodp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "--iodp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_rc_pingpong_odp_prefetch",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "an ODP MR prefetched with "
			  "ibv_advise_mr(PREFETCH_WRITE, FLUSH)",
		.server = {"ibv_rc_pingpong", SV0, "--odp", "--prefetch", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "--odp", "--prefetch", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_rc_pingpong_iodp_prefetch",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "an implicit ODP MR prefetched with ibv_advise_mr",
		.server = {"ibv_rc_pingpong", SV0, "--iodp", "--prefetch", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "--iodp", "--prefetch", "-n",
			   "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "rc_pingpong_iodp_prefetch_explain",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "our rc_pingpong narrates ibv_advise_mr's answer: 0 "
			  "(Debian's says nothing unless it fails)",
		.server = {"@BUILD@/bin/rc_pingpong", SV0, "-O", "-P", "-n",
			   "100", "-p", "@PORT@"},
		.client = {"@BUILD@/bin/rc_pingpong", SV0, "-O", "-P",
			   "--explain", "-n", "100", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "ibv_advise_mr(PREFETCH_WRITE, 4096 bytes) -> 0",
		.also_says = "100 iters in",
	},
	{
		.name = "ib_write_bw_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RDMA write into an ODP MR (the target's responder)",
		.server = {"ib_write_bw", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_write_bw", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_write_lat_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RDMA write into ODP MRs; both sides spin on their "
			  "buffers",
		.server = {"ib_write_lat", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_write_lat", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_read_bw_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RDMA read from an ODP MR",
		.server = {"ib_read_bw", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_read_bw", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_read_lat_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RDMA read from an ODP MR",
		.server = {"ib_read_lat", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_read_lat", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_send_bw_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RC send/recv on ODP MRs",
		.server = {"ib_send_bw", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_send_bw", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_send_lat_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RC send/recv on ODP MRs",
		.server = {"ib_send_lat", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@"},
		.client = {"ib_send_lat", SV0, "--odp", "-n", "100", "-p",
			   "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "t_avg[usec]",
	},
	{
		.name = "ib_send_bw_srq_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "RC sends into an SRQ's receives on an ODP MR",
		.server = {"ib_send_bw", SV0, "--odp", "--use-srq", "-n", "100",
			   "-p", "@PORT@"},
		.client = {"ib_send_bw", SV0, "--odp", "--use-srq", "-n", "100",
			   "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ib_send_bw_ud_odp",
		.pkg = "perftest",
		.expect = MX_WORKS,
		.reason = "UD sends and receives on ODP MRs",
		.server = {"ib_send_bw", SV0, "--odp", "-c", "UD", "-n", "100",
			   "-p", "@PORT@"},
		.client = {"ib_send_bw", SV0, "--odp", "-c", "UD", "-n", "100",
			   "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "BW average[MB/sec]",
	},
	{
		.name = "ibv_rc_pingpong_dm",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "device memory (-j): ibv_alloc_dm, a zero-based "
			  "ibv_reg_dm_mr, ibv_memcpy_to_dm, -c checks it",
		.server = {"ibv_rc_pingpong", SV0, "-j", "-c", "-n", "100",
			   "-p", "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "-j", "-c", "-n", "100",
			   "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_rc_pingpong_dm_64k",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "64 KiB sends from device memory placed into device "
			  "memory by the sender (single copy)",
		.server = {"ibv_rc_pingpong", SV0, "-j", "-c", "-s", "65536",
			   "-n", "100", "-p", "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "-j", "-c", "-s", "65536",
			   "-n", "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_rc_pingpong_dm_tcp",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "device memory over softverbs' TCP transport",
		.server = {"ibv_rc_pingpong", SV0, "-j", "-c", "-s", "65536",
			   "-n", "100", "-p", "@PORT@"},
		.client = {"ibv_rc_pingpong", SV0, "-j", "-c", "-s", "65536",
			   "-n", "100", "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.env = {"SOFTVERBS_TRANSPORT=tcp"},
		.says = "100 iters in",
	},
	{
		.name = "ibv_rc_pingpong_dm_too_big",
		.pkg = "ibverbs-utils",
		.expect = MX_FAILS,
		.reason = "a buffer past max_dm_size (256 KiB): refused by the "
			  "program itself",
		.client = {"ibv_rc_pingpong", SV0, "-j", "-s", "300000", "-p",
			   "@PORT@"},
		.deadline_s = RUN,
		.says = "Device memory is insufficient",
	},

	/* softverbs_roce0, the RoCEv2 device with an Ethernet port (issue
	 * 26 item 1, issue 28 item 7; docs/roce.md).  Its pingpongs need two
	 * addresses: roce.netns runs them across namespaces. */
	{
		.name = "ibv_devices_roce",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "softverbs_roce0 listed after softverbs0",
		.client = {"ibv_devices"},
		.deadline_s = RUN,
		.says = "softverbs0",
		.also_says = "softverbs_roce0",
	},
	{
		.name = "ibv_devinfo_v_roce",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "an Ethernet port, its GIDs RoCE v2 as rxe's (the "
			  "default GID at 0)",
		.client = {"ibv_devinfo", "-v", "-d", "softverbs_roce0"},
		.deadline_s = RUN,
		.says = "link_layer:\t\tEthernet",
		.also_says = "GID[  0]:\t\tfe80::",
	},
	{
		.name = "devfiles_sysfs_roce",
		.pkg = "coreutils",
		.expect = MX_WORKS,
		.reason = "devfiles: softverbs_roce0's port, its GID types and "
			  "net interfaces in sysfs",
		.client = {"sh", "-c",
			   "d=/sys/class/infiniband/softverbs_roce0/ports/1; "
			   "cat $d/link_layer $d/gid_attrs/types/1 && "
			   "test -s $d/gid_attrs/ndevs/1 && echo ndev ok"},
		.deadline_s = RUN,
		.says = "Ethernet\nRoCE v2\nndev ok\n",
	},
	{
		.name = "ibv_ud_pingpong_roce",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "UD on softverbs_roce0, bytes checked (-c); both on "
			  "this host (between hosts RoCEv2: roce.netns)",
		.server = {"ibv_ud_pingpong", "-d", "softverbs_roce0", "-g",
			   "1", "-n", "100", "-s", "512", "-c", "-p", "@PORT@"},
		.client = {"ibv_ud_pingpong", "-d", "softverbs_roce0", "-g",
			   "1", "-n", "100", "-s", "512", "-c", "-p", "@PORT@",
			   "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
	{
		.name = "ibv_srq_pingpong_128_qps",
		.pkg = "ibverbs-utils",
		.expect = MX_WORKS,
		.reason = "128 RC QPs on one CQ and SRQ each side, created and "
			  "destroyed (a CQ's QP set, issue 25)",
		.server = {"ibv_srq_pingpong", SV0, "-q", "128", "-n", "100",
			   "-p", "@PORT@"},
		.client = {"ibv_srq_pingpong", SV0, "-q", "128", "-n", "100",
			   "-p", "@PORT@", "127.0.0.1"},
		.deadline_s = RUN,
		.says = "100 iters in",
	},
};

const int mx_nrows = sizeof(mx_rows) / sizeof(mx_rows[0]);
