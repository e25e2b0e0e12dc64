/* SPDX-License-Identifier: MIT */
/*
 * The endpoint server against hostile clients (tests/endpoint_fixture.h
 * runs it in a child process on soft+shm). A raw client speaks the wire
 * protocol by hand (docs/endpoint.md) and sends what a correct client never
 * would: garbage, a bad magic, a path length that lies, a bad path, an
 * acknowledgement for an endpoint never described, of the wrong type, or
 * with a length over the buffer, a reply, a send request followed by
 * something other than its data, send data larger than the buffer, bytes
 * on the socket after the hello, a malformed hello, a hello never
 * finished. Clients are also killed in the middle of transfers. After each,
 * the server has closed that connection (its socket reads EOF), counted
 * it, freed it (conns_open), and still serves a well-behaved client.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "endpoint/ep_int.h"
#include "endpoint_fixture.h"

static const char *dev_srv = "soft+shm://epth-srv";
static const char *dev_cli = "soft+shm://epth-cli";
static struct ept_server server;

/* ---- a raw client ------------------------------------------------------ */

struct raw {
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq;
	struct ql_qp *ctl, *data;
	uint8_t *mem;
	struct ql_mr *mr;
	int fd;
	struct ql_conn_params srv; /* the server's ctl params: its ack ring */
};

static void raw_open_credit(struct raw *r, int credit);

static void raw_open(struct raw *r)
{
	raw_open_credit(r, 1);
}

/* credit 0: a hello that names no credit word (refused) */
static void raw_open_credit(struct raw *r, int credit)
{
	struct ql_conn_params mem = { 0 };
	struct ql_qp_init_attr a = { 0 };
	struct ql_conn_params pc, pd;
	char hello[QL_EPC_HELLO_MAX + 1];
	size_t got = 0;
	int n, lines = 0;

	memset(r, 0, sizeof(*r));
	assert_int_equal(ql_device_open(dev_cli, &r->dev), 0);
	assert_int_equal(ql_pd_alloc(r->dev, &r->pd), 0);
	assert_int_equal(ql_cq_create(r->dev, 64, &r->cq), 0);
	assert_int_equal(ql_pd_mem_alloc(r->pd, 16384, (void **)&r->mem), 0);
	assert_int_equal(ql_mr_reg(r->pd, r->mem, 16384,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &r->mr),
			 0);
	a.send_cq = a.recv_cq = r->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	a.sq_sig_all = 1;
	assert_int_equal(ql_qp_create(r->pd, &a, &r->ctl), 0);
	assert_int_equal(ql_qp_create(r->pd, &a, &r->data), 0);
	assert_int_equal(ql__ep_connect(server.addr, 5000, &r->fd), 0);
	mem.vaddr = (uintptr_t)(r->mem + 12288);
	mem.rkey = ql_mr_rkey(r->mr);
	mem.length = credit ? 8 : 0;
	n = ql__ep_hello_format(r->ctl, r->data, &mem, hello, sizeof(hello));
	assert_true(n > 0);
	assert_int_equal(send(r->fd, hello, (size_t)n, 0), n);
	while (lines < 3) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };
		ssize_t k;

		assert_int_equal(poll(&p, 1, 5000), 1);
		k = recv(r->fd, hello + got, sizeof(hello) - 1 - got, 0);
		assert_true(k > 0);
		got += (size_t)k;
		lines = 0;
		for (size_t i = 0; i < got; i++)
			lines += hello[i] == '\n';
		hello[got] = '\0';
		if (strstr(hello, " ERR ") && lines)
			break;
	}
	hello[got] = '\0';
	if (!credit) {
		assert_non_null(strstr(hello, "ERR"));
		assert_non_null(strstr(hello, "credit"));
		r->srv.qpn = 0;
		return;
	}
	assert_int_equal(ql__ep_hello_parse(hello, &pc, &pd), 0);
	r->srv = pc;
	assert_int_equal(ql_qp_connect(r->ctl, &pc, NULL), 0);
	assert_int_equal(ql_qp_connect(r->data, &pd, NULL), 0);
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(r->mem + 8192 + i * 256),
				       .length = 256,
				       .lkey = ql_mr_lkey(r->mr) };
		struct ibv_recv_wr wr = { .wr_id = 100 + (uint64_t)i,
					  .sg_list = &sge,
					  .num_sge = 1 };
		struct ibv_recv_wr *bad;

		assert_int_equal(ql_qp_post_recv(r->ctl, &wr, &bad), 0);
	}
}

