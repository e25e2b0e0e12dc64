// SPDX-License-Identifier: MIT
/*
 * test_roce_fault: fault injection in the soft+udp transmit path
 * (src/providers/sudp/fault.c): the URI options and their errors, each kind at its
 * rate (statistically), seeds reproducible, drop_nth and drop_once exact,
 * what each kind does to the packet stream (a duplicate follows its
 * original, a reordered packet goes out after the next one, a delayed one
 * after delay_us, a corrupted one differs in one bit and fails the ICRC),
 * a full queue, and no allocation, lock or system call per packet.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <qlink/error.h>

#include "hotpath.h"
#include "providers/sudp/fault.h"
#include "providers/sudp/roce.h"

static struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = 0xb712 };

static int tx(struct roce_fault *f, uint64_t now, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	return ql__roce_fault_tx(f, now, &iov, 1, &peer, sizeof(peer));
}

static void setup_fault(struct roce_fault *f, const char *q)
{
	struct roce_fault_cfg cfg;
	assert_int_equal(ql__roce_fault_parse(q, false, &cfg), 0);
	assert_int_equal(ql__roce_fault_init(f, &cfg), 0);
}

static void test_parse(void **state)
{
	(void)state;
	struct roce_fault_cfg c;
	assert_int_equal(ql__roce_fault_parse("", false, &c), 0);
	assert_false(ql__roce_fault_cfg_on(&c));
	assert_int_equal(c.delay_us, 200);
	assert_int_equal(c.queue_slots, 64);
	assert_int_equal(ql__roce_fault_parse(NULL, false, &c), 0);
	assert_int_equal(
		ql__roce_fault_parse("drop=0.01&dup=0.02&reorder=0.03&delay=0.04&corrupt=0.05&"
				     "delay_us=300&seed=7&drop_nth=5&drop_once=9&reorder_max_us=50&"
				     "fault_slots=8",
				     false, &c),
		0);
	assert_true(ql__roce_fault_cfg_on(&c));
	assert_true(c.rate[ROCE_FAULT_DROP] == 0.01 && c.rate[ROCE_FAULT_DUP] == 0.02 &&
		    c.rate[ROCE_FAULT_REORDER] == 0.03 && c.rate[ROCE_FAULT_DELAY] == 0.04 &&
		    c.rate[ROCE_FAULT_CORRUPT] == 0.05);
	assert_int_equal(c.delay_us, 300);
	assert_int_equal(c.seed, 7);
	assert_int_equal(c.drop_nth, 5);
	assert_int_equal(c.drop_once, 9);
	assert_int_equal(c.reorder_max_us, 50);
	assert_int_equal(c.queue_slots, 8);
	/* the soft provider's name */
	assert_int_equal(ql__roce_fault_parse("loss=0.5", false, &c), 0);
	assert_true(c.rate[ROCE_FAULT_DROP] == 0.5);
	assert_int_equal(ql__roce_fault_parse("drop_nth=3", false, &c), 0);
	assert_true(ql__roce_fault_cfg_on(&c));
	/* the provider's own options pass when unknown_ok */
	assert_int_equal(ql__roce_fault_parse("pcap=/tmp/x.pcap&drop=0.1&flag", true, &c), 0);
	assert_true(c.rate[ROCE_FAULT_DROP] == 0.1);

	const char *bad[] = { "drop=1.5",
			      "drop=-0.1",
			      "drop=abc",
			      "drop=",
			      "dup=0.5x",
			      "drop_nth=0",
			      "drop_nth=-1",
			      "drop_once=0",
			      "seed=x",
			      "delay_us=1e3",
			      "delay_us=99999999999",
			      "pcap=/tmp/x",
			      "flag",
			      "drop=0.6&dup=0.6",
			      "fault_slots=0",
			      "reorder_max_us=0",
			      "drop=nan" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ql_error_clear();
		assert_int_equal(ql__roce_fault_parse(bad[i], false, &c), -EINVAL);
		assert_true(strlen(ql_error_detail()) > 0);
	}
	ql__roce_fault_parse("drop=0.6&dup=0.6", false, &c);
	assert_non_null(strstr(ql_error_detail(), "must not exceed 1"));
	ql__roce_fault_parse("bogus=1", false, &c);
	assert_non_null(strstr(ql_error_detail(), "bogus"));
	assert_string_equal(ql__roce_fault_kind_name(ROCE_FAULT_CORRUPT), "corrupt");
}

