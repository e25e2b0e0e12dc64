/* SPDX-License-Identifier: MIT */
/*
 * The request ring and the channels: geometry, header bytes, wrap-around,
 * flow control, and the verbs channel talking to the reference client over
 * both soft wires.
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <qlink/channel.h>
#include <qlink/clock.h>
#include <qlink/ring.h>

static void test_geometry(void **state)
{
	(void)state;
	assert_int_equal(ql_ring_check_geometry(64, 256), 0);
	assert_int_equal(ql_ring_check_geometry(1, 64), 0);
	assert_int_equal(ql_ring_check_geometry(65536, 65536), 0);
	assert_int_equal(ql_ring_check_geometry(0, 256), -EINVAL);
	assert_int_equal(ql_ring_check_geometry(48, 256), -EINVAL);	/* not a power of two */
	assert_int_equal(ql_ring_check_geometry(131072, 256), -EINVAL); /* too many */
	assert_int_equal(ql_ring_check_geometry(64, 100), -EINVAL);	/* not a multiple of 64 */
	assert_int_equal(ql_ring_check_geometry(64, 0), -EINVAL);
	assert_int_equal(ql_ring_check_geometry(64, 131072), -EINVAL);
	assert_int_equal(ql_ring_bytes(64, 256), 64 + 64 * 256);
	assert_int_equal(ql_ring_slot_offset(64, 256, 70), 64 + 6 * 256);
}

static void test_format(void **state)
{
	uint8_t h[64];
	static const uint8_t want[16] = { 0x51, 0x52, 0x4e, 0x47, 1,	0,    64, 0,
					  0x40, 0,    0,    0,	  0x00, 0x01, 0,  0 };

	(void)state;
	memset(h, 0xee, sizeof(h));
	ql_ring_format(h, 64, 256);
	assert_memory_equal(h, want, sizeof(want));
	for (int i = 16; i < 64; i++)
		assert_int_equal(h[i], 0);
}

static void test_buffer(void **state)
{
	uint8_t mem[128];
	struct ql_buffer b = { .base = mem, .capacity = sizeof(mem) };

	(void)state;
	ql_buffer_reset(&b, 32);
	assert_int_equal(ql_buffer_headroom(&b), 32);
	assert_int_equal(ql_buffer_tailroom(&b), 96);
	assert_ptr_equal(ql_buffer_append(&b, 10), mem + 32);
	assert_ptr_equal(ql_buffer_prepend(&b, 8), mem + 24);
	assert_int_equal(b.len, 18);
	assert_null(ql_buffer_prepend(&b, 25));
	assert_null(ql_buffer_append(&b, 87));
	assert_non_null(ql_buffer_append(&b, 86));
	assert_int_equal(ql_buffer_tailroom(&b), 0);
}

static void test_pool(void **state)
{
	uint8_t mem[4 * (64 + QL_POOL_SLACK)];
	struct ql_pool *p;
	struct ql_buffer *b[5];

	(void)state;
	assert_int_equal(ql_pool_region_size(4, 64), sizeof(mem));
	assert_int_equal(ql_pool_create(mem, sizeof(mem), 5, 64, 0, &p), -EINVAL); /* too small */
	assert_int_equal(ql_pool_create(mem, sizeof(mem) - 1, 4, 64, 0, &p),
			 -EINVAL); /* no slack */
	assert_int_equal(ql_pool_create(mem, sizeof(mem), 4, 64, 8, &p), 0);
	for (int i = 0; i < 4; i++) {
		b[i] = ql_pool_get(p);
		assert_non_null(b[i]);
		assert_int_equal(ql_buffer_headroom(b[i]), 8);
		assert_int_equal(ql_buffer_headroom(b[i]) + ql_buffer_tailroom(b[i]), 64);
		for (int j = 0; j < i; j++) /* a buffer and its slack overlap no other */
			assert_true(b[i]->base >= b[j]->base + 64 + QL_POOL_SLACK ||
				    b[j]->base >= b[i]->base + 64 + QL_POOL_SLACK);
	}
	assert_null(ql_pool_get(p));
	assert_int_equal(ql_pool_available(p), 0);
	ql_pool_put(p, b[2]);
	assert_ptr_equal(ql_pool_get(p), b[2]);
	ql_pool_destroy(p);
}