static void raw_close(struct raw *r)
{
	close(r->fd);
	ql_qp_destroy(r->ctl);
	ql_qp_destroy(r->data);
	ql_mr_dereg(r->mr);
	ql_pd_mem_free(r->pd, r->mem);
	ql_cq_destroy(r->cq);
	ql_pd_free(r->pd);
	ql_device_close(r->dev);
}

/* SEND len bytes from mem[0..] on qp; the result of its completion. */
static int raw_send(struct raw *r, struct ql_qp *qp, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)r->mem,
			       .length = (uint32_t)len,
			       .lkey = ql_mr_lkey(r->mr) };
	struct ibv_send_wr wr = { .wr_id = 1,
				  .sg_list = &sge,
				  .num_sge = len ? 1 : 0,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int n;

	if (ql_qp_post_send(qp, &wr, &bad))
		return -EIO;
	for (int i = 0; i < 2000000; i++) {
		n = ql_cq_poll(r->cq, 1, &wc);
		if (n < 0)
			return n;
		if (n == 1 && wc.wr_id == 1)
			return wc.status == IBV_WC_SUCCESS ? 0 : -EIO;
		if (n == 0 && i > 1000)
			usleep(10);
	}
	return -ETIMEDOUT;
}

/* WRITE one word into slot `slot` of the server's ack ring. */
static size_t ring_write(struct raw *r, size_t slot, uint64_t word)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(r->mem + 4096),
			       .length = 8,
			       .lkey = ql_mr_lkey(r->mr) };
	struct ibv_send_wr wr = { .wr_id = 1,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int n = 0;

	memcpy(r->mem + 4096, &word, 8);
	wr.wr.rdma.remote_addr = r->srv.vaddr + slot * 8;
	wr.wr.rdma.rkey = r->srv.rkey;
	assert_int_equal(ql_qp_post_send(r->ctl, &wr, &bad), 0);
	for (int i = 0; i < 5000000 && n == 0; i++)
		n = ql_cq_poll(r->cq, 1, &wc);
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	return (size_t)-1;
}

static size_t msg(struct raw *r, uint8_t kind, uint8_t op, const char *path, uint64_t length,
		  uint32_t ep_id)
{
	struct ql_epw_msg m = { .kind = kind,
				.op = op,
				.path = path,
				.path_len = path ? (uint8_t)strlen(path) : 0,
				.seq = 7,
				.length = length,
				.ep_id = ep_id };

	return ql_epw_encode(&m, r->mem);
}

/* The server closes this connection: its socket reads EOF. */
static void expect_closed(struct raw *r)
{
	struct pollfd p = { .fd = r->fd, .events = POLLIN };
	char b[8];

	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(recv(r->fd, b, sizeof(b), 0), 0);
}

static void stats(struct ql_ep_server_stats *st)
{
	assert_int_equal(ept_stats_get(dev_cli, server.addr, st), 0);
}

/* A well-behaved client is served, and only the stats connection is open. */
static void expect_serving(void)
{
	struct ql_ep_client *c;
	struct ql_ep_server_stats st;
	char buf[32];

	assert_int_equal(ql_ep_client_connect(dev_cli, server.addr, &c), 0);
	assert_int_equal(ql_ep_send(c, "/msg", "ok", 2), 0);
	assert_int_equal(ql_ep_recv(c, "/msg", buf, sizeof(buf)), 7);
	assert_memory_equal(buf, "echo:ok", 7);
	assert_int_equal(ql_ep_write(c, "/data", "w", 1), 0);
	assert_int_equal(ql_ep_read(c, "/data", buf, 1), 0);
	ql_ep_client_close(c);
	for (int i = 0; i < 100; i++) {
		stats(&st);
		if (st.conns_open == 1)
			break;
		usleep(20000);
	}
	assert_int_equal(st.conns_open, 1);
}

/* Send what build() put in mem on a fresh raw connection; the server must
 * count one violation and close it. */
