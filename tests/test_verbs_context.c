/* SPDX-License-Identifier: MIT */
/*
 * The shared verbs context: N verbs channels of one device in one PD with
 * one response-buffer MR, served by one dispatcher, each answering only its
 * own client; and their rings still isolated: a client's rkey reaches its
 * own ring and nothing beside it (a WRITE past its end or into the next
 * ring is a remote access error, the other rings unchanged and still
 * serving). Also the limits: blocks all taken, a pool larger than a block,
 * a context of another device, destroying a context still in use.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <qlink/channel.h>
#include <qlink/clock.h>
#include <qlink/daemon.h>
#include <qlink/dispatcher.h>
#include <qlink/ring.h>
#include <qlink/rpc.h>

#include "echo_daemon.h"

#define N 4
#define SLOTS 16
#define SLOT_SIZE 128

struct fixture {
	struct ql_device *sdev, *cdev;
	struct ql_verbs_context *ctx;
	struct ql_channel *ch[N];
	struct ql_daemon *d[N];
	struct ql_ring_client *cl[N];
	struct ql_conn_params sp[N];
	struct ql_dispatcher *disp;
};

static int setup(void **state)
{
	struct ql_verbs_context_config xc = {
		.max_channels = N, .tx_bytes = (uint32_t)ql_pool_region_size(SLOTS, SLOT_SIZE)
	};
	struct ql_dispatcher_config pc = { .cpu = -1 };
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || ql_device_open("soft://loop", &f->sdev) ||
	    ql_device_open("soft://loop", &f->cdev) ||
	    ql_verbs_context_create(f->sdev, &xc, &f->ctx) || ql_dispatcher_create(&pc, &f->disp))
		return -1;
	for (int i = 0; i < N; i++) {
		struct ql_verbs_channel_config vc = { .num_slots = SLOTS,
						      .slot_size = SLOT_SIZE,
						      .ctx = f->ctx };

		if (ql_verbs_channel_create(f->sdev, &vc, &f->ch[i]) ||
		    ql_verbs_channel_local_params(f->ch[i], &f->sp[i]) ||
		    ql_test_echo_daemon(f->ch[i], &f->d[i]))
			return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ql_dispatcher_destroy(f->disp);
	for (int i = 0; i < N; i++)
		ql_ring_client_destroy(f->cl[i]);
	ql_test_echo_daemons_destroy(f->d, f->ch, N);
	assert_int_equal(ql_verbs_context_destroy(f->ctx), 0);
	ql_device_close(f->cdev);
	ql_device_close(f->sdev);
	free(f);
	return 0;
}

static void connect_client(struct fixture *f, int i)
{
	struct ql_conn_params cp;

	assert_int_equal(ql_ring_client_create(f->cdev, &f->sp[i], NULL, &f->cl[i]), 0);
	assert_int_equal(ql_ring_client_local_params(f->cl[i], &cp), 0);
	assert_int_equal(ql_verbs_channel_connect(f->ch[i], &cp, NULL), 0);
	assert_int_equal(ql_ring_client_connect(f->cl[i], &f->sp[i], NULL), 0);
}

/* One echo call of client i carrying (i, n), answered by its own daemon. */
static void call(struct fixture *f, int i, uint32_t n)
{
	uint8_t msg[64];
	struct ql_rpc_header h = {
		.magic = QL_RPC_MAGIC_REQUEST,
		.function_id = ql_rpc_fnv1a("echo"),
		.arg_len = 8,
		.request_id = n,
	};
	struct ql_ring_response r;
	uint32_t who = (uint32_t)i, got;
	uint64_t t0 = ql_clock_ns();
	int k;

	ql_rpc_header_encode(msg, &h);
	memcpy(msg + QL_RPC_HEADER_SIZE, &who, 4);
	memcpy(msg + QL_RPC_HEADER_SIZE + 4, &n, 4);
	assert_int_equal(ql_ring_client_send(f->cl[i], msg, QL_RPC_HEADER_SIZE + 8), 0);
	while ((k = ql_ring_client_poll(f->cl[i], &r, 1)) == 0) {
		ql_dispatcher_poll(f->disp);
		if (ql_clock_ns() - t0 > 5000000000ull)
			fail_msg("client %d: no response in 5 s", i);
	}
	assert_int_equal(k, 1);
	assert_int_equal(r.len, QL_RPC_RESPONSE_SIZE + 8);
	memcpy(&got, r.msg + QL_RPC_RESPONSE_SIZE, 4);
	assert_int_equal(got, (uint32_t)i);
	memcpy(&got, r.msg + QL_RPC_RESPONSE_SIZE + 4, 4);
	assert_int_equal(got, n);
	assert_int_equal(ql_ring_client_release(f->cl[i], &r), 0);
}

