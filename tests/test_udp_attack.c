/* SPDX-License-Identifier: MIT */
/*
 * test_udp_attack: soft+udp against a third party that forges RoCEv2
 * packets from a plain UDP socket (issue 22, docs/security.md "Round 2").
 * The attacker binds the connected peer's IP address (any 127/8 address is
 * bindable on lo, as a spoofed source is on a real network), builds
 * packets with a valid ICRC (it knows every field the ICRC covers) and
 * sends them to the victim device.
 *
 *  - WRITE into deregistered memory: FIRST packet, ql_mr_dereg + munmap,
 *    then the LAST packet: nothing may be written (the pages are mapped
 *    again to see a write, or left unmapped to see a crash);
 *  - a brute-forced QP number (sequential slot, every generation) with the
 *    guessed initial PSN 0 and a bad rkey: no connection may die;
 *  - a replayed old READ with a bad key, or not matching any READ the
 *    responder executed: dropped, the QP stays in RTS; a faithful
 *    duplicate READ is still executed again (IBTA 9.7.5.1.4);
 *  - peer_port=same: a packet from the peer's address on another source
 *    port is dropped even with the right QP number and PSN; peer_port=rxe
 *    expects the port kernel rxe derives from its QP number.
 */
#define _GNU_SOURCE
#include "verbs_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "providers/sudp/roce.h"
#include "providers/sudp/sudp.h"

static const struct vt_param *udp(void)
{
	return &vt_params[2];
}

/* ---- the attacker ------------------------------------------------------ */

struct atk {
	int fd;
	struct sockaddr_in to;
	struct roce_addr ra;
};

static void dev_addr(struct ql_device *dev, struct sockaddr_in *sa)
{
	struct ql_device_attr a;

	assert_int_equal(ql_device_query(dev, &a), 0);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	memcpy(&sa->sin_addr, &a.gid.raw[12], 4);
	sa->sin_port = htons((uint16_t)atoi(strrchr(a.name, ':') + 1));
}

/* An attacker that sends to `victim` from `spoofed`'s IP address, UDP
 * source port `sport` (0: any free one). */
static void atk_open(struct atk *k, struct ql_device *spoofed, struct ql_device *victim,
		     uint16_t sport)
{
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	int df = IP_PMTUDISC_DO;

	dev_addr(spoofed, &from);
	from.sin_port = htons(sport);
	dev_addr(victim, &k->to);
	k->fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(k->fd >= 0);
	/* DF: an unconnected DF datagram carries IPv4 ID 0 (docs/soft-udp.md 5) */
	assert_int_equal(setsockopt(k->fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof(df)), 0);
	assert_int_equal(bind(k->fd, (struct sockaddr *)&from, sizeof(from)), 0);
	assert_int_equal(getsockname(k->fd, (struct sockaddr *)&from, &fl), 0);
	memset(&k->ra, 0, sizeof(k->ra));
	k->ra.family = AF_INET;
	memcpy(k->ra.src, &from.sin_addr, 4);
	memcpy(k->ra.dst, &k->to.sin_addr, 4);
	k->ra.sport = ntohs(from.sin_port);
	k->ra.dport = ntohs(k->to.sin_port);
}

static void atk_send(struct atk *k, struct roce_pkt *p)
{
	uint8_t buf[SUDP_PKT_MAX];
	int n;

	p->bth.pkey = ROCE_DEFAULT_PKEY;
	n = ql__roce_build(buf, sizeof(buf), p, &k->ra);
	assert_true(n > 0);
	assert_int_equal(sendto(k->fd, buf, (size_t)n, 0, (struct sockaddr *)&k->to, sizeof(k->to)),
			 n);
}

static uint64_t rx_packets(struct ql_device *dev)
{
	struct ql_device_counters c;

	vt_counters(dev, &c);
	return c.rx_packets;
}

