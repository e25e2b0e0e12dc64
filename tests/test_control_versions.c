/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's versions (docs/control-plane.md section 9): a
 * frozen copy of each released version's exchange (tests/data/control/
 * v1.exchange from version 1's spec text, v2.exchange from version 2's) is
 * sent to today's RTH, and its answers are checked against the file. A v1
 * peer must be told, in version 1, the versions the RTH speaks; the v2
 * exchange must run as specified. Then the reference client against
 * servers of another version: an old v1 RTH and a newer one, each of which
 * answers "bad_version": the client must say which version the server
 * speaks, not "malformed" or a timeout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/control.h"
#include "qlink/error.h"

static int offer(void *ctx, struct ql_ctl_session *s, uint32_t n, struct ql_conn_params *out)
{
	(void)ctx;
	(void)s;
	for (uint32_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].qpn = 16804;
		inet_pton(AF_INET6, "fd71:201:0:1f40:0:3:1f26:f9ed", out[i].gid.raw);
		out[i].mtu = IBV_MTU_4096;
		out[i].vaddr = 0x7f3a1c000000ull;
		out[i].rkey = 2351779841u;
		out[i].length = 0x4040;
		out[i].num_slots = 64;
		out[i].slot_size = 256;
	}
	return 0;
}

static int ok_cb(void *ctx, struct ql_ctl_session *s)
{
	(void)ctx;
	(void)s;
	return 0;
}

static int accept_cb(void *ctx, struct ql_ctl_session *s, const struct ql_conn_params *c,
		     uint32_t n)
{
	(void)ctx;
	(void)s;
	(void)c;
	(void)n;
	return 0;
}

static const struct ql_ctl_server_ops ops = {
	.offer = offer,
	.accept = accept_cb,
	.start = ok_cb,
	.stop = ok_cb,
	.abort = ok_cb,
	.complete = ok_cb,
};

static int udp_socket(uint16_t connect_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (connect_port) {
		a.sin_port = htons(connect_port);
		assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	}
	return fd;
}

static int recv_wait(int fd, void *buf, size_t cap, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) <= 0)
		return -1;
	return (int)recv(fd, buf, cap, MSG_DONTWAIT);
}

/* Replace every @COOKIE@ and @PAD@ in line (in place, into out). */
static size_t expand(const char *line, const char *cookie, char *out, size_t cap)
{
	char tmp[2048];
	size_t n = 0, fixed, pad;
	const char *p;

	for (p = line; *p;) {
		if (!strncmp(p, "@COOKIE@", 8)) {
			n += (size_t)snprintf(tmp + n, sizeof(tmp) - n, "%s", cookie);
			p += 8;
		} else {
			tmp[n++] = *p++;
		}
	}
	tmp[n] = 0;
	p = strstr(tmp, "@PAD@");
	if (!p) {
		snprintf(out, cap, "%s", tmp);
		return n;
	}
	fixed = n - 5;
	pad = fixed < 256 ? 256 - fixed : 0;
	assert_true(fixed + pad < cap);
	memcpy(out, tmp, (size_t)(p - tmp));
	memset(out + (p - tmp), '.', pad);
	snprintf(out + (p - tmp) + pad, cap - (size_t)(p - tmp) - pad, "%s", p + 5);
	return fixed + pad;
}

/* Every key of want is in got with an equal value ("*": present). */
static void expect_subset(const char *file, unsigned line, json_t *want, json_t *got)
{
	const char *k;
	json_t *v;

	json_object_foreach(want, k, v)
	{
		json_t *g = json_object_get(got, k);

		if (!g)
			fail_msg("%s:%u: the answer has no \"%s\"", file, line, k);
		if (json_is_string(v) && !strcmp(json_string_value(v), "*"))
			continue;
		if (!json_equal(v, g)) {
			char *a = json_dumps(g, JSON_COMPACT | JSON_ENCODE_ANY);

			fail_msg("%s:%u: \"%s\" is %s", file, line, k, a);
		}
	}
}