/* each kind alone at 10 %, and all five at 5 % at once: counts within 5
 * standard deviations of n*p */
static void test_rates(void **state)
{
	(void)state;
	const int n = 100000;
	uint8_t pkt[64] = { 0 };
	for (int k = -1; k < ROCE_FAULT_NKINDS; k++) {
		char q[128];
		double p;
		if (k < 0) {
			snprintf(q, sizeof(q),
				 "drop=0.05&dup=0.05&reorder=0.05&delay=0.05&corrupt=0.05&seed=3");
			p = 0.05;
		} else {
			snprintf(q, sizeof(q), "%s=0.1&seed=%d",
				 ql__roce_fault_kind_name((enum roce_fault_kind)k), k + 11);
			p = 0.1;
		}
		struct roce_fault f;
		setup_fault(&f, q);
		uint64_t now = 0;
		for (int i = 0; i < n; i++) {
			tx(&f, now, pkt, sizeof(pkt));
			now += 1000000000; /* every delay is over by the next packet */
			while (ql__roce_fault_next(&f, now))
				ql__roce_fault_pop(&f);
		}
		double sd = 5 * sqrt(n * p * (1 - p));
		for (int j = 0; j < ROCE_FAULT_NKINDS; j++) {
			double want = (k < 0 || j == k) ? n * p : 0;
			double got = (double)f.count[j];
			if (got < want - sd || got > want + sd)
				fail_msg("%s: %s counted %.0f, expected %.0f +- %.0f", q,
					 ql__roce_fault_kind_name((enum roce_fault_kind)j), got,
					 want, sd);
		}
		assert_int_equal(f.queue_full, 0);
		assert_int_equal(f.used, 0);
		ql__roce_fault_fini(&f);
	}
}

/* the same seed gives the same fate to every packet; another seed does not */
static void test_seeds(void **state)
{
	(void)state;
	uint8_t pkt[32] = { 1, 2, 3 };
	int fate[3][2000];
	const char *q[3] = { "drop=0.2&dup=0.2&delay=0.2&seed=42",
			     "drop=0.2&dup=0.2&delay=0.2&seed=42",
			     "drop=0.2&dup=0.2&delay=0.2&seed=43" };
	for (int r = 0; r < 3; r++) {
		struct roce_fault f;
		setup_fault(&f, q[r]);
		for (int i = 0; i < 2000; i++) {
			uint64_t before = f.count[ROCE_FAULT_DUP];
			fate[r][i] = tx(&f, (uint64_t)i * 1000000000ull, pkt, sizeof(pkt)) * 2 +
				     (f.count[ROCE_FAULT_DUP] != before);
			while (ql__roce_fault_next(&f, (uint64_t)i * 1000000000ull + 500000000))
				ql__roce_fault_pop(&f);
		}
		ql__roce_fault_fini(&f);
	}
	assert_memory_equal(fate[0], fate[1], sizeof(fate[0]));
	assert_memory_not_equal(fate[0], fate[2], sizeof(fate[0]));
}

static void test_drop_nth_once(void **state)
{
	(void)state;
	uint8_t pkt[16] = { 0 };
	struct roce_fault f;
	setup_fault(&f, "drop_nth=5");
	for (int i = 1; i <= 100; i++)
		assert_int_equal(tx(&f, 0, pkt, sizeof(pkt)),
				 i % 5 == 0 ? ROCE_FAULT_CONSUMED : ROCE_FAULT_SEND);
	assert_int_equal(f.count[ROCE_FAULT_DROP], 20);
	ql__roce_fault_fini(&f);
	setup_fault(&f, "drop_once=7");
	for (int i = 1; i <= 100; i++)
		assert_int_equal(tx(&f, 0, pkt, sizeof(pkt)),
				 i == 7 ? ROCE_FAULT_CONSUMED : ROCE_FAULT_SEND);
	assert_int_equal(f.count[ROCE_FAULT_DROP], 1);
	ql__roce_fault_fini(&f);
}

/* the stream the NIC puts on the wire, as packet ids */
static int wire[64], nwire;
static void nic_send(struct roce_fault *f, uint64_t now, uint8_t id)
{
	uint8_t pkt[8] = { id, 0, 0, 0, 0, 0, 0, id };
	if (tx(f, now, pkt, sizeof(pkt)) == ROCE_FAULT_SEND)
		wire[nwire++] = id;
	const struct roce_fault_pkt *q;
	while ((q = ql__roce_fault_next(f, now))) {
		assert_int_equal(q->len, 8);
		assert_int_equal(q->peerlen, sizeof(peer));
		assert_memory_equal(&q->peer, &peer, sizeof(peer));
		wire[nwire++] = q->data[0];
		ql__roce_fault_pop(f);
	}
}

