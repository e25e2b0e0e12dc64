/* SPDX-License-Identifier: MIT */
/*
 * qlinkd under a service manager (docs/qlinkd.md, "Running as a service"):
 * sd_notify's protocol, played by this test. It binds a datagram socket,
 * starts qlinkd with NOTIFY_SOCKET naming it (a path, then an abstract
 * @name), and checks that READY=1 arrives once the control port answers
 * (one padded DISCOVER sent the moment READY=1 is read, never resent, must
 * be answered RETRY: a datagram to a port not yet bound is lost), then that
 * SIGTERM brings STOPPING=1 and a clean exit.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "qlink/control.h"
#include "qlinkd_fixture.h"

/* Read one notification (up to ms): its text, or NULL. */
static const char *notification(int fd, int ms)
{
	static char buf[512];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return NULL;
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return NULL;
	buf[n] = 0;
	return buf;
}

/* One DISCOVER, sent once: is it answered (RETRY) within 2 s? */
static bool control_answers(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct ql_ctl_msg m = {
		.type = QL_CTL_DISCOVER, .session = 0x5eed, .seq = 1, .nchannels = 1
	};
	uint8_t buf[QL_CTL_MAX_DGRAM];
	struct pollfd p;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), n;
	bool ok = false;

	assert_true(fd >= 0);
	n = ql_ctl_format(&m, NULL, 0, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&a, sizeof(a)), n);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&p, 1, 2000) > 0) {
		n = (int)recv(fd, buf, sizeof(buf), 0);
		ok = n > 0 && ql_ctl_parse(buf, (size_t)n, NULL, 0, &m) == 0 &&
		     m.type == QL_CTL_RETRY && m.session == 0x5eed;
	}
	close(fd);
	return ok;
}

static void run(bool abstract)
{
	struct qlinkd_fixture f;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char env[sizeof(sa.sun_path) + 64];
	socklen_t salen;
	const char *msg;
	int fd;

	assert_int_equal(qlinkd_fixture_init(&f, "notify"), 0);
	assert_int_equal(qlinkd_fixture_write_config(&f,
						     "device: soft+shm://qlnotify-%d-%d\n"
						     "control: { address: 127.0.0.1, port: %d }\n"
						     "builtins: [qlink_parity]\n",
						     (int)getpid(), (int)abstract, f.port),
			 0);
	if (abstract) {
		snprintf(env, sizeof(env), "@qlink-notify-%d", (int)getpid());
		memcpy(sa.sun_path + 1, env + 1, strlen(env) - 1);
		salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(env));
	} else {
		snprintf(env, sizeof(env), "%s/notify", f.dir);
		assert_true(strlen(env) < sizeof(sa.sun_path));
		memcpy(sa.sun_path, env, strlen(env) + 1);
		salen = sizeof(sa);
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, salen), 0);

	fflush(NULL);
	f.pid = fork();
	assert_true(f.pid >= 0);
	if (f.pid == 0) {
		if (!freopen(f.errlog, "w", stderr) || !freopen(f.outlog, "w", stdout))
			_exit(127);
		setenv("NOTIFY_SOCKET", env, 1);
		alarm(60);
		execl(QL_TEST_QLINKD, "qlinkd", "--config", f.cfg, (char *)NULL);
		_exit(127);
	}
	msg = notification(fd, 20000);
	if (!msg || !strstr(msg, "READY=1"))
		fail_msg("no READY=1 (got %s); qlinkd's log:\n%s", msg ? msg : "nothing",
			 qlinkd_read_file(f.errlog));
	/* the moment READY=1 came: the control port answers */
	assert_true(control_answers(f.port));
	assert_null(notification(fd, 100)); /* nothing else meanwhile */
	kill(f.pid, SIGTERM);
	msg = notification(fd, 10000);
	if (!msg || !strstr(msg, "STOPPING=1"))
		fail_msg("no STOPPING=1 after SIGTERM (got %s)", msg ? msg : "nothing");
	assert_int_equal(qlinkd_fixture_end(&f, 0, 10000, NULL), 0);
	close(fd);
	qlinkd_fixture_cleanup(&f);
}

static void test_notify_path(void **state)
{
	(void)state;
	run(false);
}

static void test_notify_abstract(void **state)
{
	(void)state;
	run(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_notify_path),
		cmocka_unit_test(test_notify_abstract),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