static void violation_case(const char *name, size_t (*build)(struct raw *r))
{
	struct ql_ep_server_stats st0, st1;
	struct raw r;
	size_t len;

	stats(&st0);
	raw_open(&r);
	len = build(&r);
	if (len != (size_t)-1)
		assert_int_equal(raw_send(&r, r.ctl, len), 0);
	expect_closed(&r);
	raw_close(&r);
	stats(&st1);
	if (st1.violations != st0.violations + 1)
		fail_msg("%s: violations %llu -> %llu", name, (unsigned long long)st0.violations,
			 (unsigned long long)st1.violations);
	expect_serving();
}

static size_t b_garbage(struct raw *r)
{
	memcpy(r->mem, "abc", 3);
	return 3;
}

static size_t b_magic(struct raw *r)
{
	size_t n = msg(r, QL_EPW_REQUEST, QL_EP_WRITE, "/data", 1, 0);

	r->mem[0] ^= 0xff;
	return n;
}

static size_t b_path_len_lies(struct raw *r)
{
	size_t n = msg(r, QL_EPW_REQUEST, QL_EP_WRITE, "/data", 1, 0);

	r->mem[7] = 100; /* the message holds 5 */
	return n;
}

static size_t b_bad_path(struct raw *r)
{
	return msg(r, QL_EPW_REQUEST, QL_EP_WRITE, "da ta", 1, 0);
}

static size_t b_bad_op(struct raw *r)
{
	size_t n = msg(r, QL_EPW_REQUEST, QL_EP_WRITE, "/data", 1, 0);

	r->mem[6] = 9;
	return n;
}

static size_t b_retired_ack(struct raw *r)
{
	return msg(r, 3, QL_EP_WRITE, NULL, 1, 0);
}

static size_t b_ack_undescribed(struct raw *r)
{
	return ring_write(r, 0, ql_epa_word(1, 0, 0, 1));
}

static size_t b_ack_out_of_range(struct raw *r)
{
	return ring_write(r, 0, ql_epa_word(1, 200, 0, 1));
}

static size_t b_reply(struct raw *r)
{
	return msg(r, QL_EPW_REPLY, QL_EP_WRITE, NULL, 0, 0);
}

/* Describe /data (write) first, properly, then lie in the ack. */
static uint32_t describe(struct raw *r, uint8_t op, const char *path)
{
	struct ibv_wc wc;
	struct ql_epw_msg m = { 0 };
	int n = 0;

	assert_int_equal(raw_send(r, r->ctl, msg(r, QL_EPW_REQUEST, op, path, 1, 0)), 0);
	for (int i = 0; i < 5000000 && n == 0; i++) {
		n = ql_cq_poll(r->cq, 1, &wc);
		if (n == 1 && wc.wr_id < 100)
			n = 0;
	}
	assert_int_equal(n, 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(ql_epw_decode(r->mem + 8192 + (wc.wr_id - 100) * 256, wc.byte_len, &m), 0);
	assert_int_equal(m.status, 0);
	return m.ep_id;
}

static size_t b_ack_too_long(struct raw *r)
{
	uint32_t id = describe(r, QL_EP_WRITE, "/data");

	return ring_write(r, 0, ql_epa_word(1, id, 0, EPT_DATA_SIZE + 1));
}

static size_t b_ack_wrong_type(struct raw *r)
{
	uint32_t id = describe(r, QL_EP_WRITE, "/data");

	return ring_write(r, 0, ql_epa_word(1, id, 1, 1));
}

static size_t b_send_then_request(struct raw *r)
{
	describe(r, QL_EP_SEND, "/msg");
	/* the data is due on the data QP; a request comes instead */
	return msg(r, QL_EPW_REQUEST, QL_EP_WRITE, "/data", 1, 0);
}

static size_t b_send_too_much(struct raw *r)
{
	describe(r, QL_EP_SEND, "/msg");
	/* 8000 bytes into a 4096-byte buffer: the server's receive fails */
	raw_send(r, r->data, 8000);
	return (size_t)-1;
}

static size_t b_socket_bytes(struct raw *r)
{
	assert_int_equal(send(r->fd, "more\n", 5, 0), 5);
	return (size_t)-1;
}

static void test_malformed(void **state)
{
	(void)state;
	violation_case("garbage", b_garbage);
	violation_case("bad magic", b_magic);
	violation_case("path length lies", b_path_len_lies);
	violation_case("bad path", b_bad_path);
	violation_case("bad op", b_bad_op);
	violation_case("ack undescribed", b_ack_undescribed);
	violation_case("ack out of range", b_ack_out_of_range);
	violation_case("reply from a client", b_reply);
	violation_case("retired ack message", b_retired_ack);
	violation_case("ack too long", b_ack_too_long);
	violation_case("ack wrong type", b_ack_wrong_type);
	violation_case("send then request", b_send_then_request);
	violation_case("send too much", b_send_too_much);
	violation_case("socket bytes", b_socket_bytes);
}

/* What the server says on a (non-blocking) socket, within 5 s. */
static ssize_t recv_wait(int fd, char *b, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, 5000) != 1)
		return -1;
	return recv(fd, b, len, 0);
}

