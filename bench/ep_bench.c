/* SPDX-License-Identifier: MIT */
/*
 * qlink-bench-ep: the endpoint service's latency per operation and buffer
 * size against the raw verbs operation on the same provider
 * (docs/benchmarks.md, "Endpoint service").
 *
 * Three processes: this client (cpu 0), an endpoint server (cpu 1, no
 * handler but the receive's) and a raw verbs peer (cpu 1 as well, only
 * re-posting receives and answering pings) on the same device kind; each
 * of the two busy-polls while used and naps after 200 us idle, so that
 * they share cpu 1 by turns. Per
 * size, blocks of ep and raw iterations alternate (the host's placement of
 * the two vCPUs moves every figure; only ratios taken together compare):
 *
 *   write  ql_ep_write (cached: WRITE + ACK)   vs  WRITE, signaled, polled
 *   read   ql_ep_read  (cached: READ + ACK)    vs  READ, signaled, polled
 *   send   ql_ep_send  (request, reply, SEND)  vs  SEND into a posted receive
 *   recv   ql_ep_recv  (request, reply + data) vs  8-byte SEND, SEND of size back
 *
 * and for write/read, raw+ack: the raw operation with an 8-byte WRITE
 * chained after it (what the service's acknowledgement costs at least).
 *
 * Each figure is the median of per-call times (clock_gettime), in ns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qlink/clock.h"
#include "qlink/endpoint.h"
#include "qlink/error.h"
#include "qlink/verbs.h"

#define MAXSZ (4u << 20)
#define RAW_RECVS 64

static const char *srv_dev = "soft+shm://qlbench-eps";
static const char *raw_dev = "soft+shm://qlbench-epr";
static const char *cli_dev = "soft+shm://qlbench-epc";
static const char *raw_cli_dev; /* the client's raw device; NULL: cli_dev */
static int srv_cpu = 1, cli_cpu = 0;

static void die(const char *what, int err)
{
	fprintf(stderr, "qlink-bench-ep: %s: %s (%s)\n", what, ql_strerror(err), ql_error_detail());
	exit(1);
}

/* ---- the endpoint server ------------------------------------------------- */

static volatile int stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int answer_recv(struct ql_ep_call *call, void *arg)
{
	(void)arg;
	/* what the client asked for (its capacity): the size under test */
	return call->len <= call->size ? 0 : -EMSGSIZE;
}

static int server_main(int wfd, const char *addr)
{
	/* busy-polls while served, naps after 200 us idle: it shares its cpu
	 * with the raw peer, whose blocks alternate with the server's */
	struct ql_ep_server_opts o = { .device = srv_dev, .listen = addr, .idle_us = 200 };
	struct ql_ep_server *srv;
	struct ql_ep_spec *spec;
	int ret;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGTERM, on_term);
	ql_cpu_pin(srv_cpu);
	if (ql_ep_spec_create(&spec) || ql_ep_spec_add(spec, "/b", QL_EP_WRITE, MAXSZ) ||
	    ql_ep_spec_add(spec, "/b", QL_EP_READ, MAXSZ) ||
	    ql_ep_spec_add(spec, "/b", QL_EP_SEND, MAXSZ) ||
	    ql_ep_spec_add(spec, "/b", QL_EP_RECEIVE, MAXSZ))
		return 1;
	ret = ql_ep_server_create(spec, &o, &srv);
	if (ret)
		die("server", ret);
	ql_ep_server_handle(srv, "/b", QL_EP_RECEIVE, answer_recv, NULL);
	if (write(wfd, "r", 1) != 1)
		return 1;
	close(wfd);
	ret = ql_ep_server_run(srv, &stop);
	ql_ep_server_destroy(srv);
	ql_ep_spec_free(spec);
	return ret ? 1 : 0;
}

/* ---- raw verbs ----------------------------------------------------------- */

struct raw {
	int done[2]; /* completions seen and not yet waited for: send, recv */
	struct ql_device *dev;
	struct ql_pd *pd;
	struct ql_cq *cq;
	struct ql_qp *qp;
	uint8_t *buf;
	struct ql_mr *mr;
};

static void raw_open(struct raw *r, const char *uri)
{
	struct ql_qp_init_attr a = { 0 };
	int ret;

	if ((ret = ql_device_open(uri, &r->dev)) || (ret = ql_pd_alloc(r->dev, &r->pd)) ||
	    (ret = ql_cq_create(r->dev, 256, &r->cq)) ||
	    (ret = ql_pd_mem_alloc(r->pd, MAXSZ, (void **)&r->buf)) ||
	    (ret = ql_mr_reg(r->pd, r->buf, MAXSZ,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ,
			     &r->mr)))
		die("raw setup", ret);
	a.send_cq = a.recv_cq = r->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 64;
	a.cap.max_recv_wr = RAW_RECVS;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	if ((ret = ql_qp_create(r->pd, &a, &r->qp)))
		die("raw qp", ret);
}

