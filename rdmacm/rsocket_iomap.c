// SPDX-License-Identifier: MIT
/*
 * rsockets' riomap/riounmap/riowrite (the protocol is rs_wire.h): a
 * window of ours is registered for remote write and announced by an
 * RS_CTRL_IOMAP control message; riowrite is a plain RDMA WRITE into a
 * window the peer announced, on the zero-copy lane from the program's
 * buffer (rsocket_lane.c) or from its own bounce ring (RS_WBUF_SIZE), and
 * uses none of the peer's receives.  Split from rsocket_io.c (the
 * stream), whose CQ handling takes the peer's windows (take_iomap).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rs.h"

off_t rs_iomap_add(struct rs *rs, void *buf, size_t len, off_t offset)
{
	struct rs_iomap *m = NULL;
	uint64_t end = 0;
	int i, ret, limit = RS_IOMAPS;

	if (!buf || !len)
		return -EINVAL;
	ret = rs_ready_to_talk(rs, false); /* the window goes to the peer */
	if (ret)
		return ret;
	if (!rs_can_talk(rs))
		return -ENOTCONN;
	for (i = 0; i < limit; i++) {
		if (rs->lmaps[i].used) {
			if (rs->lmaps[i].offset + rs->lmaps[i].len > end)
				end = rs->lmaps[i].offset + rs->lmaps[i].len;
		} else if (!m) {
			m = &rs->lmaps[i];
		}
	}
	if (!m)
		return -ENOMEM;
	if (offset == -1)
		offset = (off_t)end;
	if (offset < 0)
		return -EINVAL;
	for (i = 0; i < limit; i++) {
		struct rs_iomap *o = &rs->lmaps[i];

		if (o->used && (uint64_t)offset < o->offset + o->len &&
		    o->offset < (uint64_t)offset + len)
			return -EINVAL; /* overlaps a mapping of ours */
	}
	m->mr = ibv_reg_mr(rs->pd, buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!m->mr)
		return -errno;
	m->offset = (uint64_t)offset;
	m->len = len;
	m->addr = (uintptr_t)buf;
	m->rkey = m->mr->rkey;
	m->used = true;
	for (;;) {
		rs_progress(rs);
		ret = rs_send_ctrl(rs, RS_CTRL_IOMAP, m);
		if (ret != -EAGAIN)
			break;
		rs_wait(rs, -1);
	}
	if (ret) {
		ibv_dereg_mr(m->mr);
		m->used = false;
		return ret;
	}
	return offset;
}

int rs_iomap_del(struct rs *rs, void *buf, size_t len)
{
	int i, ret;

	for (i = 0; i < RS_IOMAPS; i++) {
		struct rs_iomap *m = &rs->lmaps[i];

		if (!m->used || m->addr != (uintptr_t)buf || m->len != len)
			continue;
		for (;;) {
			rs_progress(rs);
			ret = rs_send_ctrl(rs, RS_CTRL_UNMAP, m);
			if (ret != -EAGAIN)
				break;
			rs_wait(rs, -1);
		}
		ibv_dereg_mr(m->mr);
		m->mr = NULL;
		m->used = false;
		return 0;
	}
	return -EINVAL;
}

/* The peer's window holding [offset, offset + count), or NULL. */
static struct rs_iomap *find_window(struct rs *rs, off_t offset, size_t count)
{
	for (int i = 0; i < RS_IOMAPS; i++) {
		struct rs_iomap *r = &rs->rmaps[i];

		if (r->used && offset >= 0 && (uint64_t)offset >= r->offset &&
		    (uint64_t)offset - r->offset <= r->len &&
		    count <= r->len - ((uint64_t)offset - r->offset))
			return r;
	}
	return NULL;
}

/* riowrite's bounce ring, made when a copy first needs it: 0 or -errno. */
static int wbuf_ready(struct rs *rs)
{
	int err;

	if (rs->wbuf)
		return 0;
	rs->wbuf = rs_ring_alloc(RS_WBUF_SIZE);
	if (!rs->wbuf)
		return -ENOMEM;
	rs->wmr = ibv_reg_mr(rs->pd, rs->wbuf, RS_WBUF_SIZE,
			     IBV_ACCESS_LOCAL_WRITE);
	if (rs->wmr)
		return 0;
	err = -errno;
	free(rs->wbuf);
	rs->wbuf = NULL;
	return err;
}

size_t rs_iowrite(struct rs *rs, const void *buf, size_t count, off_t offset,
		  int flags)
{
	bool dontwait = rs->nonblock || (flags & MSG_DONTWAIT);
	struct rs_iomap *m = NULL;
	size_t total = 0;
	int ret;

	ret = rs_ready_to_talk(rs, dontwait);
	if (ret)
		goto err;
	rs_progress(rs);
	m = find_window(rs, offset, count);
	if (!m) {
		ret = -EINVAL; /* outside every window the peer mapped */
		goto err;
	}
	while (total < count) {
		uint64_t raddr =
			m->addr + ((uint64_t)offset - m->offset) + total;
		uint64_t pos = rs->wposted % RS_WBUF_SIZE;
		uint64_t room = RS_WBUF_SIZE - (rs->wposted - rs->wdone);
		uint64_t chunk = RS_WBUF_SIZE - pos;
		struct ibv_sge sge;
		struct ibv_send_wr wr = {0}, *bad;

		if (room < chunk)
			chunk = room;
		if (chunk > count - total)
			chunk = count - total;
		if (!rs_can_talk(rs)) {
			ret = rs->state == RS_FAILED ? -rs->err : -EPIPE;
			goto partial;
		}
		if (rs->zc && count - total >= RS_LANE_MIN) {
			/* from the program's buffer, placed when it returns */
			uint64_t n = count - total < RS_LANE_MAX ? count - total
								 : RS_LANE_MAX;

			ret = rs_lane_write(rs, (const uint8_t *)buf + total,
					    (uint32_t)n, raddr, m->rkey);
			if (ret == 0) {
				total += n;
				continue;
			}
			if (ret == -ECONNRESET)
				rs_fail(rs, ECONNRESET);
			if (ret != -EAGAIN)
				goto partial;
		}
		if (!chunk || rs->sq_used >= RS_SQ_DEPTH - RS_CTRL_SLOTS) {
			if (dontwait) {
				ret = -EAGAIN;
				goto partial;
			}
			rs_wait(rs, -1);
			rs_progress(rs);
			continue;
		}
		ret = wbuf_ready(rs); /* not needed while the lane carries */
		if (ret)
			goto partial;
		memcpy(rs->wbuf + pos, (const uint8_t *)buf + total, chunk);
		sge.addr = (uintptr_t)(rs->wbuf + pos);
		sge.length = (uint32_t)chunk;
		sge.lkey = rs->wmr->lkey;
		wr.wr_id = RS_WR(RS_WR_IOW, chunk);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = m->rkey;
		ret = ibv_post_send(rs->qp, &wr, &bad);
		if (ret) {
			rs_fail(rs, ECONNRESET);
			ret = -ECONNRESET;
			goto partial;
		}
		rs->sq_used++;
		rs->wposted += chunk;
		total += chunk;
		rs_progress(rs);
	}
	return total;

partial:
	if (total)
		return total;
err:
	errno = -ret;
	return (size_t)-1;
}
