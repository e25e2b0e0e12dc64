/* SPDX-License-Identifier: MIT */
/*
 * SDR between two processes (soft+shm, soft+udp; ibv with QLINK_TEST_IBV_A):
 * a fork()ed child is the sender, the parent the receiver; the connection
 * parameters travel as text through pipes (ql_sdr_conn_params_format /
 * parse). Messages from 1 byte to 64 MiB (soft+udp: 8 MiB) arrive
 * byte-identical with every packet accepted exactly once; on soft+udp the
 * same again with 1 % loss, duplication and reordering on the child's data
 * QP (selective repeat), the counters on both sides checked.
 */
#define _GNU_SOURCE
#include "sdr_pair.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const size_t sizes[] = { 1, 4095, 4096, 4097, 100000, 1u << 20, 8u << 20, 64u << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static size_t max_size(const struct vt_param *p)
{
	return p->udp || p->ibv ? (8u << 20) : (64u << 20);
}

static void config(const struct vt_param *p, const char *fault, struct ql_sdr_config *cfg)
{
	ql_sdr_config_default(cfg);
	cfg->max_msg_size = max_size(p);
	cfg->slots = 2;
	/* with faults, a short timer; without, one that a loaded host's
	 * scheduling gaps cannot fire (the clean run counts every packet) */
	cfg->rto_ns = fault ? 10000000ull : 500000000ull;
}

static int put_line(int fd, const char *s)
{
	size_t n = strlen(s);

	return write(fd, s, n) == (ssize_t)n && write(fd, "\n", 1) == 1 ? 0 : -EIO;
}

static int get_line(int fd, char *buf, size_t len, int timeout_ms)
{
	size_t n = 0;

	while (n + 1 < len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char c;

		if (poll(&pfd, 1, timeout_ms) <= 0 || read(fd, &c, 1) != 1)
			return -EIO;
		if (c == '\n')
			break;
		buf[n++] = c;
	}
	buf[n] = 0;
	return 0;
}

/* The sender: every size, SR, then (soft+udp) every size again under
 * faults. Exit status 0 when every send completed with 0. */
static int child(const struct vt_param *p, int rfd, int wfd, const char *fault)
{
	struct ql_sdr_config cfg;
	struct ql_device *dev;
	struct ql_sdr_conn *c;
	struct ql_conn_params d, x;
	char line[1024];
	void *buf;
	struct ql_mr *mr;
	uint32_t seed = 100;

	alarm(240);
	config(p, fault, &cfg);
	if (vt_dev_open_b(p, &dev) || ql_sdr_conn_create(dev, &cfg, &c))
		return 10;
	if (ql_sdr_conn_params_format(c, line, sizeof(line)) < 0 || put_line(wfd, line) ||
	    get_line(rfd, line, sizeof(line), 30000) || ql_sdr_conn_params_parse(line, &d, &x))
		return 11;
	if (ql_sdr_connect(c, &d, &x, 30000))
		return 12;
	if (ql_sdr_buf_alloc(c, max_size(p), &buf, &mr))
		return 13;
	if (fault && ql_qp_fault(ql_sdr_conn_data_qp(c), fault))
		return 14;
	for (size_t i = 0; i < NSIZES; i++) {
		struct ql_sdr_send_opts so = { .rel = QL_SDR_REL_SR };
		struct ql_sdr_send *tx;

		if (sizes[i] > max_size(p))
			continue;
		vt_fill(buf, sizes[i], seed + (uint32_t)i);
		if (ql_sdr_send_post(c, buf, sizes[i], mr, &so, &tx))
			return 20;
		if (ql_sdr_send_wait(c, tx, 200000) != 0)
			return 21;
		ql_sdr_send_release(tx);
	}
	{
		struct ql_sdr_stats st;

		ql_sdr_conn_stats(c, &st);
		snprintf(line, sizeof(line),
			 "sender: %lu sent, %lu retransmitted, %lu timeouts, %lu credit stalls, "
			 "%lu credits reclaimed",
			 (unsigned long)st.pkts_sent, (unsigned long)st.pkts_retransmitted,
			 (unsigned long)st.timeouts, (unsigned long)st.credit_stalls,
			 (unsigned long)st.credits_reclaimed);
		put_line(wfd, line);
	}
	/* stay until the parent is done (it may still ask: ACK_REQ answers) */
	{
		uint64_t end = ql_clock_ns() + 60000000000ull;

		while (get_line(rfd, line, sizeof(line), 0) != 0 && ql_clock_ns() < end)
			ql_sdr_progress(c);
	}
	ql_sdr_buf_free(c, buf, mr);
	ql_sdr_conn_destroy(c);
	ql_device_close(dev);
	return 0;
}