static void raw_recv(struct raw *r, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)r->buf, MAXSZ, ql_mr_lkey(r->mr) };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ql_qp_post_recv(r->qp, &wr, &bad))
		die("post recv", -EIO);
}

static void raw_post(struct raw *r, enum ibv_wr_opcode op, size_t len, uint64_t raddr,
		     uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)r->buf, (uint32_t)len, ql_mr_lkey(r->mr) };
	struct ibv_send_wr wr = { .wr_id = 1,
				  .sg_list = len ? &sge : NULL,
				  .num_sge = len ? 1 : 0,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ql_qp_post_send(r->qp, &wr, &bad))
		die("post send", -EIO);
}

/* Poll one completion of the given direction (send: wr_id 1). */
static struct ibv_wc raw_wait(struct raw *r, int recv)
{
	struct ibv_wc wc;
	uint64_t end = ql_clock_ns() + 5000000000ull;

	for (;;) {
		int n = ql_cq_poll(r->cq, 1, &wc);

		if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) {
			fprintf(stderr, "qlink-bench-ep: raw completion: %s\n",
				n < 0 ? "CQ failed" : ibv_wc_status_str(wc.status));
			exit(1);
		}
		if (n == 1)
			r->done[wc.wr_id != 1]++;
		if (r->done[recv]) {
			r->done[recv]--;
			return wc;
		}
		if (ql_clock_ns() > end) {
			fprintf(stderr, "qlink-bench-ep: raw peer timed out\n");
			exit(1);
		}
	}
}

/* The raw peer: keeps receives posted; an 8-byte message whose first word
 * is a size asks for a SEND of that many bytes back. */
static int peer_main(int rfd, int wfd)
{
	struct raw r = { 0 };
	struct ql_conn_params me, them;
	char line[512];
	ssize_t n;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	ql_cpu_pin(srv_cpu);
	raw_open(&r, raw_dev);
	ql_qp_local_params(r.qp, &me);
	me.vaddr = (uintptr_t)r.buf;
	me.rkey = ql_mr_rkey(r.mr);
	me.length = MAXSZ;
	ql_conn_params_format(&me, line, sizeof(line));
	if (write(wfd, line, strlen(line) + 1) < 0)
		return 1;
	n = read(rfd, line, sizeof(line) - 1);
	if (n <= 0)
		return 1;
	line[n] = '\0';
	if (ql_conn_params_parse(line, &them) || ql_qp_connect(r.qp, &them, NULL))
		return 1;
	for (int i = 0; i < RAW_RECVS; i++)
		raw_recv(&r, 100);
	if (write(wfd, "r", 1) != 1)
		return 1;
	for (uint64_t last = ql_clock_ns();;) {
		struct ibv_wc wc;
		int k = ql_cq_poll(r.cq, 1, &wc);

		if (k < 0 || (k == 1 && wc.status != IBV_WC_SUCCESS))
			return 0; /* the client went away */
		if (k == 0) {
			/* idle (the endpoint server's turn): leave it the cpu */
			if (ql_clock_ns() - last > 200000)
				usleep(50);
			continue;
		}
		last = ql_clock_ns();
		if (wc.wr_id == 1)
			continue;
		raw_recv(&r, 100);
		if (wc.byte_len == 8) {
			uint64_t want;

			memcpy(&want, r.buf, 8);
			raw_post(&r, IBV_WR_SEND, want <= MAXSZ ? (size_t)want : 0, 0, 0);
		}
	}
}

/* ---- the client ------------------------------------------------------------ */

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[n / 2];
}

enum op { OP_WRITE, OP_READ, OP_SEND, OP_RECV, OP_N };
static const char *const op_name[] = { "write", "read", "send", "recv" };

static void ep_once(struct ql_ep_client *c, enum op op, void *buf, size_t sz)
{
	long r = 0;

	switch (op) {
	case OP_WRITE:
		r = ql_ep_write(c, "/b", buf, sz);
		break;
	case OP_READ:
		r = ql_ep_read(c, "/b", buf, sz);
		break;
	case OP_SEND:
		r = ql_ep_send(c, "/b", buf, sz);
		break;
	case OP_RECV:
		r = ql_ep_recv(c, "/b", buf, sz);
		r = r == (long)sz ? 0 : r < 0 ? r : -EIO;
		break;
	default:
		break;
	}
	if (r)
		die(op_name[op], (int)r);
}