static void test_dup_reorder_delay(void **state)
{
	(void)state;
	struct roce_fault f;
	setup_fault(&f, "dup=1");
	nwire = 0;
	nic_send(&f, 0, 1);
	nic_send(&f, 0, 2);
	assert_int_equal(nwire, 4);
	assert_true(wire[0] == 1 && wire[1] == 1 && wire[2] == 2 && wire[3] == 2);
	ql__roce_fault_fini(&f);

	/* every packet held until the next one went: 1 waits for 2, which waits for 3 ... */
	setup_fault(&f, "reorder=1&reorder_max_us=100");
	nwire = 0;
	nic_send(&f, 0, 1);
	assert_int_equal(nwire, 0);
	assert_int_equal(ql__roce_fault_next_due(&f), 100000);
	nic_send(&f, 10, 2);
	assert_int_equal(nwire, 1);
	assert_int_equal(wire[0], 1);
	/* the last one goes out after reorder_max_us even if nothing follows */
	assert_null(ql__roce_fault_next(&f, 100009));
	assert_non_null(ql__roce_fault_next(&f, 100010));
	ql__roce_fault_pop(&f);
	assert_int_equal(f.count[ROCE_FAULT_REORDER], 2);
	ql__roce_fault_fini(&f);

	/* reorder at 50 %: every packet arrives exactly once */
	setup_fault(&f, "reorder=0.5&seed=5");
	nwire = 0;
	for (uint8_t id = 1; id <= 40; id++)
		nic_send(&f, id, id);
	while (ql__roce_fault_next(&f, UINT64_MAX - 1)) {
		wire[nwire++] = f.slots[f.cur].data[0];
		ql__roce_fault_pop(&f);
	}
	assert_int_equal(nwire, 40);
	int seen[41] = { 0 }, swapped = 0;
	for (int i = 0; i < 40; i++) {
		seen[wire[i]]++;
		if (i && wire[i] < wire[i - 1])
			swapped++;
	}
	for (int id = 1; id <= 40; id++)
		assert_int_equal(seen[id], 1);
	assert_true(swapped > 0);
	ql__roce_fault_fini(&f);

	setup_fault(&f, "delay=1&delay_us=200");
	nwire = 0;
	nic_send(&f, 1000, 1);
	assert_int_equal(nwire, 0);
	assert_int_equal(ql__roce_fault_next_due(&f), 201000);
	assert_null(ql__roce_fault_next(&f, 200999));
	assert_non_null(ql__roce_fault_next(&f, 201000));
	ql__roce_fault_pop(&f);
	assert_int_equal(ql__roce_fault_next_due(&f), UINT64_MAX);
	ql__roce_fault_fini(&f);
}

/* a corrupted copy differs from the packet in one bit, never in BTH byte 4,
 * and fails the ICRC check; the caller's buffer is untouched */
static void test_corrupt(void **state)
{
	(void)state;
	struct roce_fault f;
	setup_fault(&f, "corrupt=1&seed=9");
	struct roce_addr a = { .family = AF_INET,
			       .src = { 127, 0, 0, 1 },
			       .dst = { 127, 0, 0, 1 },
			       .sport = 0xc000,
			       .dport = ROCE_UDP_PORT };
	uint8_t payload[100], buf[200], orig[200];
	for (int i = 0; i < 100; i++)
		payload[i] = (uint8_t)i;
	int hits[200] = { 0 };
	for (int i = 0; i < 2000; i++) {
		struct roce_pkt p = { .bth = { .opcode = ROCE_RC(ROCE_OP_SEND_ONLY),
					       .psn = (uint32_t)i },
				      .payload = payload,
				      .payload_len = (uint32_t)(i % 100) };
		int n = ql__roce_build(buf, sizeof(buf), &p, &a);
		assert_true(n > 0);
		memcpy(orig, buf, (size_t)n);
		assert_int_equal(tx(&f, 0, buf, (size_t)n), ROCE_FAULT_CONSUMED);
		assert_memory_equal(buf, orig, (size_t)n);
		const struct roce_fault_pkt *q = ql__roce_fault_next(&f, 0);
		assert_non_null(q);
		assert_int_equal(q->len, n);
		int bits = 0, where = -1;
		for (int k = 0; k < n; k++)
			if (q->data[k] != buf[k]) {
				bits += __builtin_popcount(q->data[k] ^ buf[k]);
				where = k;
			}
		assert_int_equal(bits, 1);
		assert_int_not_equal(where, 4);
		hits[where]++;
		assert_int_equal(ql__roce_icrc_check(q->data, q->len, &a), -EBADMSG);
		ql__roce_fault_pop(&f);
	}
	/* first bytes, the ICRC and the payload are all hit */
	assert_true(hits[0] && hits[5] && hits[20]);
	assert_int_equal(f.count[ROCE_FAULT_CORRUPT], 2000);
	ql__roce_fault_fini(&f);
}