/* Ring words that are not the expected seq are not acks: nothing happens
 * (the client only stalls itself); the expected one is taken. A hello that
 * names no credit word is refused. */
static void test_ring_rules(void **state)
{
	struct ql_ep_server_stats st0, st1;
	struct raw r;
	uint32_t id;

	(void)state;
	stats(&st0);
	raw_open(&r);
	id = describe(&r, QL_EP_WRITE, "/data");
	ring_write(&r, 0, ql_epa_word(5, id, 0, 1));		    /* ahead */
	ring_write(&r, 1, ql_epa_word(2, id, 0, 1));		    /* next, not yet */
	ring_write(&r, 0, ql_epa_word(1 + QL_EPA_SLOTS, id, 0, 1)); /* a lap ahead */
	usleep(20000);
	stats(&st1);
	assert_int_equal(st1.acks, st0.acks);
	ring_write(&r, 0, ql_epa_word(1, id, 0, 1)); /* now 1, then 2 is there */
	for (int i = 0; i < 100 && st1.acks < st0.acks + 2; i++) {
		usleep(10000);
		stats(&st1);
	}
	assert_int_equal(st1.acks, st0.acks + 2);
	assert_int_equal(st1.violations, st0.violations);
	raw_close(&r);

	raw_open_credit(&r, 0);
	raw_close(&r);
	expect_serving();
}

/* RDMA WRITE one word from a's control QP to addr/rkey (another
 * connection's, as an attacker who learned them would); the completion's
 * status. */
static int write_as(struct raw *a, uint64_t addr, uint32_t rkey, uint64_t word)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(a->mem + 4096),
			       .length = 8,
			       .lkey = ql_mr_lkey(a->mr) };
	struct ibv_send_wr wr = { .wr_id = 1,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int n = 0;

	memcpy(a->mem + 4096, &word, 8);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	assert_int_equal(ql_qp_post_send(a->ctl, &wr, &bad), 0);
	for (int i = 0; i < 5000000 && n == 0; i++) {
		n = ql_cq_poll(a->cq, 1, &wc);
		if (n == 1 && wc.wr_id != 1)
			n = 0;
	}
	assert_int_equal(n, 1);
	return (int)wc.status;
}

/* Client B knows client A's ack ring (address and rkey: read from A's
 * hello here, as an attacker who guessed them) and writes A's next ack
 * into it from its own QP. Each connection has its own protection domain,
 * so B's QP gets a remote access error, nothing lands in A's ring (no ack
 * taken, no violation), and A's own ack then works. */
static void test_cross_client_rkey(void **state)
{
	struct ql_ep_server_stats st0, st1;
	struct raw a, b;
	uint32_t id;
	int status;

	(void)state;
	raw_open(&a);
	raw_open(&b);
	id = describe(&a, QL_EP_WRITE, "/data");
	(void)describe(&b, QL_EP_WRITE, "/data");
	stats(&st0);
	status = write_as(&b, a.srv.vaddr, a.srv.rkey, ql_epa_word(1, id, 0, 1));
	assert_int_equal(status, IBV_WC_REM_ACCESS_ERR);
	usleep(50000);
	stats(&st1);
	assert_int_equal(st1.acks, st0.acks);
	assert_int_equal(st1.violations, st0.violations);
	/* a wrong ack would have closed A: its own is taken */
	ring_write(&a, 0, ql_epa_word(1, id, 0, 1));
	for (int i = 0; i < 100 && st1.acks < st0.acks + 1; i++) {
		usleep(10000);
		stats(&st1);
	}
	assert_int_equal(st1.acks, st0.acks + 1);
	assert_int_equal(st1.violations, st0.violations);
	raw_close(&b);
	raw_close(&a);
	expect_serving();
}

