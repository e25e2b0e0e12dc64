/* SPDX-License-Identifier: MIT */
/*
 * SDR building blocks: the immediate's layout and byte order (boundary
 * values; what a verbs completion and the soft+udp wire carry), the memory
 * table (allocation rules, remote MRs, least-recently-freed reuse, many
 * threads at once), and the control messages' byte layout.
 */
#define _GNU_SOURCE
#include "sdr_pair.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "sdr/sdr_int.h"

/* ---- the immediate ------------------------------------------------------- */

static uint32_t host(__be32 v)
{
	return ntohl((uint32_t)v);
}

static void test_imm_layout(void **state)
{
	uint32_t id, pkt, user;
	__be32 v;
	const uint8_t *b = (const uint8_t *)&v;

	(void)state;
	/* each field at its bits, alone */
	assert_int_equal(host(ql_sdr_imm_encode(1023, 0, 0)), 0xffc00000u);
	assert_int_equal(host(ql_sdr_imm_encode(0, (1u << 18) - 1, 0)), 0x003ffff0u);
	assert_int_equal(host(ql_sdr_imm_encode(0, 0, 15)), 0x0000000fu);
	assert_int_equal(host(ql_sdr_imm_encode(1, 1, 1)), (1u << 22) | (1u << 4) | 1u);
	/* out-of-range values are masked, never spill into a neighbour */
	assert_int_equal(host(ql_sdr_imm_encode(1024, 0, 0)), 0);
	assert_int_equal(host(ql_sdr_imm_encode(0, 1u << 18, 0)), 0);
	assert_int_equal(host(ql_sdr_imm_encode(0, 0, 16)), 0);
	/* network byte order in memory: the id's high bits come first */
	v = ql_sdr_imm_encode(1023, 0, 0);
	assert_int_equal(b[0], 0xff);
	assert_int_equal(b[1], 0xc0);
	assert_int_equal(b[3], 0x00);
	v = ql_sdr_imm_encode(0, 0, 15);
	assert_int_equal(b[3], 0x0f);
	assert_int_equal(b[0], 0x00);
	/* round trips at every boundary */
	const uint32_t ids[] = { 0, 1, 511, 512, 1022, 1023 };
	const uint32_t pkts[] = { 0, 1, 4095, 4096, (1u << 17), (1u << 18) - 2, (1u << 18) - 1 };
	const uint32_t users[] = { 0, 1, 7, 8, 14, 15 };

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		for (size_t j = 0; j < sizeof(pkts) / sizeof(pkts[0]); j++)
			for (size_t k = 0; k < sizeof(users) / sizeof(users[0]); k++) {
				ql_sdr_imm_decode(ql_sdr_imm_encode(ids[i], pkts[j], users[k]), &id,
						  &pkt, &user);
				assert_int_equal(id, ids[i]);
				assert_int_equal(pkt, pkts[j]);
				assert_int_equal(user, users[k]);
			}
	ql_sdr_imm_decode((__be32)htonl(0xffffffffu), &id, &pkt, &user);
	assert_int_equal(id, 1023);
	assert_int_equal(pkt, (1u << 18) - 1);
	assert_int_equal(user, 15);
}

/* What the sender puts in imm_data is what the receiver's completion
 * carries, bit for bit (per URI). */
