/* SPDX-License-Identifier: MIT */
/*
 * sdr_pair: test support for the SDR tests: two SDR connections in one
 * process (receiver r, the acceptor; sender s, the connector) on the
 * devices of a verbs_fixture parameter, connected through a thread for the
 * acceptor's blocking handshake, and a transfer driver that runs both
 * sides' progress until the message ends.
 */
#ifndef QL_TESTS_SDR_PAIR_H
#define QL_TESTS_SDR_PAIR_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "verbs_fixture.h"

#include <qlink/clock.h>
#include <qlink/sdr.h>

struct sp_pair {
	struct ql_device *dr, *ds;
	struct ql_sdr_conn *r, *s;
};

struct sp_accept {
	struct ql_sdr_conn *c;
	struct ql_conn_params d, x;
	int rc;
};

static inline void *sp_accept_main(void *arg)
{
	struct sp_accept *a = arg;

	a->rc = ql_sdr_accept(a->c, &a->d, &a->x, 10000);
	return NULL;
}

/* Connect two local connections (already created). 0 or negative errno. */
static inline int sp_connect(struct ql_sdr_conn *r, struct ql_sdr_conn *s)
{
	struct sp_accept a = { .c = r };
	struct ql_conn_params sd, sx;
	char text[1024];
	pthread_t t;
	int rc;

	/* the text form both ways, as tools pass it */
	if (ql_sdr_conn_params_format(s, text, sizeof(text)) < 0 ||
	    ql_sdr_conn_params_parse(text, &a.d, &a.x))
		return -EINVAL;
	if (ql_sdr_conn_params_format(r, text, sizeof(text)) < 0 ||
	    ql_sdr_conn_params_parse(text, &sd, &sx))
		return -EINVAL;
	if (pthread_create(&t, NULL, sp_accept_main, &a))
		return -EAGAIN;
	rc = ql_sdr_connect(s, &sd, &sx, 10000);
	pthread_join(t, NULL);
	if (rc)
		print_error("connect: %s (%s)\n", ql_strerror(rc), ql_error_detail());
	if (a.rc)
		print_error("accept: %s (%s)\n", ql_strerror(a.rc), ql_error_detail());
	return rc ? rc : a.rc;
}

static inline int sp_pair_open(const struct vt_param *p, const struct ql_sdr_config *cfg,
			       struct sp_pair *pp)
{
	int rc;

	memset(pp, 0, sizeof(*pp));
	rc = vt_dev_open(p, &pp->dr);
	if (!rc)
		rc = vt_dev_open_b(p, &pp->ds);
	if (!rc)
		rc = ql_sdr_conn_create(pp->dr, cfg, &pp->r);
	if (!rc)
		rc = ql_sdr_conn_create(pp->ds, cfg, &pp->s);
	if (rc)
		print_error("sdr pair: %s (%s)\n", ql_strerror(rc), ql_error_detail());
	if (!rc)
		rc = sp_connect(pp->r, pp->s);
	return rc;
}

static inline void sp_pair_close(struct sp_pair *pp)
{
	ql_sdr_conn_destroy(pp->s);
	ql_sdr_conn_destroy(pp->r);
	if (pp->ds)
		ql_device_close(pp->ds);
	if (pp->dr)
		ql_device_close(pp->dr);
}

/* Drive both sides until rx and tx ended or timeout_ms passed. */
static inline int sp_run(struct sp_pair *pp, struct ql_sdr_recv *rx, struct ql_sdr_send *tx,
			 int timeout_ms, int *rst, int *sst)
{
	uint64_t end = ql_clock_ns() + (uint64_t)timeout_ms * 1000000ull;

	for (;;) {
		int a = ql_sdr_progress(pp->r), b = ql_sdr_progress(pp->s);

		if (a < 0 || b < 0) {
			print_error("progress: %d %d\n", a, b);
			return a < 0 ? a : b;
		}
		if ((!rx || ql_sdr_recv_poll(rx, rst)) && (!tx || ql_sdr_send_poll(tx, sst)))
			return 0;
		if (ql_clock_ns() > end)
			return -ETIMEDOUT;
	}
}

/* Drive both sides for ms milliseconds. */
static inline void sp_idle(struct sp_pair *pp, int ms)
{
	uint64_t end = ql_clock_ns() + (uint64_t)ms * 1000000ull;

	while (ql_clock_ns() < end) {
		ql_sdr_progress(pp->r);
		ql_sdr_progress(pp->s);
	}
}

#endif
