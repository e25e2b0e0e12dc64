/* SPDX-License-Identifier: MIT */
/*
 * The endpoint tests' server: a child process serving a fixed set of
 * endpoints whose handlers make their timing observable to a client:
 *
 *   /data    write 1 MiB  handler copies what landed into /data (read)
 *   /data    read  1 MiB  no handler: the buffer as /data (write) left it
 *   /counter read  8      handler increments a counter and stores it
 *   /msg     send  4096   handler keeps the message of this connection
 *   /msg     receive 4096 handler answers "echo:" + this connection's message
 *   /fail    receive 64   handler fails with -EACCES
 *   /big     receive 8192 handler produces 8192 bytes
 *   /stats   receive      handler returns struct ql_ep_server_stats
 *   /sum     receive 16   handler returns {length, FNV-1a 64} of the last
 *                         /data write (answered in order after it: a
 *                         client's way to wait for the write handler)
 *
 * ept_server_start forks it (devices are opened after the fork, as the soft
 * provider requires) and returns its address (ept_server_start_unix: on a
 * socket named after the test and its pid); ept_server_stop ends it with
 * SIGTERM and checks it left cleanly.
 */
#ifndef QL_TEST_ENDPOINT_FIXTURE_H
#define QL_TEST_ENDPOINT_FIXTURE_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <qlink/endpoint.h>
#include <qlink/error.h>

#define EPT_MAX_CONNS 64
#define EPT_DATA_SIZE (1u << 20)

struct ept_server {
	pid_t pid;
	char addr[128];
};

static struct ql_ep_server *ept_srv;
static volatile int ept_stop;
static uint64_t ept_counter;
static char ept_msg[EPT_MAX_CONNS][4096];
static size_t ept_msg_len[EPT_MAX_CONNS];
static uint64_t ept_sum[2];