static void test_imm_completion(void **state)
{
	struct vt_pair *pr = *state;
	struct ibv_wc wc;
	uint32_t id, pkt, user;
	__be32 imm = ql_sdr_imm_encode(1023, (1u << 18) - 1, 15);

	assert_int_equal(vt_post_recv(pr->b.qp, 7, NULL, 0, 0), 0);
	assert_int_equal(vt_post_write_imm(pr->a.qp, 1, pr->a.buf, 64, ql_mr_lkey(pr->a.mr),
					   (uintptr_t)pr->b.buf, ql_mr_rkey(pr->b.mr),
					   (uint32_t)imm, IBV_SEND_SIGNALED),
			 0);
	vt_expect_wc(pr->a.scq, &wc, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	vt_expect_wc(pr->b.rcq, &wc, 7, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	assert_true(wc.wc_flags & IBV_WC_WITH_IMM);
	assert_int_equal(wc.imm_data, imm);
	ql_sdr_imm_decode(wc.imm_data, &id, &pkt, &user);
	assert_int_equal(id, 1023);
	assert_int_equal(pkt, (1u << 18) - 1);
	assert_int_equal(user, 15);
}

static bool find(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(hay + i, needle, m) == 0)
			return true;
	return false;
}

/* On the soft+udp wire (the sender's pcap), the ImmDt of every packet
 * carries the immediate in network byte order: the big-endian bytes are
 * there, the byte-swapped ones are not. */
static void test_imm_on_the_wire(void **state)
{
	const struct vt_param *p = *state;
	char uri[QL_DEVICE_URI_MAX + 64], path[64];
	struct sp_pair pp = { 0 };
	struct ql_sdr_config cfg;
	struct ql_sdr_recv *rx;
	struct ql_sdr_send *tx;
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_NONE };
	struct ql_sdr_send_opts so = { .rel = QL_SDR_REL_NONE, .user = 0xb };
	void *src;
	struct ql_mr *mr;
	int rst, sst;
	uint8_t *file;
	FILE *f;
	long n;

	if (!p->udp) {
		print_message("[     SKIP ] %s: the pcap option is soft+udp's\n", p->uri);
		skip();
	}
	snprintf(path, sizeof(path), "/tmp/qlink-sdr-imm-%d.pcap", (int)getpid());
	vt_dev_uri(p, uri, QL_DEVICE_URI_MAX);
	strcat(uri, "?pcap=");
	strcat(uri, path);
	assert_int_equal(ql_device_open(uri, &pp.ds), 0);
	assert_int_equal(vt_dev_open(p, &pp.dr), 0);
	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = 3 * 1024;
	cfg.slots = 1024;
	cfg.mtu = 1024;
	assert_int_equal(ql_sdr_conn_create(pp.dr, &cfg, &pp.r), 0);
	assert_int_equal(ql_sdr_conn_create(pp.ds, &cfg, &pp.s), 0);
	assert_int_equal(sp_connect(pp.r, pp.s), 0);
	/* move ids 0..676 to the back of the free list: the receive gets 677
	 * (0x2a5), whose immediates are unlike any other bytes of the capture */
	for (uint32_t i = 0; i < 677; i++)
		assert_int_equal(ql_sdr_mem_alloc(ql_sdr_conn_mem(pp.r), i, 1, NULL), 0);
	for (uint32_t i = 0; i < 677; i++)
		assert_int_equal(ql_sdr_mem_free(ql_sdr_conn_mem(pp.r), i), 0);
	assert_int_equal(ql_sdr_buf_alloc(pp.s, 3 * 1024, &src, &mr), 0);
	assert_int_equal(ql_sdr_recv_post(pp.r, 3 * 1024, &ro, &rx), 0);
	assert_int_equal(ql_sdr_send_post(pp.s, src, 3 * 1024, mr, &so, &tx), 0);
	assert_int_equal(sp_run(&pp, rx, tx, 10000, &rst, &sst), 0);
	assert_int_equal(rst, 0);
	{
		uint32_t id = ql_sdr_recv_msg_id(rx);

		assert_int_equal(id, 677);
		ql_sdr_recv_release(rx);
		ql_sdr_send_release(tx);
		ql_sdr_buf_free(pp.s, src, mr);
		sp_pair_close(&pp); /* flushes the capture */
		f = fopen(path, "rb");
		assert_non_null(f);
		file = malloc(1 << 20);
		n = (long)fread(file, 1, 1 << 20, f);
		fclose(f);
		unlink(path);
		assert_true(n > 0);
		for (uint32_t k = 0; k < 3; k++) {
			uint32_t h = host(ql_sdr_imm_encode(id, k, 0xb));
			uint8_t be[4] = { (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8),
					  (uint8_t)h };
			uint8_t le[4] = { be[3], be[2], be[1], be[0] };

			assert_true(find(file, (size_t)n, be, 4));
			assert_false(find(file, (size_t)n, le, 4));
		}
		free(file);
	}
}

/* ---- the memory table ---------------------------------------------------- */

struct mem_env {
	struct ql_device *dev;
	struct ql_pd *pd;
};

static void mem_open(struct mem_env *e)
{
	assert_int_equal(ql_device_open("soft://loop", &e->dev), 0);
	assert_int_equal(ql_pd_alloc(e->dev, &e->pd), 0);
}

static void mem_close(struct mem_env *e)
{
	assert_int_equal(ql_pd_free(e->pd), 0);
	assert_int_equal(ql_device_close(e->dev), 0);
}

