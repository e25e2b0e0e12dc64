/* SPDX-License-Identifier: MIT */
/*
 * An endpoint server built from code qlink-epgen generated from
 * endpoints.yaml (the build runs it): a handler per endpoint, attached
 * through the generated table.
 *
 *   ep_example_server DEVICE ADDRESS     e.g. soft+shm://ex unix:/tmp/ex.sock
 *
 * /rdma/ep0 send: keeps the message; /rdma/ep0 receive: answers "pong: "
 * and the message; /rdma/ep1 write: counts the bytes that landed;
 * /rdma/ep1 read: before each read, stamps the read's number in the
 * buffer's first 8 bytes. Runs until SIGINT/SIGTERM.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qlink/error.h>

#include "endpoints.h"

struct state {
	char msg[ENDPOINTS_SEND_RDMA_EP0_SIZE];
	size_t msg_len;
	uint64_t written, reads;
};

static volatile int stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int on_send(struct ql_ep_call *call, void *arg)
{
	struct state *s = arg;

	memcpy(s->msg, call->buf, call->len);
	s->msg_len = call->len;
	return 0;
}

static int on_receive(struct ql_ep_call *call, void *arg)
{
	struct state *s = arg;

	if (6 + s->msg_len > call->len)
		return -EMSGSIZE;
	memcpy(call->buf, "pong: ", 6);
	memcpy((char *)call->buf + 6, s->msg, s->msg_len);
	call->len = 6 + s->msg_len;
	return 0;
}

static int on_write(struct ql_ep_call *call, void *arg)
{
	struct state *s = arg;

	s->written += call->len;
	return 0;
}

static int on_read(struct ql_ep_call *call, void *arg)
{
	struct state *s = arg;

	s->reads++;
	memcpy(call->buf, &s->reads, sizeof(s->reads));
	return 0;
}

int main(int argc, char **argv)
{
	static struct state st;
	const struct endpoints_handlers h = {
		.send_rdma_ep0 = on_send,
		.recv_rdma_ep0 = on_receive,
		.write_rdma_ep1 = on_write,
		.read_rdma_ep1 = on_read,
		.arg = &st,
	};
	struct ql_ep_server_opts o = { 0 };
	struct ql_ep_server *srv;
	char addr[160];
	int ret;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE ADDRESS\n", argv[0]);
		return 2;
	}
	o.device = argv[1];
	o.listen = argv[2];
	ret = endpoints_server_create(&o, &h, &srv);
	if (ret) {
		fprintf(stderr, "server: %s\n", ql_error_detail());
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	ql_ep_server_address(srv, addr, sizeof(addr));
	printf("example server: listening on %s\n", addr);
	fflush(stdout);
	ret = ql_ep_server_run(srv, &stop);
	printf("example server: %llu bytes written, %llu reads\n", (unsigned long long)st.written,
	       (unsigned long long)st.reads);
	ql_ep_server_destroy(srv);
	return ret ? 1 : 0;
}