/* Loopback channel: the server side sees exactly what the client wrote,
 * in order, over many laps, and the client cannot run ahead. */
static void test_loop_channel_wrap_and_flow(void **state)
{
	struct ql_channel *ch;
	struct ql_buffer *rx[8], *tx;
	uint8_t msg[64], out[256];
	uint64_t served = 0;

	(void)state;
	assert_int_equal(ql_loop_channel_create(8, 128, &ch), 0);
	assert_int_equal(ql_channel_receive_burst(ch, rx, 8), 0);
	for (uint64_t n = 0; n < 8 * 50; n++) {
		int got;

		memset(msg, (int)(n & 0xff), sizeof(msg));
		memcpy(msg, &n, sizeof(n));
		if (n >= served + 8) {
			/* window full: the client must wait */
			assert_int_equal(ql_loop_channel_push(ch, msg, 40, 40), -EAGAIN);
			got = ql_channel_receive_burst(ch, rx, 8);
			assert_int_equal(got, 8);
			for (int i = 0; i < got; i++) {
				uint64_t k;

				assert_int_equal(rx[i]->len, 40);
				memcpy(&k, ql_buffer_data(rx[i]), 8);
				assert_int_equal(k, served + (uint64_t)i);
				tx = ql_channel_acquire_buffer(ch);
				assert_non_null(tx);
				memcpy(ql_buffer_append(tx, 8), &k, 8);
				ql_channel_release_buffer(ch, rx[i]);
				assert_int_equal(ql_channel_send_burst(ch, &tx, 1), 1);
			}
			for (int i = 0; i < got; i++) {
				uint64_t k;

				assert_int_equal(ql_loop_channel_pop(ch, out, sizeof(out)), 8);
				memcpy(&k, out, 8);
				assert_int_equal(k, served + (uint64_t)i);
			}
			served += (uint64_t)got;
		}
		assert_int_equal(ql_loop_channel_push(ch, msg, 40, 40), 0);
	}
	assert_int_equal(ql_loop_channel_pop(ch, out, sizeof(out)), -EAGAIN);
	/* too big for a slot (128 - 16 = 112 bytes of message) */
	assert_int_equal(ql_loop_channel_push(ch, out, 113, 113), -EMSGSIZE);
	ql_channel_destroy(ch);
}

/* A length field beyond the slot is clamped to what the slot holds. */
static void test_loop_channel_len_clamped(void **state)
{
	struct ql_channel *ch;
	struct ql_buffer *rx[1];
	uint8_t msg[8] = { 0 };

	(void)state;
	assert_int_equal(ql_loop_channel_create(4, 64, &ch), 0);
	assert_int_equal(ql_loop_channel_push(ch, msg, 0xffffffffu, 8), 0);
	assert_int_equal(ql_channel_receive_burst(ch, rx, 1), 1);
	assert_int_equal(rx[0]->len, 64 - 16);
	ql_channel_destroy(ch);
}

/* The verbs channel and the reference client over a soft wire: requests
 * arrive intact through wrap-around, responses come back in order, the
 * window is enforced. */