static bool overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	return x < y + blen && y < x + alen;
}

/* One PD, one response MR for all; rings apart, each with its own rkey;
 * each client served by its own daemon. */
static void test_shared(void **state)
{
	struct fixture *f = *state;
	struct ql_verbs_channel_info in[N];
	struct ql_daemon_stats st;

	assert_int_equal(ql_verbs_context_channels(f->ctx), N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(ql_verbs_channel_info(f->ch[i], &in[i]), 0);
		assert_ptr_equal(in[i].pd, ql_verbs_context_pd(f->ctx));
		assert_ptr_equal(in[i].ctx, f->ctx);
		assert_int_equal(in[i].tx_lkey, in[0].tx_lkey);
		assert_int_equal(in[i].ring_rkey, f->sp[i].rkey);
		for (int j = 0; j < i; j++) {
			assert_int_not_equal(in[i].ring_rkey, in[j].ring_rkey);
			assert_false(
				overlap(in[i].ring, in[i].ring_len, in[j].ring, in[j].ring_len));
			assert_false(
				overlap(in[i].tx_mem, in[i].tx_len, in[j].tx_mem, in[j].tx_len));
		}
	}
	for (int i = 0; i < N; i++) {
		connect_client(f, i);
		assert_int_equal(ql_dispatcher_attach(f->disp, f->d[i]), 0);
	}
	for (uint32_t n = 0; n < 100; n++)
		for (int i = 0; i < N; i++)
			if (n % (uint32_t)(i + 1) == 0)
				call(f, i, n);
	for (int i = 0; i < N; i++) {
		ql_daemon_stats(f->d[i], &st);
		assert_int_equal(st.ok, (100 + i) / (i + 1));
		assert_int_equal(st.requests, st.ok);
	}
	/* the context outlives none of its channels */
	assert_int_equal(ql_verbs_context_destroy(f->ctx), -EBUSY);
}

/* A rogue client on channel 0, with channel 0's rkey, writes past its ring
 * and into the ring next to it: both are remote access errors, the other
 * rings keep their bytes and keep serving. */