static void test_queue_full(void **state)
{
	(void)state;
	struct roce_fault f;
	setup_fault(&f, "delay=1&fault_slots=2");
	uint8_t pkt[16] = { 0 };
	assert_int_equal(tx(&f, 0, pkt, sizeof(pkt)), ROCE_FAULT_CONSUMED);
	assert_int_equal(tx(&f, 0, pkt, sizeof(pkt)), ROCE_FAULT_CONSUMED);
	assert_int_equal(tx(&f, 0, pkt, sizeof(pkt)), ROCE_FAULT_SEND); /* not applied */
	assert_int_equal(f.queue_full, 1);
	assert_int_equal(f.count[ROCE_FAULT_DELAY], 2);
	ql__roce_fault_fini(&f);
	/* a packet larger than a slot is sent as is */
	struct roce_fault_cfg c;
	assert_int_equal(ql__roce_fault_parse("dup=1", false, &c), 0);
	c.slot_bytes = 8;
	assert_int_equal(ql__roce_fault_init(&f, &c), 0);
	assert_int_equal(tx(&f, 0, pkt, sizeof(pkt)), ROCE_FAULT_SEND);
	assert_null(ql__roce_fault_next(&f, 0));
	assert_int_equal(f.queue_full, 1);
	ql__roce_fault_fini(&f);
}

/* the NIC's per-packet work: build, fault, drain, parse, check */
struct hot {
	struct roce_fault f;
	uint8_t payload[1024], buf[1200];
};
static int hot_loop(void *arg)
{
	struct hot *h = arg;
	struct roce_addr a = { .family = AF_INET,
			       .src = { 10, 0, 0, 1 },
			       .dst = { 10, 0, 0, 2 },
			       .sport = 0xc000,
			       .dport = ROCE_UDP_PORT,
			       .ip_id = 0x1234 };
	for (int i = 0; i < 5000; i++) {
		struct roce_pkt p = { .bth = { .opcode = ROCE_RC(ROCE_OP_RDMA_WRITE_ONLY),
					       .psn = (uint32_t)i },
				      .payload = h->payload,
				      .payload_len = (uint32_t)(i % 1000) };
		int n = ql__roce_build(h->buf, sizeof(h->buf), &p, &a);
		if (n < 0)
			return -1;
		struct iovec iov = { h->buf, (size_t)n };
		ql__roce_fault_tx(&h->f, (uint64_t)i * 1000, &iov, 1, &peer, sizeof(peer));
		const struct roce_fault_pkt *q;
		while ((q = ql__roce_fault_next(&h->f, (uint64_t)i * 1000))) {
			struct roce_pkt r;
			if (ql__roce_parse(q->data, q->len, &r) == 0)
				(void)ql__roce_icrc_check(q->data, q->len, &a);
			ql__roce_fault_pop(&h->f);
		}
		struct roce_pkt r;
		if (ql__roce_parse(h->buf, (size_t)n, &r) ||
		    ql__roce_icrc_check(h->buf, (size_t)n, &a))
			return -1;
	}
	return 0;
}

static void test_hotpath(void **state)
{
	(void)state;
	static struct hot h;
	setup_fault(&h.f, "drop=0.1&dup=0.1&reorder=0.1&delay=0.1&corrupt=0.1&delay_us=5");
	char why[256] = "";
	int r = hp_check(hot_loop, &h, why, sizeof(why));
	if (r)
		fail_msg("%s", why);
	ql__roce_fault_fini(&h.f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_seeds),
		cmocka_unit_test(test_drop_nth_once),
		cmocka_unit_test(test_dup_reorder_delay),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_queue_full),
		cmocka_unit_test(test_hotpath),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