static void test_mem_table(void **state)
{
	struct mem_env e;
	struct ql_sdr_mem *m;
	struct ql_sdr_slot s;
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	(void)state;
	mem_open(&e);
	assert_int_equal(ql_sdr_mem_create(e.pd, 8192, 0, acc, &m), -EINVAL);
	assert_int_equal(ql_sdr_mem_create(e.pd, 8192, 1025, acc, &m), -EINVAL);
	assert_int_equal(ql_sdr_mem_create(e.pd, 0, 4, acc, &m), -EINVAL);
	assert_int_equal(ql_sdr_mem_create(e.pd, 8192, 4, acc, &m), 0);
	assert_int_equal(ql_sdr_mem_slots(m), 4);
	assert_int_equal(ql_sdr_mem_slot_stride(m), 8192);
	assert_true(ql_mr_length(ql_sdr_mem_root_mr(m)) >= 4 * 8192);
	/* a given id */
	assert_int_equal(ql_sdr_mem_alloc(m, 2, 100, &s), 0);
	assert_int_equal(s.msg_id, 2);
	assert_int_equal(s.offset, 2 * 8192);
	assert_ptr_equal(s.addr, (uint8_t *)ql_mr_addr(ql_sdr_mem_root_mr(m)) + 2 * 8192);
	assert_ptr_equal(s.local_mr, ql_sdr_mem_root_mr(m));
	assert_int_equal(s.length, 100);
	assert_int_equal(s.remote_addr, 0);
	assert_int_equal(ql_sdr_mem_alloc(m, 2, 100, &s), -EBUSY);
	assert_int_equal(ql_sdr_mem_alloc(m, 4, 100, &s), -ERANGE);
	assert_int_equal(ql_sdr_mem_alloc(m, 1, 8193, &s), -ERANGE);
	assert_int_equal(ql_sdr_mem_get(m, 1, &s), -ENOENT);
	assert_int_equal(ql_sdr_mem_update_remote(m, 1, 1, 2, 3), -ENOENT);
	assert_int_equal(ql_sdr_mem_update_remote(m, 2, 0x1000, 0x77, 8192), 0);
	assert_int_equal(ql_sdr_mem_get(m, 2, &s), 0);
	assert_int_equal(s.remote_addr, 0x1000);
	assert_int_equal(s.remote_rkey, 0x77);
	assert_int_equal(s.remote_length, 8192);
	/* any: the free ids in order 0, 1, 3 */
	assert_int_equal(ql_sdr_mem_alloc_any(m, 10, &s), 0);
	assert_int_equal(s.msg_id, 0);
	assert_int_equal(ql_sdr_mem_alloc_any(m, 10, &s), 0);
	assert_int_equal(s.msg_id, 1);
	assert_int_equal(ql_sdr_mem_alloc_any(m, 10, &s), 0);
	assert_int_equal(s.msg_id, 3);
	assert_int_equal(ql_sdr_mem_alloc_any(m, 10, &s), -ENOSPC);
	assert_int_equal(ql_sdr_mem_destroy(m), -EBUSY);
	/* least recently freed first: free 1 then 0, get 1 then 0 */
	assert_int_equal(ql_sdr_mem_free(m, 1), 0);
	assert_int_equal(ql_sdr_mem_free(m, 1), -ENOENT);
	assert_int_equal(ql_sdr_mem_free(m, 0), 0);
	assert_int_equal(ql_sdr_mem_alloc_any(m, 10, &s), 0);
	assert_int_equal(s.msg_id, 1);
	assert_int_equal(s.remote_addr, 0); /* a new allocation forgets the old remote */
	assert_int_equal(ql_sdr_mem_alloc_any(m, 10, &s), 0);
	assert_int_equal(s.msg_id, 0);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(ql_sdr_mem_free(m, i), 0);
	assert_int_equal(ql_sdr_mem_free(m, 9), -EINVAL);
	assert_int_equal(ql_sdr_mem_destroy(m), 0);
	mem_close(&e);
}

#define MT_THREADS 4
#define MT_ITERS 20000

struct mt_arg {
	struct ql_sdr_mem *m;
	_Atomic int *owner;
	int tid;
	int errors;
};