static void run_exchange(const char *name)
{
	struct ql_ctl_server_config cfg = { .bind_addr = "127.0.0.1" };
	char path[512], line[2048], req[2048], cookie[QL_CTL_COOKIE_HEX + 1] = "", ans[2048];
	struct ql_ctl_server *srv;
	struct ql_ctl_stats st;
	unsigned ln = 0, sent = 0, answered = 0;
	size_t reqlen = 0;
	int fd, n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", QL_EXCHANGE_DIR, name);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(ql_ctl_server_create(&cfg, &ops, NULL, &srv), 0);
	fd = udp_socket(ql_ctl_server_port(srv));
	while (fgets(line, sizeof(line), f)) {
		size_t l = strlen(line);

		ln++;
		if (l && line[l - 1] == '\n')
			line[--l] = 0;
		if (!l || line[0] == '#')
			continue;
		if (line[0] == '>') {
			reqlen = expand(line + 2, cookie, req, sizeof(req));
			assert_int_equal(send(fd, req, reqlen, 0), (ssize_t)reqlen);
			sent++;
			/* the server, in this thread: it reads and answers the datagram */
			for (int i = 0; i < 10; i++) {
				ql_ctl_server_stats(srv, &st);
				if (st.received >= sent)
					break;
				ql_ctl_server_poll(srv, 20);
			}
			n = recv_wait(fd, ans, sizeof(ans) - 1, 200);
			if (n >= 0)
				ans[n] = 0;
			continue;
		}
		if (line[0] == '-') {
			if (n >= 0)
				fail_msg("%s:%u: answered (%d bytes) where none is due: %s", name,
					 ln, n, ans);
			continue;
		}
		if (n < 0)
			fail_msg("%s:%u: no answer to the request before", name, ln);
		answered++;
		/* no amplification: an answer to a source without a session is never
		 * longer than the request (section 5.2) */
		if ((strstr(ans, "\"type\":\"ERROR\"") || strstr(ans, "\"type\":\"RETRY\"")) &&
		    (size_t)n > reqlen)
			fail_msg("%s:%u: a %d-byte answer to a %zu-byte request", name, ln, n,
				 reqlen);
		if (line[0] == '=') {
			if (strcmp(ans, line + 2))
				fail_msg("%s:%u: answered\n  %s\nnot\n  %s", name, ln, ans,
					 line + 2);
		} else {
			json_t *want = json_loads(line + 2, 0, NULL), *got;
			json_t *c;

			assert_non_null(want);
			got = json_loads(ans, 0, NULL);
			if (!got)
				fail_msg("%s:%u: the answer is not JSON: %s", name, ln, ans);
			expect_subset(name, ln, want, got);
			c = json_object_get(got, "cookie");
			if (json_is_string(c) && json_string_length(c) == QL_CTL_COOKIE_HEX)
				snprintf(cookie, sizeof(cookie), "%s", json_string_value(c));
			json_decref(want);
			json_decref(got);
		}
	}
	fclose(f);
	close(fd);
	assert_true(answered >= 2);
	ql_ctl_server_destroy(srv);
}

static void test_v1_exchange(void **state)
{
	(void)state;
	run_exchange("v1.exchange");
}

static void test_v2_exchange(void **state)
{
	(void)state;
	run_exchange("v2.exchange");
}

/*
 * The reference client against an RTH of another version: a fake server
 * answers its first DISCOVER with `answer` (session and seq filled in). The
 * client must fail at once with -EPROTONOSUPPORT and name the versions.
 */
static void client_vs(const char *answer_fmt, const char *want_detail)
{
	struct ql_ctl_client_config ccfg = { .timeout_ms = 100, .retries = 1 };
	struct ql_ctl_client *cl;
	struct ql_conn_params rth;
	int srv = udp_socket(0);
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	char hp[64];
	int ret;
	pid_t pid;

	assert_int_equal(getsockname(srv, (struct sockaddr *)&a, &alen), 0);
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", ntohs(a.sin_port));
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char in[QL_CTL_MAX_DGRAM], out[1024];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		struct ql_ctl_msg m;
		ssize_t k = recvfrom(srv, in, sizeof(in), 0, (struct sockaddr *)&from, &fl);
		int o;

		if (k < 0)
			_exit(1);
		ql_ctl_parse((const uint8_t *)in, (size_t)k, NULL, 0, &m);
		o = snprintf(out, sizeof(out), answer_fmt, (unsigned long long)m.session,
			     (unsigned long long)m.seq);
		sendto(srv, out, (size_t)o, 0, (struct sockaddr *)&from, fl);
		_exit(0);
	}
	assert_int_equal(ql_ctl_client_create(hp, NULL, 0, &ccfg, &cl), 0);
	ret = ql_ctl_client_discover(cl, 1, &rth);
	assert_int_equal(ret, -EPROTONOSUPPORT);
	if (!strstr(ql_error_detail(), want_detail))
		fail_msg("detail \"%s\" does not say \"%s\"", ql_error_detail(), want_detail);
	ql_ctl_client_destroy(cl);
	close(srv);
	waitpid(pid, NULL, 0);
}

static void test_client_vs_other_versions(void **state)
{
	(void)state;
	/* the v1 RTH of before version 2 answered a "v":2 this way (its code's text) */
	client_vs("{\"v\":1,\"type\":\"ERROR\",\"session\":\"%016llx\",\"seq\":%llu,\"ts\":5,"
		  "\"code\":\"bad_version\",\"message\":\"protocol version not supported (this "
		  "server speaks v=1)\"}",
		  "this server speaks v=1");
	/* a newer RTH, answering in its own version with the list */
	client_vs("{\"v\":3,\"type\":\"ERROR\",\"session\":\"%016llx\",\"seq\":%llu,\"ts\":0,"
		  "\"code\":\"bad_version\",\"versions\":[3,4]}",
		  "speaks v3, v4");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v1_exchange),
		cmocka_unit_test(test_v2_exchange),
		cmocka_unit_test(test_client_vs_other_versions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