static void test_bad_hellos(void **state)
{
	struct ql_ep_server_stats st0, st1;
	int fd;
	char b[256];
	ssize_t n;

	(void)state;
	stats(&st0);
	/* not a hello */
	assert_int_equal(ql__ep_connect(server.addr, 5000, &fd), 0);
	assert_int_equal(send(fd, "GET / HTTP/1.0\n\n\n", 17, 0), 17);
	n = recv_wait(fd, b, sizeof(b) - 1);
	assert_true(n > 0);
	b[n] = '\0';
	assert_non_null(strstr(b, "QLEP/1 ERR"));
	close(fd);
	/* a hello never finished: the server gives up (handshake_ms 300) */
	assert_int_equal(ql__ep_connect(server.addr, 5000, &fd), 0);
	assert_int_equal(send(fd, "QLEP/1\n", 7, 0), 7);
	n = recv_wait(fd, b, sizeof(b) - 1);
	assert_true(n > 0);
	b[n] = '\0';
	assert_non_null(strstr(b, "hello not finished"));
	close(fd);
	/* too long */
	assert_int_equal(ql__ep_connect(server.addr, 5000, &fd), 0);
	memset(b, 'x', sizeof(b));
	for (int i = 0; i < 8; i++)
		send(fd, b, sizeof(b), MSG_NOSIGNAL);
	close(fd);
	/* silent, then gone */
	assert_int_equal(ql__ep_connect(server.addr, 5000, &fd), 0);
	close(fd);
	for (int i = 0; i < 100; i++) {
		stats(&st1);
		if (st1.conns_refused >= st0.conns_refused + 4)
			break;
		usleep(20000);
	}
	assert_true(st1.conns_refused >= st0.conns_refused + 4);
	assert_int_equal(st1.violations, st0.violations);
	expect_serving();
}

/* Children that are killed: in a stream of 1 MiB writes and reads, and
 * after a send request was granted but before its data. */
static int child_stream(int wfd)
{
	struct ql_ep_client *c;
	uint8_t *buf;

	if (ql_ep_client_connect(dev_cli, server.addr, &c))
		return 1;
	buf = ql_ep_client_alloc(c, EPT_DATA_SIZE);
	if (!buf)
		return 2;
	for (long k = 0;; k++) {
		if (ql_ep_write(c, "/data", buf, EPT_DATA_SIZE) ||
		    ql_ep_read(c, "/data", buf, EPT_DATA_SIZE))
			return 3;
		if (k == 3 && write(wfd, "g", 1) != 1)
			return 4;
	}
}

static int child_send_granted(int wfd)
{
	struct raw r;

	raw_open(&r);
	describe(&r, QL_EP_SEND, "/msg");
	if (write(wfd, "g", 1) != 1)
		return 4;
	pause();
	return 0;
}

static void kill_case(int (*child)(int wfd))
{
	struct ql_ep_server_stats st0, st1;
	int p[2], status;
	char g;
	pid_t pid;

	stats(&st0);
	assert_int_equal(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		_exit(child(p[1]));
	}
	close(p[1]);
	assert_int_equal(read(p[0], &g, 1), 1);
	close(p[0]);
	usleep(2000); /* mid-transfer */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	expect_serving(); /* also: the killed connection is gone */
	stats(&st1);
	assert_true(st1.conns_closed > st0.conns_closed);
	assert_int_equal(st1.violations, st0.violations);
}

static void test_killed_mid_transfer(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++)
		kill_case(child_stream);
	/* its send buffer reservation dies with it: others can send */
	kill_case(child_send_granted);
}

static int setup(void **state)
{
	(void)state;
	ept_server_start_unix(&server, dev_srv, "epth", 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return ept_server_stop(&server);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_ring_rules),
		cmocka_unit_test(test_bad_hellos),
		cmocka_unit_test(test_cross_client_rkey),
		cmocka_unit_test(test_killed_mid_transfer),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