static void *mt_main(void *p)
{
	struct mt_arg *a = p;

	for (int i = 0; i < MT_ITERS; i++) {
		struct ql_sdr_slot s, g;
		int expect = 0;

		if (ql_sdr_mem_alloc_any(a->m, (uint64_t)(a->tid + 1), &s)) {
			continue; /* all taken by the others right now */
		}
		/* nobody else holds this id */
		if (!atomic_compare_exchange_strong(&a->owner[s.msg_id], &expect, a->tid + 1))
			a->errors++;
		if (ql_sdr_mem_update_remote(a->m, s.msg_id, (uint64_t)a->tid, (uint32_t)i, 1) ||
		    ql_sdr_mem_get(a->m, s.msg_id, &g) || g.remote_addr != (uint64_t)a->tid ||
		    g.remote_rkey != (uint32_t)i || g.length != (uint64_t)(a->tid + 1))
			a->errors++;
		atomic_store(&a->owner[s.msg_id], 0);
		if (ql_sdr_mem_free(a->m, s.msg_id))
			a->errors++;
	}
	return NULL;
}

static void test_mem_threads(void **state)
{
	struct mem_env e;
	struct ql_sdr_mem *m;
	pthread_t t[MT_THREADS];
	struct mt_arg a[MT_THREADS];
	_Atomic int owner[3] = { 0 };

	(void)state;
	mem_open(&e);
	/* fewer slots than threads: contention on every id */
	assert_int_equal(ql_sdr_mem_create(e.pd, 4096, 3, IBV_ACCESS_LOCAL_WRITE, &m), 0);
	for (int i = 0; i < MT_THREADS; i++) {
		a[i] = (struct mt_arg){ .m = m, .owner = owner, .tid = i };
		assert_int_equal(pthread_create(&t[i], NULL, mt_main, &a[i]), 0);
	}
	for (int i = 0; i < MT_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].errors, 0);
	}
	assert_int_equal(ql_sdr_mem_destroy(m), 0); /* everything came back */
	mem_close(&e);
}

/* ---- control messages ---------------------------------------------------- */

static void test_ctrl_layout(void **state)
{
	struct ql_sdr_ctrl m = { .type = QL_SDR_C_NACK,
				 .rel = 1,
				 .msg_id = 0x3ff,
				 .gen = 0x01020304,
				 .credit = 0x1122334455667788ull,
				 .a = 0xa0a1a2a3,
				 .b = 0xb0b1b2b3,
				 .plen = 3 },
			   u;
	uint8_t buf[QL_SDR_CTRL_MAX];
	const uint8_t hdr[QL_SDR_CTRL_HDR] = { 4,    1,	   0x03, 0xff, 1,    2,	   3,	 4,
					       0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
					       0xa0, 0xa1, 0xa2, 0xa3, 0xb0, 0xb1, 0xb2, 0xb3 };

	(void)state;
	memcpy(m.payload, "xyz", 3);
	assert_int_equal(ql_sdr__ctrl_pack(&m, buf), QL_SDR_CTRL_HDR + 3);
	assert_memory_equal(buf, hdr, sizeof(hdr));
	assert_memory_equal(buf + QL_SDR_CTRL_HDR, "xyz", 3);
	assert_int_equal(ql_sdr__ctrl_unpack(buf, QL_SDR_CTRL_HDR + 3, &u), 0);
	assert_int_equal(u.type, m.type);
	assert_int_equal(u.msg_id, m.msg_id);
	assert_int_equal(u.gen, m.gen);
	assert_int_equal(u.credit, m.credit);
	assert_int_equal(u.a, m.a);
	assert_int_equal(u.b, m.b);
	assert_int_equal(u.plen, 3);
	assert_int_equal(ql_sdr__ctrl_unpack(buf, QL_SDR_CTRL_HDR - 1, &u), -EBADMSG);
	assert_int_equal(ql_sdr__ctrl_unpack(buf, QL_SDR_CTRL_MAX + 1, &u), -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest plain[] = {
		cmocka_unit_test(test_imm_layout),
		cmocka_unit_test(test_mem_table),
		cmocka_unit_test(test_mem_threads),
		cmocka_unit_test(test_ctrl_layout),
	};
	const struct CMUnitTest per_uri[] = {
		cmocka_unit_test_setup_teardown(test_imm_completion, vt_setup_uc, vt_teardown),
		cmocka_unit_test(test_imm_on_the_wire),
	};
	int fails = cmocka_run_group_tests_name("sdr_core", plain, NULL, NULL);

	return fails + VT_RUN_PER_URI(per_uri);
}
