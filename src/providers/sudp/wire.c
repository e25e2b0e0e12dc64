/* SPDX-License-Identifier: MIT */
/*
 * soft+udp provider, the wire: packets built into the transmit batch
 * (ICRC, fault injection, pcap) and sent with sendmmsg; datagrams received
 * with recvmmsg, parsed and validated (codec, QP, state, source, ICRC)
 * before they reach the completer or the responder.
 *
 * Everything a datagram says is input from the network: lengths, keys,
 * addresses and PSNs are checked against our own tables before any byte is
 * placed, and nothing in a packet is trusted to size a copy.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "providers/common/devmem.h"
#include "providers/common/soft_nic.h"
#include "providers/sudp/nic_int.h"
#include <sys/socket.h>
#include <time.h>

/* ---- transmit ----------------------------------------------------------- */

void ql__sudp_tx_flush(struct sudp_device *dev)
{
	uint32_t sent = 0;

	while (sent < dev->ntx) {
		int r = sendmmsg(dev->sock, dev->tx_msg + sent, dev->ntx - sent, MSG_DONTWAIT);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			/* a full socket buffer is a congested wire: the
			 * packets are lost, RC resends them */
			break;
		}
		sent += (uint32_t)r;
	}
	dev->ntx = 0;
}

/* Where the next packet is built. */
static uint8_t *tx_buf(struct sudp_device *dev)
{
	if (dev->ntx == SUDP_BATCH)
		ql__sudp_tx_flush(dev);
	return dev->tx[dev->ntx].buf;
}

/* Build p with `plen` payload bytes gathered from sg at off into the next
 * slot, add the ICRC and queue it (through fault injection). */
/* The payload out of GPU device memory (devmem.h): 0, or -EIO. */
static __attribute__((noinline)) int tx_gather_dev(struct sudp_qp *qp, uint8_t *dst,
						   const struct ibv_sge *sg, int nsge, uint64_t off,
						   const uint8_t *flat, uint32_t dev, uint32_t plen)
{
	struct ibv_sge t[SUDP_MAX_SGE];

	if (flat)
		return ql__nic_copy(dst, 0, flat, dev, plen);
	ql__sudp_tagged(qp, sg, nsge, t);
	return ql__nic_sg_copy(&(struct ibv_sge){ (uint64_t)(uintptr_t)dst, plen, 0 }, 1, 0, t,
			       nsge, off, plen);
}