static void test_rings_isolated(void **state)
{
	struct fixture *f = *state;
	struct ql_verbs_channel_info in0, in1;
	struct ql_qp_init_attr ia = { 0 };
	struct ql_conn_params rp;
	struct ql_pd *pd;
	struct ql_mr *mr;
	struct ql_cq *cq;
	struct ql_qp *qp;
	uint8_t *src, *before;
	uint64_t targets[2];

	for (int i = 1; i < N; i++)
		connect_client(f, i);
	for (int i = 0; i < N; i++)
		assert_int_equal(ql_dispatcher_attach(f->disp, f->d[i]), 0);
	assert_int_equal(ql_verbs_channel_info(f->ch[0], &in0), 0);
	assert_int_equal(ql_verbs_channel_info(f->ch[1], &in1), 0);
	before = malloc(in1.ring_len);
	assert_non_null(before);
	memcpy(before, in1.ring, in1.ring_len);

	src = ql_mem_alloc(4096);
	assert_non_null(src);
	memset(src, 0xa5, 4096);
	assert_int_equal(ql_pd_alloc(f->cdev, &pd), 0);
	assert_int_equal(ql_mr_reg(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE, &mr), 0);
	assert_int_equal(ql_cq_create(f->cdev, 16, &cq), 0);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	targets[0] = (uint64_t)(uintptr_t)in0.ring + in0.ring_len; /* just past its ring */
	targets[1] = (uint64_t)(uintptr_t)in1.ring;		   /* the next ring */
	for (int t = 0; t < 2; t++) {
		struct ibv_sge sge = { .addr = (uintptr_t)src,
				       .length = 64,
				       .lkey = ql_mr_lkey(mr) };
		struct ibv_send_wr wr = {
			.wr_id = 1,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = targets[t], .rkey = in0.ring_rkey },
		};
		struct ibv_send_wr *bad;
		struct ibv_wc wc;
		uint64_t t0 = ql_clock_ns();
		int n;

		/* a fresh QP each time: the first violation takes it to ERR */
		assert_int_equal(ql_qp_create(pd, &ia, &qp), 0);
		assert_int_equal(ql_qp_local_params(qp, &rp), 0);
		assert_int_equal(ql_verbs_channel_connect(f->ch[0], &rp, NULL), 0);
		assert_int_equal(ql_qp_connect(qp, &f->sp[0], NULL), 0);
		assert_int_equal(ql_qp_post_send(qp, &wr, &bad), 0);
		while ((n = ql_cq_poll(cq, 1, &wc)) == 0) {
			ql_dispatcher_poll(f->disp);
			if (ql_clock_ns() - t0 > 5000000000ull)
				fail_msg("no completion for the rogue WRITE");
		}
		assert_int_equal(n, 1);
		assert_int_equal(wc.status, IBV_WC_REM_ACCESS_ERR);
		assert_int_equal(ql_qp_destroy(qp), 0);
		/* flush whatever else the error left */
		while (ql_cq_poll(cq, 1, &wc) > 0)
			;
	}
	assert_memory_equal(before, in1.ring, in1.ring_len);
	for (uint32_t n = 0; n < 20; n++)
		for (int i = 1; i < N; i++)
			call(f, i, n);
	assert_int_equal(ql_cq_destroy(cq), 0);
	assert_int_equal(ql_mr_dereg(mr), 0);
	assert_int_equal(ql_pd_free(pd), 0);
	ql_mem_free(src);
	free(before);
}

static void test_limits(void **state)
{
	struct fixture *f = *state;
	struct ql_verbs_channel_config vc = { .num_slots = SLOTS,
					      .slot_size = SLOT_SIZE,
					      .ctx = f->ctx };
	struct ql_verbs_context_config xc = { .max_channels = 100000 };
	struct ql_verbs_context *x;
	struct ql_device *other;
	struct ql_channel *ch;

	/* every block taken */
	assert_int_equal(ql_verbs_channel_create(f->sdev, &vc, &ch), -ENOSPC);
	/* free one: it can be taken again */
	ql_channel_destroy(f->ch[3]);
	ql_daemon_destroy(f->d[3]);
	f->d[3] = NULL;
	f->ch[3] = NULL;
	assert_int_equal(ql_verbs_context_channels(f->ctx), N - 1);
	/* a pool larger than a block */
	vc.num_slots = 2 * SLOTS;
	assert_int_equal(ql_verbs_channel_create(f->sdev, &vc, &ch), -EMSGSIZE);
	vc.num_slots = SLOTS;
	assert_int_equal(ql_verbs_channel_create(f->sdev, &vc, &f->ch[3]), 0);
	/* another device's context */
	assert_int_equal(ql_device_open("soft://loop", &other), 0);
	assert_int_equal(ql_verbs_channel_create(other, &vc, &ch), -EINVAL);
	ql_device_close(other);
	assert_int_equal(ql_verbs_context_create(f->sdev, &xc, &x), -EINVAL);
	assert_int_equal(ql_verbs_context_create(NULL, NULL, &x), -EINVAL);
	/* a context with no channels goes */
	assert_int_equal(ql_verbs_context_create(f->sdev, NULL, &x), 0);
	assert_int_equal(ql_verbs_context_channels(x), 0);
	assert_int_equal(ql_verbs_context_destroy(x), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rings_isolated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