static void run_verbs_channel(const char *uri)
{
	struct ql_verbs_channel_config cfg = { .num_slots = 16, .slot_size = 128 };
	struct ql_device *sdev, *cdev;
	struct ql_channel *ch;
	struct ql_ring_client *cl;
	struct ql_conn_params sp, cp;
	struct ql_buffer *rx[16];
	struct ql_ring_response r[16];
	uint8_t msg[112];
	uint64_t sent = 0, served = 0, answered = 0;
	uint64_t deadline = ql_clock_ns() + 10ull * 1000000000ull;

	assert_int_equal(ql_device_open(uri, &sdev), 0);
	assert_int_equal(ql_device_open(uri, &cdev), 0);
	assert_int_equal(ql_verbs_channel_create(sdev, &cfg, &ch), 0);
	assert_int_equal(ql_verbs_channel_local_params(ch, &sp), 0);
	assert_int_equal(sp.num_slots, 16);
	assert_int_equal(sp.slot_size, 128);
	assert_int_equal(sp.length, ql_ring_bytes(16, 128));
	assert_int_equal(ql_ring_client_create(cdev, &sp, NULL, &cl), 0);
	assert_int_equal(ql_ring_client_max_msg(cl), 112);
	assert_int_equal(ql_ring_client_local_params(cl, &cp), 0);
	assert_int_equal(ql_verbs_channel_connect(ch, &cp, NULL), 0);
	assert_int_equal(ql_ring_client_connect(cl, &sp, NULL), 0);
	assert_int_equal(ql_ring_client_send(cl, msg, 113), -EMSGSIZE);

	while (answered < 16 * 40) {
		int n;

		assert_true(ql_clock_ns() < deadline);
		/* client: send as long as the window allows */
		for (;;) {
			uint32_t len = 8 + (uint32_t)(sent % 97);
			int ret;

			memset(msg, (int)(sent & 0xff), len);
			memcpy(msg, &sent, 8);
			ret = ql_ring_client_send(cl, msg, len);
			if (ret == -EAGAIN) {
				assert_int_equal(ql_ring_client_in_flight(cl), 16);
				break;
			}
			assert_int_equal(ret, 0);
			sent++;
		}
		/* server: echo the first 8 bytes and the length */
		n = ql_channel_receive_burst(ch, rx, 16);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++) {
			struct ql_buffer *tx = ql_channel_acquire_buffer(ch);
			uint64_t k;
			uint32_t len = 8 + (uint32_t)(served % 97);

			assert_non_null(tx);
			assert_int_equal(rx[i]->len, len);
			memcpy(&k, ql_buffer_data(rx[i]), 8);
			assert_int_equal(k, served);
			for (uint32_t j = 8; j < len; j++)
				assert_int_equal(ql_buffer_data(rx[i])[j], served & 0xff);
			memcpy(ql_buffer_append(tx, 8), &k, 8);
			memcpy(ql_buffer_append(tx, 4), &len, 4);
			ql_channel_release_buffer(ch, rx[i]);
			assert_int_equal(ql_channel_send_burst(ch, &tx, 1), 1);
			served++;
		}
		/* client: take responses in order */
		n = ql_ring_client_poll(cl, r, 16);
		assert_true(n >= 0);
		for (int i = 0; i < n; i++) {
			uint64_t k;

			assert_int_equal(r[i].len, 12);
			memcpy(&k, r[i].msg, 8);
			assert_int_equal(k, answered);
			answered++;
			assert_int_equal(ql_ring_client_release(cl, &r[i]), 0);
		}
	}
	assert_int_equal(ql_channel_poll_errors(ch), 0);
	ql_ring_client_destroy(cl);
	ql_channel_destroy(ch);
	assert_int_equal(ql_device_close(cdev), 0);
	assert_int_equal(ql_device_close(sdev), 0);
}

static void test_verbs_channel_loop(void **state)
{
	(void)state;
	run_verbs_channel("soft://loop");
}

static void test_verbs_channel_shm(void **state)
{
	char uri[64];

	(void)state;
	snprintf(uri, sizeof(uri), "soft+shm://ring%d", (int)getpid());
	run_verbs_channel(uri);
}

static void test_client_rejects_bad_params(void **state)
{
	struct ql_device *dev;
	struct ql_ring_client *cl;
	struct ql_conn_params p = { .num_slots = 16, .slot_size = 100, .length = 1 << 20 };

	(void)state;
	assert_int_equal(ql_device_open("soft://loop", &dev), 0);
	assert_int_equal(ql_ring_client_create(dev, &p, NULL, &cl), -EINVAL);
	p.slot_size = 128;
	p.length = 64; /* smaller than the ring it claims */
	assert_int_equal(ql_ring_client_create(dev, &p, NULL, &cl), -EINVAL);
	assert_int_equal(ql_device_close(dev), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_buffer),
		cmocka_unit_test(test_pool),
		cmocka_unit_test(test_loop_channel_wrap_and_flow),
		cmocka_unit_test(test_loop_channel_len_clamped),
		cmocka_unit_test(test_verbs_channel_loop),
		cmocka_unit_test(test_verbs_channel_shm),
		cmocka_unit_test(test_client_rejects_bad_params),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
