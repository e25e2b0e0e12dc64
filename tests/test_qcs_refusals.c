/* SPDX-License-Identifier: MIT */
/*
 * QCSDevice (the RTH's handle on one QCS) refusing what it must refuse,
 * driven by the library's own control client in a thread: a QCS with
 * another name, a QCS that asks for more than the one channel, a DISCOVER
 * while no channel waits for a QCS, a second QCS while the channel is
 * offered to the first; and the calls that need a connected QCS, bad
 * arguments, and an establish_connection nobody answers.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/channel.h"
#include "qlink/control.h"
#include "qlink/error.h"
#include "qlink/qcs.h"
#include "qlink/verbs.h"

struct rth {
	struct ql_device *vdev;
	struct ql_channel *ch;
	struct ql_qcs_device *qcs;
	uint16_t port;
};

static int instance;

static void rth_create(struct rth *r, const char *qcs_name)
{
	struct ql_verbs_channel_config vc = { .num_slots = 8, .slot_size = 256 };
	struct ql_ctl_server_config cc = {
		.bind_addr = "127.0.0.1",
		.port = 0,
		.session_timeout_ms = 3000,
		.request_timeout_ms = 50,
		.request_retries = 2,
	};
	char uri[64];

	memset(r, 0, sizeof(*r));
	snprintf(uri, sizeof(uri), "soft+shm://qcs-ref%d-%d", (int)getpid(), instance++);
	assert_int_equal(ql_device_open(uri, &r->vdev), 0);
	assert_int_equal(ql_verbs_channel_create(r->vdev, &vc, &r->ch), 0);
	assert_int_equal(ql_qcs_device_create(&cc, qcs_name, &r->qcs), 0);
	r->port = ql_ctl_server_port(ql_qcs_device_server(r->qcs));
	assert_true(r->port > 0);
}

static void rth_destroy(struct rth *r)
{
	ql_qcs_device_destroy(r->qcs);
	ql_channel_destroy(r->ch);
	assert_int_equal(ql_device_close(r->vdev), 0);
}

/* A QCS in a thread: DISCOVER for nch channels under `name`. */
struct qcs_try {
	uint16_t port;
	const char *name;
	uint32_t nch;
	int ret;
	char detail[256];
	struct ql_ctl_client *cl; /* kept for the caller when keep is set */
	bool keep;
};

static void *qcs_main(void *arg)
{
	struct qcs_try *t = arg;
	struct ql_ctl_client_config cfg = { .name = t->name, .timeout_ms = 50, .retries = 8 };
	struct ql_conn_params p[2];
	struct ql_ctl_client *cl = NULL;
	char hp[32];

	snprintf(hp, sizeof(hp), "127.0.0.1:%u", t->port);
	t->ret = ql_ctl_client_create(hp, NULL, 0, &cfg, &cl);
	if (!t->ret)
		t->ret = ql_ctl_client_discover(cl, t->nch, p);
	snprintf(t->detail, sizeof(t->detail), "%s", ql_error_detail());
	if (t->keep && !t->ret)
		t->cl = cl;
	else
		ql_ctl_client_destroy(cl);
	return NULL;
}

/* Start the QCS, serve the control plane for up to ms (establishing a
 * connection when ch is set), and return the QCS's outcome. */
static int try_qcs(struct rth *r, struct qcs_try *t, bool establish, int ms)
{
	pthread_t th;

	t->port = r->port;
	assert_int_equal(pthread_create(&th, NULL, qcs_main, t), 0);
	if (establish)
		ql_qcs_establish_connection(r->qcs, r->ch, ms);
	else
		for (int i = 0; i < ms / 10; i++)
			ql_qcs_poll(r->qcs, 10);
	pthread_join(th, NULL);
	return t->ret;
}

static void expect_in(const char *detail, const char *part)
{
	if (!strstr(detail, part))
		fail_msg("'%s' lacks '%s'", detail, part);
}