static inline uint64_t ept_fnv64(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static int ept_sum_receive(struct ql_ep_call *call, void *arg)
{
	(void)arg;
	memcpy(call->buf, ept_sum, sizeof(ept_sum));
	call->len = sizeof(ept_sum);
	return 0;
}

static void ept_on_term(int sig)
{
	(void)sig;
	ept_stop = 1;
}

static int ept_data_written(struct ql_ep_call *call, void *arg)
{
	size_t size;
	void *rd = ql_ep_server_buffer(ept_srv, "/data", QL_EP_READ, &size);

	(void)arg;
	if (!rd || call->len > size)
		return -EINVAL;
	memcpy(rd, call->buf, call->len);
	ept_sum[0] = call->len;
	ept_sum[1] = ept_fnv64(call->buf, call->len);
	return 0;
}

static int ept_counter_read(struct ql_ep_call *call, void *arg)
{
	(void)arg;
	ept_counter++;
	memcpy(call->buf, &ept_counter, sizeof(ept_counter));
	return 0;
}

static int ept_msg_sent(struct ql_ep_call *call, void *arg)
{
	unsigned k = (unsigned)(call->conn % EPT_MAX_CONNS);

	(void)arg;
	memcpy(ept_msg[k], call->buf, call->len);
	ept_msg_len[k] = call->len;
	return 0;
}

static int ept_msg_receive(struct ql_ep_call *call, void *arg)
{
	unsigned k = (unsigned)(call->conn % EPT_MAX_CONNS);
	size_t n = 5 + ept_msg_len[k];

	(void)arg;
	if (n > call->len)
		return -EMSGSIZE;
	memcpy(call->buf, "echo:", 5);
	memcpy((char *)call->buf + 5, ept_msg[k], ept_msg_len[k]);
	call->len = n;
	return 0;
}

static int ept_fail(struct ql_ep_call *call, void *arg)
{
	(void)call;
	(void)arg;
	return -EACCES;
}

static int ept_big(struct ql_ep_call *call, void *arg)
{
	(void)arg;
	memset(call->buf, 'B', call->size);
	call->len = call->size;
	return 0;
}

static int ept_stats(struct ql_ep_call *call, void *arg)
{
	struct ql_ep_server_stats st;

	(void)arg;
	ql_ep_server_stats(ept_srv, &st);
	memcpy(call->buf, &st, sizeof(st));
	call->len = sizeof(st);
	return 0;
}

static int ept_server_main(int wfd, const char *device, const char *listen, int max_conns)
{
	struct ql_ep_server_opts o = {
		.device = device,
		.listen = listen,
		.max_conns = max_conns,
		/* tight for the hostile test; the slow rxe guest gets the default */
		.handshake_ms = strncmp(device, "soft", 4) ? 0 : 300,
	};
	struct ql_ep_spec *spec;
	char addr[128];
	int ret;

	signal(SIGTERM, ept_on_term);
	if (ql_ep_spec_create(&spec) || ql_ep_spec_add(spec, "/data", QL_EP_WRITE, EPT_DATA_SIZE) ||
	    ql_ep_spec_add(spec, "/data", QL_EP_READ, EPT_DATA_SIZE) ||
	    ql_ep_spec_add(spec, "/counter", QL_EP_READ, 8) ||
	    ql_ep_spec_add(spec, "/msg", QL_EP_SEND, 4096) ||
	    ql_ep_spec_add(spec, "/msg", QL_EP_RECEIVE, 4096) ||
	    ql_ep_spec_add(spec, "/fail", QL_EP_RECEIVE, 64) ||
	    ql_ep_spec_add(spec, "/big", QL_EP_RECEIVE, 8192) ||
	    ql_ep_spec_add(spec, "/stats", QL_EP_RECEIVE, sizeof(struct ql_ep_server_stats)) ||
	    ql_ep_spec_add(spec, "/sum", QL_EP_RECEIVE, 16))
		return 10;
	ret = ql_ep_server_create(spec, &o, &ept_srv);
	ql_ep_spec_free(spec);
	if (ret) {
		fprintf(stderr, "server: %s\n", ql_error_detail());
		return 11;
	}
	if (ql_ep_server_handle(ept_srv, "/data", QL_EP_WRITE, ept_data_written, NULL) ||
	    ql_ep_server_handle(ept_srv, "/counter", QL_EP_READ, ept_counter_read, NULL) ||
	    ql_ep_server_handle(ept_srv, "/msg", QL_EP_SEND, ept_msg_sent, NULL) ||
	    ql_ep_server_handle(ept_srv, "/msg", QL_EP_RECEIVE, ept_msg_receive, NULL) ||
	    ql_ep_server_handle(ept_srv, "/fail", QL_EP_RECEIVE, ept_fail, NULL) ||
	    ql_ep_server_handle(ept_srv, "/big", QL_EP_RECEIVE, ept_big, NULL) ||
	    ql_ep_server_handle(ept_srv, "/stats", QL_EP_RECEIVE, ept_stats, NULL) ||
	    ql_ep_server_handle(ept_srv, "/sum", QL_EP_RECEIVE, ept_sum_receive, NULL) ||
	    ql_ep_server_handle(ept_srv, "/nothere", QL_EP_RECEIVE, ept_stats, NULL) != -ENOENT)
		return 12;
	ql_ep_server_address(ept_srv, addr, sizeof(addr));
	if (write(wfd, addr, strlen(addr) + 1) < 0)
		return 13;
	close(wfd);
	ret = ql_ep_server_run(ept_srv, &ept_stop);
	ql_ep_server_destroy(ept_srv);
	return ret ? 14 : 0;
}

static inline void ept_server_start(struct ept_server *s, const char *device, const char *listen,
				    int max_conns)
{
	int p[2];
	ssize_t n;

	if (pipe(p))
		abort();
	fflush(NULL);
	s->pid = fork();
	if (s->pid == 0) {
		close(p[0]);
		_exit(ept_server_main(p[1], device, listen, max_conns));
	}
	close(p[1]);
	n = read(p[0], s->addr, sizeof(s->addr) - 1);
	close(p[0]);
	if (n <= 0) {
		fprintf(stderr, "the endpoint server did not start\n");
		abort();
	}
	s->addr[n] = '\0';
}

/* The same on a unix socket of this test process's own,
 * /tmp/qlink-NAME-PID.sock, so that tests running at once do not meet. */
static inline void ept_server_start_unix(struct ept_server *s, const char *device, const char *name,
					 int max_conns)
{
	char addr[128];

	snprintf(addr, sizeof(addr), "unix:/tmp/qlink-%s-%d.sock", name, (int)getpid());
	ept_server_start(s, device, addr, max_conns);
}

/* 0 if the server left with status 0 */
static inline int ept_server_stop(struct ept_server *s)
{
	int status = 0;

	kill(s->pid, SIGTERM);
	if (waitpid(s->pid, &status, 0) != s->pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

/* The server's counters, through a connection of its own (counted). */
static inline int ept_stats_get(const char *device, const char *addr, struct ql_ep_server_stats *st)
{
	struct ql_ep_client *c;
	long n;
	int ret = ql_ep_client_connect(device, addr, &c);

	if (ret)
		return ret;
	n = ql_ep_recv(c, "/stats", st, sizeof(*st));
	ql_ep_client_close(c);
	return n == (long)sizeof(*st) ? 0 : -EIO;
}

#endif