/* The raw operation and an 8-byte WRITE after it, posted together, the
 * second signaled: what the service's ack adds, at its least. */
static void raw2_once(struct raw *r, enum op op, size_t sz, const struct ql_conn_params *peer)
{
	struct ibv_sge sge = { (uintptr_t)r->buf, (uint32_t)sz, ql_mr_lkey(r->mr) };
	struct ibv_sge sge2 = { (uintptr_t)r->buf + MAXSZ - 8, 8, ql_mr_lkey(r->mr) };
	struct ibv_send_wr w2 = { .wr_id = 1,
				  .sg_list = &sge2,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr w1 = { .wr_id = 2,
				  .next = &w2,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = op == OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ },
			   *bad;

	w1.wr.rdma.remote_addr = peer->vaddr;
	w1.wr.rdma.rkey = peer->rkey;
	w2.wr.rdma.remote_addr = peer->vaddr + MAXSZ - 8;
	w2.wr.rdma.rkey = peer->rkey;
	if (op == OP_READ)
		w2.send_flags |= IBV_SEND_FENCE;
	if (ql_qp_post_send(r->qp, &w1, &bad))
		die("post send", -EIO);
	raw_wait(r, 0);
}

static void raw_once(struct raw *r, enum op op, size_t sz, const struct ql_conn_params *peer)
{
	switch (op) {
	case OP_WRITE:
	case OP_READ:
		raw_post(r, op == OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, sz, peer->vaddr,
			 peer->rkey);
		raw_wait(r, 0);
		break;
	case OP_SEND:
		/* 8 bytes would be a ping: send 9 then */
		raw_post(r, IBV_WR_SEND, sz == 8 ? 9 : sz, 0, 0);
		raw_wait(r, 0);
		break;
	case OP_RECV: {
		uint64_t want = sz;

		memcpy(r->buf, &want, 8);
		raw_post(r, IBV_WR_SEND, 8, 0, 0);
		raw_wait(r, 0);
		raw_wait(r, 1);
		raw_recv(r, 100);
		break;
	}
	default:
		break;
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: qlink-bench-ep [--sizes N,N,...] [--iters N] [--ops write,read,...]\n"
		   "                      [--server-cpu N] [--client-cpu N]\n"
		   "                      [--server-device URI] [--peer-device URI]\n"
		   "                      [--client-device URI] [--raw-client-device URI]\n"
		   "Endpoint operations vs raw verbs, per buffer size (default sizes\n"
		   "64 B .. 4 MiB in steps of 4x; iters: the most per size, default 20000,\n"
		   "fewer for large sizes). Devices: the endpoint server's, the raw peer's\n"
		   "and the client's (default soft+shm://qlbench-eps, -epr, -epc; e.g.\n"
		   "ibv://rxe0, ibv://rxe0, ibv://rxe1); the client's raw QP opens\n"
		   "--raw-client-device (default: the client's; soft+udp needs another IP).\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "sizes", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'i' },
		{ "ops", required_argument, NULL, 'o' },
		{ "server-cpu", required_argument, NULL, 'S' },
		{ "server-device", required_argument, NULL, 'A' },
		{ "peer-device", required_argument, NULL, 'P' },
		{ "client-device", required_argument, NULL, 'B' },
		{ "raw-client-device", required_argument, NULL, 'R' },
		{ "client-cpu", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	size_t sizes[32] = { 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304 };
	int nsizes = 9, iters = 20000, ops = 0xf, c;
	int p2c[2], c2p[2], sp[2];
	char addr[128], line[512];
	struct ql_conn_params me, peer;
	struct ql_ep_client *cl;
	struct raw r = { 0 };
	pid_t spid, ppid;
	uint8_t *buf;
	uint64_t *tep, *traw;
	ssize_t n;
	int ret;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's': {
			char *save = NULL, *tok, *copy = strdup(optarg);

			nsizes = 0;
			for (tok = strtok_r(copy, ",", &save); tok && nsizes < 32;
			     tok = strtok_r(NULL, ",", &save)) {
				unsigned long v = strtoul(tok, NULL, 0);

				if (v == 0 || v > MAXSZ) {
					fprintf(stderr, "qlink-bench-ep: size %s: 1..%u\n", tok,
						MAXSZ);
					return 2;
				}
				sizes[nsizes++] = v;
			}
			free(copy);
			break;
		}
		case 'i':
			iters = atoi(optarg);
			if (iters < 10)
				iters = 10;
			break;
		case 'o':
			ops = 0;
			for (int k = 0; k < OP_N; k++)
				if (strstr(optarg, op_name[k]))
					ops |= 1 << k;
			break;
		case 'S':
			srv_cpu = atoi(optarg);
			break;
		case 'A':
			srv_dev = optarg;
			break;
		case 'P':
			raw_dev = optarg;
			break;
		case 'B':
			cli_dev = optarg;
			break;
		case 'R':
			raw_cli_dev = optarg;
			break;
		case 'C':
			cli_cpu = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	snprintf(addr, sizeof(addr), "unix:/tmp/qlink-bench-ep-%d.sock", (int)getpid());
	if (pipe(sp) || pipe(p2c) || pipe(c2p))
		return 1;
	fflush(NULL);
	spid = fork();
	if (spid == 0) {
		close(sp[0]);
		_exit(server_main(sp[1], addr));
	}
	close(sp[1]);
	if (read(sp[0], line, 1) != 1) {
		fprintf(stderr, "qlink-bench-ep: the server did not start\n");
		return 1;
	}
	ppid = fork();
	if (ppid == 0)
		_exit(peer_main(c2p[0], p2c[1]));
	ql_cpu_pin(cli_cpu);
	ret = ql_ep_client_connect(cli_dev, addr, &cl);
	if (ret)
		die("connect", ret);
	buf = ql_ep_client_alloc(cl, MAXSZ);
	raw_open(&r, raw_cli_dev ? raw_cli_dev : cli_dev);
	n = read(p2c[0], line, sizeof(line) - 1);
	if (n <= 0)
		return 1;
	line[n] = '\0';
	if (ql_conn_params_parse(line, &peer) || ql_qp_connect(r.qp, &peer, NULL))
		die("raw connect", -EIO);
	ql_qp_local_params(r.qp, &me);
	ql_conn_params_format(&me, line, sizeof(line));
	if (write(c2p[1], line, strlen(line) + 1) < 0 || read(p2c[0], line, 1) != 1)
		return 1;
	for (int i = 0; i < 4; i++)
		raw_recv(&r, 100);
	tep = calloc((size_t)iters, sizeof(*tep));
	traw = calloc((size_t)iters, sizeof(*traw));
	if (!buf || !tep || !traw)
		return 1;
	printf("%-6s %9s %7s %10s %10s %7s %12s\n", "op", "size", "iters", "ep_ns", "raw_ns",
	       "ratio", "raw+ack_ns");
	for (int s = 0; s < nsizes; s++) {
		size_t sz = sizes[s];
		int it = (int)(((uint64_t)iters * 4096) / (sz < 4096 ? 4096 : sz));

		if (it < 20)
			it = 20;
		if (it > iters)
			it = iters;
		for (int op = 0; op < OP_N; op++) {
			int ne = 0, nr = 0, block = it / 5 ? it / 5 : 1;
			uint64_t me_, mr_, m2;

			if (!(ops & (1 << op)))
				continue;
			ep_once(cl, (enum op)op, buf, sz); /* descriptors, warm-up */
			raw_once(&r, (enum op)op, sz, &peer);
			while (ne < it || nr < it) {
				for (int k = 0; k < block && ne < it; k++) {
					uint64_t t0 = ql_clock_ns();

					ep_once(cl, (enum op)op, buf, sz);
					tep[ne++] = ql_clock_ns() - t0;
				}
				for (int k = 0; k < block && nr < it; k++) {
					uint64_t t0 = ql_clock_ns();

					raw_once(&r, (enum op)op, sz, &peer);
					traw[nr++] = ql_clock_ns() - t0;
				}
			}
			me_ = median(tep, ne);
			mr_ = median(traw, nr);
			m2 = 0;
			if (op == OP_WRITE || op == OP_READ) {
				for (int k = 0; k < it; k++) {
					uint64_t t0 = ql_clock_ns();

					raw2_once(&r, (enum op)op, sz, &peer);
					traw[k] = ql_clock_ns() - t0;
				}
				m2 = median(traw, it);
			}
			printf("%-6s %9zu %7d %10llu %10llu %7.2f %12llu\n", op_name[op], sz, it,
			       (unsigned long long)me_, (unsigned long long)mr_,
			       mr_ ? (double)me_ / (double)mr_ : 0.0, (unsigned long long)m2);
			fflush(stdout);
		}
	}
	ql_ep_client_close(cl);
	kill(spid, SIGTERM);
	kill(ppid, SIGTERM);
	waitpid(spid, NULL, 0);
	waitpid(ppid, NULL, 0);
	return 0;
}