/* Wait until the device has taken in `n` more datagrams than `base`. */
static void wait_rx(struct ql_device *dev, uint64_t base, uint64_t n)
{
	for (int i = 0; i < 4000 && rx_packets(dev) < base + n; i++)
		usleep(500);
	assert_true(rx_packets(dev) >= base + n);
	usleep(2000); /* and processed them */
}

static uint32_t path_mtu(struct ql_qp *qp)
{
	struct ibv_qp_attr a;
	struct ql_qp_init_attr ia;

	assert_int_equal(ql_qp_query(qp, &a, IBV_QP_PATH_MTU, &ia), 0);
	return 128u << a.path_mtu;
}

static struct vt_pair *pair(void)
{
	struct vt_opts o = { .type = IBV_QPT_RC };
	struct vt_pair *pr;

	assert_int_equal(vt_pair_create(udp(), &o, &pr), 0);
	return pr;
}

/* ---- 1. WRITE into deregistered memory ---------------------------------- */

static void write_after_dereg(bool remap)
{
	struct vt_pair *pr = pair();
	const uint32_t mtu = path_mtu(pr->b.qp);
	const uint32_t psn = pr->a.params.psn; /* what b expects from a */
	const size_t len = 2 * (size_t)mtu;
	uint8_t *pay = malloc(mtu);
	struct roce_pkt p;
	struct ql_mr *mr;
	struct atk k;
	uint8_t *mem;
	uint64_t rx;

	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	assert_int_equal(ql_mr_reg(pr->b.pd, mem, len,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr),
			 0);
	atk_open(&k, pr->a.dev, pr->b.dev, 0);

	/* WRITE FIRST: one MTU of a two-MTU WRITE, placed */
	memset(pay, 0xaa, mtu);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC(ROCE_OP_RDMA_WRITE_FIRST);
	p.bth.dqpn = ql_qp_num(pr->b.qp);
	p.bth.psn = psn;
	p.reth.va = (uintptr_t)mem;
	p.reth.rkey = ql_mr_rkey(mr);
	p.reth.dma_len = (uint32_t)len;
	p.payload = pay;
	p.payload_len = mtu;
	rx = rx_packets(pr->b.dev);
	atk_send(&k, &p);
	wait_rx(pr->b.dev, rx, 1);
	assert_int_equal(mem[0], 0xaa);
	assert_int_equal(mem[mtu - 1], 0xaa);

	/* the application is done with the memory */
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(munmap(mem, len), 0);
	if (remap) {
		/* the pages reused for something else */
		uint8_t *again = mmap(mem, len, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		assert_true(again == mem);
	}

	/* WRITE LAST: must not land */
	memset(pay, 0xbb, mtu);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC(ROCE_OP_RDMA_WRITE_LAST);
	p.bth.dqpn = ql_qp_num(pr->b.qp);
	p.bth.psn = (psn + 1) & ROCE_PSN_MASK;
	p.bth.ackreq = 1;
	p.payload = pay;
	p.payload_len = mtu;
	rx = rx_packets(pr->b.dev);
	atk_send(&k, &p);
	wait_rx(pr->b.dev, rx, 1);
	if (remap) {
		for (size_t i = 0; i < len; i++)
			if (mem[i] != 0)
				fail_msg("byte %zu of freed memory written: 0x%02x", i, mem[i]);
		munmap(mem, len);
	}
	/* a remote access error on a message in progress: Class C, ERR */
	assert_int_equal(ql_qp_state(pr->b.qp), IBV_QPS_ERR);
	close(k.fd);
	free(pay);
	vt_pair_destroy(pr);
}

static void test_write_after_dereg_reused(void **s)
{
	(void)s;
	write_after_dereg(true);
}

static void test_write_after_dereg_unmapped(void **s)
{
	(void)s;
	write_after_dereg(false);
}

/* ---- 3. forged packets: guessed QPN and PSN ---------------------------- */

#define N_CONN 8

static void test_forged_guess_psn0_qpn(void **s)
{
	struct ql_device *da, *db;
	struct vt_node na, nb;
	struct vt_node_qp qa[N_CONN], qb[N_CONN];
	struct ql_qp_connect_opts o;
	struct roce_pkt p;
	struct atk k;
	unsigned long sent = 0;
	int dead = 0;

	(void)s;
	assert_int_equal(vt_dev_open(udp(), &da), 0);
	assert_int_equal(vt_dev_open(udp(), &db), 0);
	assert_int_equal(vt_node_open(&na, da, 1 << 16), 0);
	assert_int_equal(vt_node_open(&nb, db, 1 << 16), 0);
	ql_qp_connect_opts_default(&o);
	for (int i = 0; i < N_CONN; i++) {
		assert_int_equal(vt_node_qp_create(&na, &qa[i], 64, 16, 64), 0);
		assert_int_equal(vt_node_qp_create(&nb, &qb[i], 64, 16, 64), 0);
		qa[i].remote = qb[i].local;
		qb[i].remote = qa[i].local;
		assert_int_equal(ql_qp_connect(qa[i].qp, &qa[i].remote, &o), 0);
		assert_int_equal(ql_qp_connect(qb[i].qp, &qb[i].remote, &o), 0);
	}
	/* The attack as it worked: QPs take slots 2, 3, ... in order, only a
	 * 14-bit generation above the slot, PSNs start at 0. For each slot,
	 * every generation, PSN 0, a WRITE with a bad rkey (Class C: the
	 * QP dies if the packet is taken). */
	atk_open(&k, da, db, 0);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC(ROCE_OP_RDMA_WRITE_ONLY);
	p.bth.psn = 0;
	p.reth.va = 0x1000;
	p.reth.rkey = 0xdead00;
	p.reth.dma_len = 4;
	p.payload = (const uint8_t *)"evil";
	p.payload_len = 4;
	for (uint32_t slot = 2; slot < 2 + N_CONN; slot++)
		for (uint32_t gen = 0; gen < (1u << 14); gen++) {
			p.bth.dqpn = (gen << SUDP_QP_IDX_BITS) | slot;
			atk_send(&k, &p);
			/* paced: the socket buffer must not be what saves us */
			if ((++sent & 255) == 0)
				usleep(300);
		}
	usleep(20000);
	for (int i = 0; i < N_CONN; i++)
		if (ql_qp_state(qb[i].qp) != IBV_QPS_RTS)
			dead++;
	print_message("forged %lu packets: %d of %d connections broken\n", sent, dead, N_CONN);
	assert_int_equal(dead, 0);
	/* and they all still work */
	for (int i = 0; i < N_CONN; i++) {
		struct ibv_wc wc;

		na.buf[i] = (uint8_t)(0x40 + i);
		assert_int_equal(vt_post_write(qa[i].qp, (uint64_t)i, na.buf + i, 1,
					       ql_mr_lkey(na.mr), qb[i].local.vaddr + (uint64_t)i,
					       qb[i].local.rkey, IBV_SEND_SIGNALED),
				 0);
		vt_expect_wc(qa[i].scq, &wc, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
		assert_int_equal(nb.buf[i], 0x40 + i);
	}
	close(k.fd);
	for (int i = 0; i < N_CONN; i++) {
		vt_node_qp_destroy(&qa[i]);
		vt_node_qp_destroy(&qb[i]);
	}
	vt_node_close(&na);
	vt_node_close(&nb);
}

/* QP numbers and initial PSNs: different on every create, in range, never
 * the reserved 0, 1 or 0xffffff. */
static void test_qpn_psn_random(void **s)
{
	struct ql_device *d;
	struct vt_node n;
	struct vt_node_qp q[16];
	uint32_t idx_seq = 0, psn_zero = 0;

	(void)s;
	assert_int_equal(vt_dev_open(udp(), &d), 0);
	assert_int_equal(vt_node_open(&n, d, 4096), 0);
	for (int i = 0; i < 16; i++) {
		assert_int_equal(vt_node_qp_create(&n, &q[i], 16, 4, 0), 0);
		assert_true(q[i].local.qpn > 1 && q[i].local.qpn < 0xffffff);
		assert_true(q[i].local.psn <= 0xffffff);
		psn_zero += q[i].local.psn == 0;
		for (int j = 0; j < i; j++) {
			assert_int_not_equal(q[i].local.qpn, q[j].local.qpn);
			assert_int_not_equal(q[i].local.psn, q[j].local.psn);
		}
		if (i && (q[i].local.qpn & (SUDP_MAX_QP - 1)) ==
				 (q[i - 1].local.qpn & (SUDP_MAX_QP - 1)) + 1)
			idx_seq++;
	}
	assert_true(psn_zero == 0);
	assert_true(idx_seq < 15); /* not one slot after the other */
	/* a QP created again in the slot just freed gets another number */
	{
		uint32_t old = q[15].local.qpn;

		vt_node_qp_destroy(&q[15]);
		for (int t = 0; t < 50; t++) {
			assert_int_equal(vt_node_qp_create(&n, &q[15], 16, 4, 0), 0);
			assert_int_not_equal(q[15].local.qpn, old);
			vt_node_qp_destroy(&q[15]);
		}
	}
	for (int i = 0; i < 15; i++)
		vt_node_qp_destroy(&q[i]);
	vt_node_close(&n);
}

/* ---- 3. replayed READs --------------------------------------------------- */

static void read_req(struct roce_pkt *p, uint32_t dqpn, uint32_t psn, uint64_t va, uint32_t rkey,
		     uint32_t len)
{
	memset(p, 0, sizeof(*p));
	p->bth.opcode = ROCE_RC(ROCE_OP_RDMA_READ_REQUEST);
	p->bth.dqpn = dqpn;
	p->bth.psn = psn;
	p->bth.ackreq = 1;
	p->reth.va = va;
	p->reth.rkey = rkey;
	p->reth.dma_len = len;
}

static void test_replayed_read(void **s)
{
	struct vt_pair *pr = pair();
	const uint32_t mtu = path_mtu(pr->b.qp);
	const uint32_t len = 3 * mtu;
	const uint32_t psn0 = pr->a.params.psn;
	struct ql_device_counters c0, c1;
	struct roce_pkt p;
	struct ibv_wc wc;
	struct atk k;
	uint64_t rx;

	(void)s;
	assert_true(len <= pr->b.len);
	vt_fill(pr->b.buf, len, 9);
	/* a real 3-packet READ: b executes it at psn0, its responses take
	 * psn0 .. psn0+2 */
	assert_int_equal(vt_post_read(pr->a.qp, 1, pr->a.buf, len, ql_mr_lkey(pr->a.mr),
				      (uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
				      IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	assert_true(vt_check(pr->a.buf, len, 9));
	atk_open(&k, pr->a.dev, pr->b.dev, 0);

	/* replays b must drop: an old PSN with a bad key (this killed the
	 * QP), a matching PSN with another address, a PSN before any READ */
	vt_counters(pr->b.dev, &c0);
	rx = rx_packets(pr->b.dev);
	read_req(&p, ql_qp_num(pr->b.qp), psn0, (uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr) ^ 0x100,
		 len);
	atk_send(&k, &p);
	read_req(&p, ql_qp_num(pr->b.qp), psn0, (uintptr_t)pr->b.buf + 8, ql_mr_rkey(pr->b.mr),
		 len - 8);
	atk_send(&k, &p);
	read_req(&p, ql_qp_num(pr->b.qp), (psn0 - 100) & ROCE_PSN_MASK, (uintptr_t)pr->b.buf,
		 ql_mr_rkey(pr->b.mr), 64);
	atk_send(&k, &p);
	wait_rx(pr->b.dev, rx, 3);
	vt_counters(pr->b.dev, &c1);
	assert_int_equal(ql_qp_state(pr->b.qp), IBV_QPS_RTS);
	assert_int_equal(c1.duplicates - c0.duplicates, 3);
	assert_int_equal(c1.rc_nak_access - c0.rc_nak_access, 0);
	assert_int_equal(c1.tx_packets - c0.tx_packets, 0); /* not executed */

	/* a faithful duplicate (the requester asking again from the second
	 * response packet) is executed again: two response packets */
	vt_counters(pr->b.dev, &c0);
	rx = rx_packets(pr->b.dev);
	read_req(&p, ql_qp_num(pr->b.qp), (psn0 + 1) & ROCE_PSN_MASK, (uintptr_t)pr->b.buf + mtu,
		 ql_mr_rkey(pr->b.mr), len - mtu);
	atk_send(&k, &p);
	wait_rx(pr->b.dev, rx, 1);
	vt_counters(pr->b.dev, &c1);
	assert_int_equal(c1.duplicates - c0.duplicates, 1);
	assert_true(c1.tx_packets - c0.tx_packets >= 2);
	assert_int_equal(ql_qp_state(pr->b.qp), IBV_QPS_RTS);

	/* the connection still works both ways */
	vt_fill(pr->a.buf, 64, 3);
	assert_int_equal(vt_post_write(pr->a.qp, 2, pr->a.buf, 64, ql_mr_lkey(pr->a.mr),
				       (uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
				       IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_true(vt_check(pr->b.buf, 64, 3));
	close(k.fd);
	vt_pair_destroy(pr);
}

/* ---- 3. the source port ---------------------------------------------------- */

static void open_with(const char *query, struct ql_device **d)
{
	char uri[QL_DEVICE_URI_MAX];

	vt_dev_uri(udp(), uri, sizeof(uri));
	assert_true(strlen(uri) + strlen(query) + 2 < sizeof(uri));
	strcat(uri, strchr(uri, '?') ? "&" : "?");
	strcat(uri, query);
	if (ql_device_open(uri, d))
		fail_msg("ql_device_open %s: %s", uri, ql_error_detail());
}

static void test_spoofed_source_port(void **s)
{
	struct ql_device *da, *db;
	struct vt_node na, nb;
	struct vt_node_qp qa, qb;
	struct ql_qp_connect_opts o;
	struct ql_device_counters c0, c1;
	struct roce_pkt p;
	struct ibv_wc wc;
	struct atk k;
	uint64_t rx;

	(void)s;
	assert_int_equal(vt_dev_open(udp(), &da), 0);
	open_with("peer_port=same", &db);
	assert_int_equal(vt_node_open(&na, da, 4096), 0);
	assert_int_equal(vt_node_open(&nb, db, 4096), 0);
	assert_int_equal(vt_node_qp_create(&na, &qa, 64, 16, 64), 0);
	assert_int_equal(vt_node_qp_create(&nb, &qb, 64, 16, 64), 0);
	qa.remote = qb.local;
	qb.remote = qa.local;
	ql_qp_connect_opts_default(&o);
	assert_int_equal(ql_qp_connect(qa.qp, &qa.remote, &o), 0);
	assert_int_equal(ql_qp_connect(qb.qp, &qb.remote, &o), 0);

	/* the worst case: the attacker knows the QP number and the PSN b
	 * expects, but sends from another port of the peer's address */
	atk_open(&k, da, db, 0);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC(ROCE_OP_RDMA_WRITE_ONLY);
	p.bth.dqpn = qb.local.qpn;
	p.bth.psn = qa.local.psn;
	p.reth.va = 0x1000;
	p.reth.rkey = 0xdead00;
	p.reth.dma_len = 4;
	p.payload = (const uint8_t *)"evil";
	p.payload_len = 4;
	vt_counters(db, &c0);
	rx = rx_packets(db);
	atk_send(&k, &p);
	wait_rx(db, rx, 1);
	vt_counters(db, &c1);
	assert_int_equal(ql_qp_state(qb.qp), IBV_QPS_RTS);
	assert_int_equal(c1.rx_dropped - c0.rx_dropped, 1);
	assert_int_equal(c1.rc_nak_access - c0.rc_nak_access, 0);

	/* the real peer (sending from its own bound port) gets through */
	na.buf[0] = 0x5a;
	assert_int_equal(vt_post_write(qa.qp, 7, na.buf, 1, ql_mr_lkey(na.mr), qb.local.vaddr,
				       qb.local.rkey, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(qa.scq, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	assert_int_equal(nb.buf[0], 0x5a);
	close(k.fd);
	vt_node_qp_destroy(&qa);
	vt_node_qp_destroy(&qb);
	vt_node_close(&na);
	vt_node_close(&nb);
}

/* peer_port=rxe: packets must come from the port kernel rxe derives from
 * its QP number; peer_port=N from N; bad values are refused. */
static void test_peer_port_option(void **s)
{
	struct ql_device *d;

	(void)s;
	/* Linux <= 5.17, rxe_qp.c: RXE_ROCE_V2_SPORT (0xc000) +
	 * (hash_32(qpn, 14) & 0x3fff), hash_32(v, 14) = (v * 0x61c88647) >> 18
	 * (include/linux/hash.h) */
	assert_int_equal(sudp_rxe_sport_old(17), 0xc000 + ((17u * 0x61c88647u) >> 18));
	assert_int_equal(sudp_rxe_sport_old(17), 0xdf94); /* rxe's first QP */
	assert_int_equal(sudp_rxe_sport_old(0), 0xc000);
	/* Linux >= 5.18, rdma_get_udp_sport(0, lqpn, rqpn), include/rdma/ib_verbs.h:
	 * v = lqpn * rqpn; v ^= v >> 20; v ^= v >> 40; fl = v & 0xfffff;
	 * port = ((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) | 0xc000.
	 * 17 * 0x123456 = 0x13579b6; ^ (>> 20 = 0x13) = 0x13579a5; fl = 0x579a5;
	 * low 14 bits 0x39a5 ^ (0x54000 >> 14 = 0x15) = 0x39b0 */
	assert_int_equal(sudp_rxe_sport(17, 0x123456), 0xc000 | 0x39b0);
	assert_int_equal(sudp_rxe_sport(0x123456, 17), sudp_rxe_sport(17, 0x123456));
	for (uint32_t q = 17; q < 300; q++) {
		assert_true(sudp_rxe_sport_old(q) >= 0xc000);
		assert_true(sudp_rxe_sport(q, 0xabcdef) >= 0xc000);
	}

	open_with("peer_port=rxe", &d);
	ql_device_close(d);
	open_with("peer_port=4791", &d);
	ql_device_close(d);
	open_with("peer_port=any", &d);
	ql_device_close(d);
	{
		static const char *const bad[] = { "peer_port=", "peer_port=0", "peer_port=65536",
						   "peer_port=-1", "peer_port=kernel" };
		char uri[QL_DEVICE_URI_MAX];

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			vt_dev_uri(udp(), uri, sizeof(uri));
			strcat(uri, strchr(uri, '?') ? "&" : "?");
			strcat(uri, bad[i]);
			assert_int_equal(ql_device_open(uri, &d), -EINVAL);
			assert_non_null(strstr(ql_error_detail(), "peer_port"));
		}
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_after_dereg_reused),
		cmocka_unit_test(test_write_after_dereg_unmapped),
		cmocka_unit_test(test_qpn_psn_random),
		cmocka_unit_test(test_forged_guess_psn0_qpn),
		cmocka_unit_test(test_replayed_read),
		cmocka_unit_test(test_spoofed_source_port),
		cmocka_unit_test(test_peer_port_option),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]); /* one test: its name */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
