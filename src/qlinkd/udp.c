/* SPDX-License-Identifier: MIT */
/* qlinkd's CUDA-Q UDP listeners (`udp:`). */

#define _GNU_SOURCE

#include "qlinkd_int.h"

/* ---- CUDA-Q UDP listeners (`udp:`) ----------------------------------------------- */

/* One `udp` entry: a UDP channel bound to its address and port, a daemon
 * with every function, served from now on (on the dispatcher of udp.cpu,
 * or the least-loaded one). The bound address (the port resolved when 0
 * was asked) is logged. */
static int udp_open(struct qlinkd *q, const struct ql_config_udp *u)
{
	struct qlinkd_session *s = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	int ret = qlinkd_session_create(q, SESSION_UDP, u, &s, NULL);

	if (!ret)
		ret = ql_udp_channel_local_addr(s->ch, &ss, &len);
	if (!ret) {
		if (ss.ss_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const void *)&ss;

			inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
			port = ntohs(a->sin6_port);
			snprintf(s->listen, sizeof(s->listen), "[%s]:%u", host, port);
		} else {
			const struct sockaddr_in *a = (const void *)&ss;

			inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
			port = ntohs(a->sin_port);
			snprintf(s->listen, sizeof(s->listen), "%s:%u", host, port);
		}
		for (uint32_t i = 0; u->cpu >= 0 && i < q->cfg->dispatcher.cpus_count; i++)
			if (q->cfg->dispatcher.cpus[i] == u->cpu)
				s->pin = (int)i;
		ret = qlinkd_session_run(s);
	}
	if (ret) {
		qlog(QL_LOG_ERROR, "udp", "cannot listen: session failed",
		     QS("address", u->address), QU("port", u->port),
		     QS("error", qlinkd_detail_or(ret)));
		qlinkd_say("%s:%u: udp %s port %u: %s\n", q->cfg->path, u->line, u->address,
			   u->port, qlinkd_detail_or(ret));
		qlinkd_session_destroy(s);
		return ret;
	}
	s->connected = true; /* watched by qlinkd_check_sessions from now on */
	qlog(QL_LOG_INFO, "udp", "listening", QU("session", s->id), QS("listen", s->listen),
	     QU("port", port), QU("slots", u->slots), QU("slot_size", u->slot_size),
	     QS("bad_requests", u->bad_requests == QL_BAD_REQUEST_DROP ? "drop" : "answer"),
	     QI("cpu", q->cfg->dispatcher.cpus[s->core]));
	return 0;
}

/* Every `udp` entry, in order; the first that fails stops qlinkd. */
int qlinkd_udp_open_all(struct qlinkd *q)
{
	for (uint32_t i = 0; i < q->cfg->udp_count; i++) {
		int ret = udp_open(q, &q->cfg->udp[i]);

		if (ret)
			return ret;
	}
	return 0;
}