static void test_arguments(void **state)
{
	struct ql_qcs_device *dev = NULL;
	char longname[QL_CTL_NAME_MAX + 8];
	struct rth r;

	(void)state;
	assert_int_equal(ql_qcs_device_create(NULL, "x", NULL), -EINVAL);
	memset(longname, 'q', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(ql_qcs_device_create(NULL, longname, &dev), -EINVAL);
	assert_null(dev);
	ql_qcs_device_destroy(NULL);
	assert_int_equal(ql_qcs_disconnect(NULL), -EINVAL);
	assert_false(ql_qcs_is_connected(NULL));

	rth_create(&r, "qcs-a");
	assert_int_equal(ql_qcs_establish_connection(r.qcs, NULL, 10), -EINVAL);
	assert_int_equal(ql_qcs_establish_connection(NULL, r.ch, 10), -EINVAL);
	/* nothing connected: the QCS calls say so */
	assert_false(ql_qcs_is_connected(r.qcs));
	assert_int_equal(ql_qcs_trigger(r.qcs, 10), -ENOTCONN);
	expect_in(ql_error_detail(), "no QCS is connected");
	assert_int_equal(ql_qcs_abort(r.qcs, 10), -ENOTCONN);
	assert_int_equal(ql_qcs_upload_program(r.qcs, "x", 1, 10), -ENOTCONN);
	assert_false(ql_qcs_is_complete(r.qcs));
	/* nobody comes */
	assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 100), -ETIMEDOUT);
	expect_in(ql_error_detail(), "no QCS named 'qcs-a' connected within 100 ms");
	rth_destroy(&r);
}

static void test_offer_refusals(void **state)
{
	struct qcs_try t;
	struct rth r;

	(void)state;
	rth_create(&r, "qcs-a");

	/* another QCS's name */
	memset(&t, 0, sizeof(t));
	t.name = "qcs-b";
	t.nch = 1;
	assert_int_equal(try_qcs(&r, &t, true, 1000), -ECONNREFUSED);
	expect_in(t.detail, "this RTH waits for QCS 'qcs-a', not 'qcs-b'");
	assert_false(ql_qcs_is_connected(r.qcs));

	/* two channels of a one-channel device */
	memset(&t, 0, sizeof(t));
	t.name = "qcs-a";
	t.nch = 2;
	assert_int_equal(try_qcs(&r, &t, true, 1000), -ECONNREFUSED);
	expect_in(t.detail, "a QCS device has 1 channel, not 2");

	/* the right QCS, but no channel is waiting for it */
	memset(&t, 0, sizeof(t));
	t.name = "qcs-a";
	t.nch = 1;
	assert_int_equal(try_qcs(&r, &t, false, 500), -ECONNREFUSED);
	expect_in(t.detail, "no channel is waiting for a QCS");

	/* two of the right QCS during one establish: the first is offered the
	 * channel (it does not ACK, so the establish times out), the second is
	 * refused */
	{
		struct qcs_try t2[2] = {
			{ .name = "qcs-a", .nch = 1, .keep = true, .port = r.port },
			{ .name = "qcs-a", .nch = 1, .keep = true, .port = r.port }
		};
		pthread_t th[2];
		int won;

		for (int i = 0; i < 2; i++)
			assert_int_equal(pthread_create(&th[i], NULL, qcs_main, &t2[i]), 0);
		assert_int_equal(ql_qcs_establish_connection(r.qcs, r.ch, 600), -ETIMEDOUT);
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		if (!((t2[0].ret == 0) ^ (t2[1].ret == 0)))
			fail_msg("offers: %d (%s), %d (%s)", t2[0].ret, t2[0].detail, t2[1].ret,
				 t2[1].detail);
		won = t2[0].ret == 0 ? 0 : 1;
		assert_int_equal(t2[!won].ret, -ECONNREFUSED);
		expect_in(t2[!won].detail, "already offered to another session");
		t.cl = t2[won].cl;
	}
	ql_ctl_client_destroy(t.cl);
	assert_false(ql_qcs_is_connected(r.qcs));
	rth_destroy(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arguments),
		cmocka_unit_test(test_offer_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