static void run(const struct vt_param *p, const char *fault)
{
	int to_child[2], to_parent[2], st = -1;
	struct ql_sdr_config cfg;
	struct ql_device *dev;
	struct ql_sdr_conn *c;
	struct ql_conn_params d, x;
	struct ql_sdr_stats s0, s1;
	char line[1024];
	uint32_t seed = 100;
	pid_t pid;

	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		_exit(child(p, to_child[0], to_parent[1], fault));
	}
	close(to_child[0]);
	close(to_parent[1]);
	config(p, fault, &cfg);
	assert_int_equal(vt_dev_open(p, &dev), 0);
	assert_int_equal(ql_sdr_conn_create(dev, &cfg, &c), 0);
	assert_int_equal(get_line(to_parent[0], line, sizeof(line), 30000), 0);
	assert_int_equal(ql_sdr_conn_params_parse(line, &d, &x), 0);
	assert_true(ql_sdr_conn_params_format(c, line, sizeof(line)) > 0);
	assert_int_equal(put_line(to_child[1], line), 0);
	assert_int_equal(ql_sdr_accept(c, &d, &x, 30000), 0);
	ql_sdr_conn_stats(c, &s0);
	for (size_t i = 0; i < NSIZES; i++) {
		struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_SR };
		struct ql_sdr_recv *rx;
		uint32_t mtu = ql_sdr_conn_mtu(c), npk;
		int rc;

		if (sizes[i] > max_size(p))
			continue;
		npk = (uint32_t)((sizes[i] + mtu - 1) / mtu);
		assert_int_equal(ql_sdr_recv_post(c, sizes[i], &ro, &rx), 0);
		rc = ql_sdr_recv_wait(c, rx, 200000);
		if (rc)
			print_error("size %zu: %s\n", sizes[i], ql_strerror(rc));
		assert_int_equal(rc, 0);
		assert_true(vt_check(ql_sdr_recv_data(rx), sizes[i], seed + (uint32_t)i));
		assert_int_equal(ql_sdr_recv_bitmap(rx, NULL, 0), npk);
		ql_sdr_conn_stats(c, &s1);
		/* each packet accepted once: the bitmap's bits are the counter's */
		assert_int_equal(s1.pkts_received - s0.pkts_received, npk);
		s0 = s1;
		assert_int_equal(ql_sdr_recv_release(rx), 0);
	}
	ql_sdr_conn_stats(c, &s1);
	{
		struct ql_device_counters dc;

		vt_counters(dev, &dc);
		print_message("  %s%s%s: %lu packets, %lu duplicates, %lu NACKs, %lu late (bad "
			      "id); device: %lu UC drops for want of a receive\n",
			      p->uri, fault ? " " : "", fault ? fault : "",
			      (unsigned long)s1.pkts_received, (unsigned long)s1.pkts_duplicate,
			      (unsigned long)s1.nacks_sent, (unsigned long)s1.drop_bad_id,
			      (unsigned long)dc.uc_drop_no_recv);
	}
	assert_int_equal(get_line(to_parent[0], line, sizeof(line), 30000), 0);
	print_message("  %s\n", line);
	print_message("  receiver refused: %lu bad offset, %lu bad length, %lu stale/bad control\n",
		      (unsigned long)s1.drop_bad_offset, (unsigned long)s1.drop_bad_len,
		      (unsigned long)s1.drop_bad_ctrl);
	/* under faults, late copies of an earlier message (a duplicate, a
	 * retransmission that crossed the ACK) may meet the slot's next
	 * message or none, and a timer's ACK_REQ may cross the ACK: refused
	 * and counted, as they must be; without faults there is none */
	if (!fault)
		assert_int_equal(s1.drop_bad_offset + s1.drop_bad_len + s1.drop_bad_ctrl +
					 s1.drop_bad_id + s1.pkts_duplicate + s1.nacks_sent,
				 0);
	assert_int_equal(put_line(to_child[1], "done"), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(to_child[1]);
	close(to_parent[0]);
	ql_sdr_conn_destroy(c);
	ql_device_close(dev);
}

static void test_mp_clean(void **state)
{
	const struct vt_param *p = *state;

	if (!p->shm && !p->udp && !p->ibv) {
		print_message("[     SKIP ] %s: one process only\n", p->uri);
		skip();
	}
	run(p, NULL);
}

static void test_mp_faults(void **state)
{
	const struct vt_param *p = *state;

	if (!p->udp) {
		print_message("[     SKIP ] %s: fault injection per QP is soft+udp's\n", p->uri);
		skip();
	}
	run(p, "drop=0.01&dup=0.005&reorder=0.02&seed=42");
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN); /* a child that died is reported by its status */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mp_clean),
		cmocka_unit_test(test_mp_faults),
	};

	return VT_RUN_PER_URI(tests);
}