void ql__sudp_tx_pkt(struct sudp_qp *qp, struct roce_pkt *p, const struct ibv_sge *sg, int nsge,
		     uint64_t off, const uint8_t *flat, uint32_t gpu)
{
	struct sudp_device *dev = qp->dev;
	uint8_t *buf = tx_buf(dev);
	struct roce_fault *f = qp->fault ? qp->fault : dev->fault;
	uint32_t plen = p->payload_len, pad = ROCE_PAD(p->payload_len);
	struct iovec iov;
	struct msghdr *mh;
	int hl;

	p->bth.pkey = ROCE_DEFAULT_PKEY;
	p->bth.dqpn = qp->dest_qpn;
	p->bth.tver = 0;
	hl = ql__roce_build_hdr(buf, SUDP_PKT_MAX, p);
	if (hl < 0 || (size_t)hl + plen + pad + ROCE_ICRC_LEN > SUDP_PKT_MAX)
		return;
	if (plen) {
		if (sudp_unlikely(gpu)) {
			if (tx_gather_dev(qp, buf + hl, sg, nsge, off, flat, gpu, plen))
				return; /* lost on the wire: the slot is free again */
		} else if (flat) {
			memcpy(buf + hl, flat, plen);
		} else {
			ql__sge_gather(buf + hl, sg, nsge, off, plen);
		}
	}
	memset(buf + hl + plen, 0, pad);
	iov.iov_base = buf;
	iov.iov_len = (size_t)hl + plen + pad;
	ql__roce_put_icrc(buf + iov.iov_len, ql__roce_icrc_iov(&qp->txaddr, &iov, 1));
	iov.iov_len += ROCE_ICRC_LEN;
	if (f && ql__roce_fault_tx(f, dev->now, &iov, 1, &qp->peer, qp->peerlen) != ROCE_FAULT_SEND)
		return;		   /* dropped or held: the slot is free again */
	sudp_cnt(dev, SC_TX_PKTS); /* what goes on the wire */
	if (sudp_unlikely(dev->pcap)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ql__roce_pcap_write(dev->pcap,
				    (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
				    &qp->txaddr, &iov, 1);
	}
	dev->tx_iov[dev->ntx] = iov;
	mh = &dev->tx_msg[dev->ntx].msg_hdr;
	memset(mh, 0, sizeof(*mh));
	memcpy(&dev->tx_peer[dev->ntx], &qp->peer, qp->peerlen);
	mh->msg_name = &dev->tx_peer[dev->ntx];
	mh->msg_namelen = qp->peerlen;
	mh->msg_iov = &dev->tx_iov[dev->ntx];
	mh->msg_iovlen = 1;
	dev->ntx++;
}

bool ql__sudp_fault_drain(struct sudp_device *dev, struct roce_fault *f)
{
	const struct roce_fault_pkt *q;
	bool did = false;

	while ((q = ql__roce_fault_next(f, dev->now))) {
		(void)!sendto(dev->sock, q->data, q->len, MSG_DONTWAIT,
			      (const struct sockaddr *)&q->peer, q->peerlen);
		sudp_cnt(dev, SC_TX_PKTS);
		ql__roce_fault_pop(f);
		did = true;
	}
	return did;
}

void ql__sudp_send_aeth(struct sudp_qp *qp, uint8_t opcode, uint8_t syndrome, uint32_t psn)
{
	struct roce_pkt p;

	memset(&p, 0, sizeof(p));
	p.bth.opcode = opcode;
	p.bth.psn = psn;
	p.aeth.syndrome = syndrome;
	p.aeth.msn = qp->msn & 0xffffff;
	ql__sudp_tx_pkt(qp, &p, NULL, 0, 0, NULL, 0);
}

/* The coalesced ACK: everything before epsn. */
void ql__sudp_send_ack_now(struct sudp_qp *qp)
{
	ql__sudp_send_aeth(qp, ROCE_RC(ROCE_OP_ACKNOWLEDGE), SUDP_AETH_ACK,
			   sudp_psn_add(qp->epsn, ROCE_PSN_MASK));
	qp->ack_pending = false;
	qp->unacked = 0;
}

void ql__sudp_flush_ack(struct sudp_qp *qp)
{
	if (qp->ack_pending)
		ql__sudp_send_ack_now(qp);
}

/* ---- receive ------------------------------------------------------------ */

void ql__sudp_rx_datagram(struct sudp_device *dev, const uint8_t *buf, size_t len,
			  const struct sockaddr_storage *from)
{
	struct roce_addr a;
	struct roce_pkt p;
	struct sudp_qp *qp;
	enum ibv_qp_state st;
	uint8_t tr, op;

	memset(&a, 0, sizeof(a));
	a.family = dev->family;
	if (from->ss_family == AF_INET && dev->family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)from;

		memcpy(a.src, &s->sin_addr, 4);
		memcpy(a.dst, dev->my_ip, 4);
		a.sport = ntohs(s->sin_port);
	} else if (from->ss_family == AF_INET6 && dev->family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)from;

		memcpy(a.src, &s->sin6_addr, 16);
		memcpy(a.dst, dev->my_ip, 16);
		a.sport = ntohs(s->sin6_port);
	} else {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	a.dport = dev->port;
	if (ql__roce_parse(buf, len, &p)) {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	/* The cheap checks first (QP, state, source), then the ICRC: a flood
	 * of garbage costs a table lookup each, not a CRC (nor, for IPv4, the
	 * solving of the Identification field, docs/soft-udp.md 5) */
	qp = dev->qps[p.bth.dqpn & (SUDP_MAX_QP - 1)];
	if (!qp || qp->base.qp_num != p.bth.dqpn || p.bth.pkey != ROCE_DEFAULT_PKEY) {
		sudp_cnt(dev, SC_RX_NO_QP);
		return;
	}
	st = (enum ibv_qp_state)atomic_load(&qp->state);
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD && st != IBV_QPS_SQE) {
		if (qp->type == IBV_QPT_UC)
			sudp_cnt(dev, SC_UC_DROP_NOT_READY);
		else
			sudp_cnt(dev, SC_RX_NO_QP);
		return;
	}
	tr = ROCE_OPCODE_TR(p.bth.opcode);
	op = ROCE_OPCODE_OP(p.bth.opcode);
	/* only from the address the QP is connected to, of its own type */
	if (!qp->connected || memcmp(a.src, qp->peer_ip, dev->family == AF_INET ? 4 : 16) != 0 ||
	    (qp->peer_sport[0] && a.sport != qp->peer_sport[0] && a.sport != qp->peer_sport[1]) ||
	    (tr == ROCE_TR_RC) != (qp->type == IBV_QPT_RC) ||
	    (tr != ROCE_TR_RC && tr != ROCE_TR_UC)) {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	if (sudp_unlikely(dev->pcap)) {
		struct iovec iov = { (void *)(uintptr_t)buf, len };
		struct timespec ts;

		if (ql__roce_icrc_solve_id(buf, len, &a, &a.ip_id)) {
			sudp_cnt(dev, SC_RX_ICRC);
			return;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ql__roce_pcap_write(dev->pcap,
				    (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, &a,
				    &iov, 1);
	} else if (ql__roce_icrc_check(buf, len, &a)) {
		sudp_cnt(dev, SC_RX_ICRC);
		return;
	}
	if (op >= ROCE_OP_RDMA_READ_RESPONSE_FIRST && op <= ROCE_OP_ATOMIC_ACKNOWLEDGE) {
		if (qp->type != IBV_QPT_RC || st == IBV_QPS_RTR) {
			sudp_cnt(dev, SC_RX_BAD);
			return;
		}
		if (op == ROCE_OP_ACKNOWLEDGE)
			ql__sudp_rx_ack(qp, &p);
		else if (op == ROCE_OP_ATOMIC_ACKNOWLEDGE)
			ql__sudp_rx_atomic_ack(qp, &p);
		else
			ql__sudp_rx_read_resp(qp, &p);
		return;
	}
	if (op > ROCE_OP_FETCH_ADD ||
	    (qp->type == IBV_QPT_UC && op > ROCE_OP_RDMA_WRITE_ONLY_WITH_IMM)) {
		sudp_cnt(dev, SC_RX_BAD);
		return;
	}
	ql__sudp_rx_request(qp, &p, op);
}

/* The receive batch's headers (once, before the first ql__sudp_rx_batch). */
void ql__sudp_rx_init(struct sudp_device *dev)
{
	for (int i = 0; i < SUDP_BATCH; i++) {
		struct msghdr *mh = &dev->rx_msg[i].msg_hdr;

		dev->rx_iov[i].iov_base = dev->rx[i].buf;
		dev->rx_iov[i].iov_len = sizeof(dev->rx[i].buf);
		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &dev->rx_peer[i];
		mh->msg_namelen = sizeof(dev->rx_peer[i]);
		mh->msg_iov = &dev->rx_iov[i];
		mh->msg_iovlen = 1;
		mh->msg_control = dev->rx_ctl[i].buf;
		mh->msg_controllen = sizeof(dev->rx_ctl[i].buf);
	}
}

/* The kernel's cumulative drop count (SO_RXQ_OVFL) rides on every datagram
 * queued after the socket's first drop. */
static void rx_ctl(struct sudp_device *dev, struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		uint32_t k;
		uint64_t v;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SO_RXQ_OVFL ||
		    c->cmsg_len < CMSG_LEN(sizeof(k)))
			continue;
		memcpy(&k, CMSG_DATA(c), sizeof(k));
		v = atomic_load_explicit(&dev->rx_kdrops, memory_order_relaxed);
		if ((uint32_t)v != k)
			atomic_store_explicit(&dev->rx_kdrops, sudp_kdrops_extend(v, k),
					      memory_order_relaxed);
	}
}

int ql__sudp_rx_batch(struct sudp_device *dev)
{
	/* The kernel writes only msg_namelen, msg_controllen, msg_flags and
	 * msg_len of the headers it fills: those are reset after use, so a
	 * poll that finds nothing (most of them, spinning) costs the syscall
	 * alone. */
	int n = recvmmsg(dev->sock, dev->rx_msg, SUDP_BATCH, MSG_DONTWAIT, NULL);

	for (int i = 0; i < n; i++) {
		struct msghdr *mh = &dev->rx_msg[i].msg_hdr;

		/* a truncated datagram is not a packet of ours */
		if (mh->msg_flags & MSG_TRUNC)
			sudp_cnt(dev, SC_RX_BAD);
		else
			ql__sudp_rx_datagram(dev, dev->rx[i].buf, dev->rx_msg[i].msg_len,
					     &dev->rx_peer[i]);
		mh->msg_namelen = sizeof(dev->rx_peer[i]);
		/* 0 when the datagram came without one */
		if (mh->msg_controllen)
			rx_ctl(dev, mh);
		mh->msg_controllen = sizeof(dev->rx_ctl[i].buf);
	}
	if (n > 0) /* processed, whatever the verdict */
		atomic_fetch_add_explicit(&dev->cnt.v[SC_RX_PKTS], (uint64_t)n,
					  memory_order_release);
	return n > 0 ? n : 0;
}
