/* SPDX-License-Identifier: MIT */
/*
 * verbs_fixture: shared setup for the verbs tests.
 *
 * Every semantic test runs once per device URI (soft://loop and
 * soft+shm://qltest): the group setup puts a struct vt_param in cmocka's
 * group state, and the per-test setups below turn it into a connected pair of
 * QPs (struct vt_pair), each end with its own device, PD, CQs, QP and a
 * ql_mem_alloc buffer registered with every access right.
 *
 * Real devices: with QLINK_TEST_IBV_A=ibv://DEV (and QLINK_TEST_IBV_B=
 * ibv://DEV2 for the second end; default: the same device) the tests run a
 * third time, end a on device A and end b on device B (tests/rxe/run.sh does
 * this with Linux Soft-RoCE, ibv://rxe0 and ibv://rxe1). QLINK_TEST_SOFT=0
 * leaves the soft groups out. What only the soft provider promises
 * (ql_device_counters, EBUSY for MRs named by posted WRs, exact send-queue
 * accounting, CQ overrun reporting, the no-syscall hot path) is skipped
 * there with the reason printed (VT_SOFT_ONLY); where a real device may
 * legitimately differ, the test says which behaviour it accepts.
 */
#ifndef QL_TESTS_VERBS_FIXTURE_H
#define QL_TESTS_VERBS_FIXTURE_H

/* cmocka.h needs these first */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <qlink/error.h>
#include <qlink/verbs.h>

#define VT_TIMEOUT_MS 5000
#define VT_BUF_LEN (64 * 1024)
#define VT_ACCESS_ALL                                                                \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define VT_ACCESS_REMOTE \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* One device kind the tests are parametrized over. */
struct vt_param {
	const char *name;  /* "loop", "shm" or "ibv" */
	const char *uri;   /* the base URI (ibv: end a's device) */
	const char *uri_b; /* ibv: end b's device (NULL: the soft kinds) */
	const char *wire;  /* what ql_device_query reports as wire (NULL: any) */
	bool shm;
	bool ibv; /* a real RDMA device through libibverbs */
	bool udp; /* soft+udp: RoCEv2 over UDP on loopback */
};

extern const struct vt_param vt_params[];
#define VT_NPARAMS 3

int vt_group_loop(void **state);
int vt_group_shm(void **state);
int vt_group_udp(void **state);
int vt_group_ibv(void **state);

/* The ibv parameter from QLINK_TEST_IBV_A/B, or NULL when not set. */
const struct vt_param *vt_ibv_param(void);
/* Whether the soft groups run (QLINK_TEST_SOFT is not "0"). */
bool vt_soft_enabled(void);
/* Whether the soft+udp group runs (also QLINK_TEST_UDP is not "0"). */
bool vt_udp_enabled(void);

/* Run one test table once per URI; evaluates to the number of failures. */
int vt_run_per_uri(const struct CMUnitTest *tests, size_t n);
#define VT_RUN_PER_URI(tests) vt_run_per_uri(tests, sizeof(tests) / sizeof((tests)[0]))

/* Skip the running test on a real device, printing why: what it checks is
 * a promise of the soft provider only. */
#define VT_SOFT_ONLY(p, why)                                                                 \
	do {                                                                                 \
		if ((p)->ibv) {                                                              \
			print_message("[     SKIP ] %s: soft provider only: %s\n", (p)->uri, \
				      (why));                                                \
			skip();                                                              \
		}                                                                            \
	} while (0)

/* Skip the running test on soft+udp, printing why: what it checks is a
 * promise of the soft provider's loop and shm wires only (the report says
 * which tests carry it). */
#define VT_NOT_UDP(p, why)                                                                         \
	do {                                                                                       \
		if ((p)->udp) {                                                                    \
			print_message("[     SKIP ] %s: soft loop/shm wires only: %s\n", (p)->uri, \
				      (why));                                                      \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* Say (on the test's output) that a real device took a documented
 * alternative the test accepts. */
void vt_note(const struct vt_param *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The URI the n-th device of a test opens: soft://loop, or a soft+shm name
 * unique to this process (so that parallel ctest runs do not collide), or
 * device A of the ibv pair, or soft+udp://127.X.Y.Z:PORT with X.Y and PORT
 * from the pid and Z a sequence number (every device of a process on one
 * port, as soft+udp peers must be; distinct processes on distinct
 * addresses, so that ctest -j runs do not collide). vt_dev_open_b opens
 * end b's device (ibv: B). */
void vt_dev_uri(const struct vt_param *p, char *buf, size_t len);
int vt_dev_open(const struct vt_param *p, struct ql_device **dev);
int vt_dev_open_b(const struct vt_param *p, struct ql_device **dev);

/* ---- connected pairs ------------------------------------------------ */

struct vt_end {
	struct ql_device *dev;
	struct ql_device_attr attr;
	struct ql_pd *pd;
	struct ql_cq *scq;
	struct ql_cq *rcq;
	struct ql_qp *qp;
	struct ql_qp_init_attr init; /* granted caps after create */
	uint8_t *buf;		     /* ql_mem_alloc(VT_BUF_LEN) */
	size_t len;
	struct ql_mr *mr;	      /* buf, VT_ACCESS_ALL */
	struct ql_conn_params params; /* ql_qp_local_params + the MR */
};

struct vt_opts {
	enum ibv_qp_type type;
	int cqe;	      /* 0: 256 */
	uint32_t max_send_wr; /* 0: 64 */
	uint32_t max_recv_wr; /* 0: 64 */
	uint32_t max_sge;     /* 0: 4 */
	uint32_t max_inline;  /* 0: 64 */
	int sq_sig_all;
	bool no_connect;		  /* leave both QPs in RESET */
	bool have_conn;			  /* use conn_a/conn_b instead of the defaults */
	struct ql_qp_connect_opts conn_a; /* what a is connected with */
	struct ql_qp_connect_opts conn_b;
	const char *query_b; /* soft+udp: end b's device URI query ("k=v&...") */
};

struct vt_pair {
	const struct vt_param *param;
	struct vt_opts opts;
	struct vt_end a;
	struct vt_end b;
};

/* Build a pair per opts. Returns 0 or a negative errno (after cleanup). */
int vt_pair_create(const struct vt_param *p, const struct vt_opts *opts, struct vt_pair **out);
void vt_pair_destroy(struct vt_pair *pr);
/* Connect x towards y (x's side only). */
int vt_end_connect(struct vt_end *x, const struct vt_end *y, const struct ql_qp_connect_opts *o);

/* cmocka setups: *state is a struct vt_param on entry, a struct vt_pair after. */
int vt_setup_rc(void **state);
int vt_setup_uc(void **state);
int vt_setup_rc_reset(void **state); /* RC, both QPs left in RESET */
int vt_setup_uc_reset(void **state);
int vt_teardown(void **state);

/* ---- a node and its RC QPs (the multi-process tests) ------------------ */

/* One process's side: its device, a PD, and a ql_mem_alloc buffer
 * registered with every access right. */
struct vt_node {
	struct ql_device *dev;
	struct ql_pd *pd;
	uint8_t *buf;
	size_t len;
	struct ql_mr *mr;
};

/* An RC QP of a node with its own send and receive CQs; local carries the
 * node's buffer and rkey, remote is what the peer sent. */
struct vt_node_qp {
	struct ql_cq *scq, *rcq;
	struct ql_qp *qp;
	struct ql_conn_params local, remote;
};

/* The node on dev, opened by the caller (vt_node_close closes it), with a
 * len-byte buffer. 0 or a negative errno (vt_node_close cleans up). */
int vt_node_open(struct vt_node *n, struct ql_device *dev, size_t len);
void vt_node_close(struct vt_node *n);
/* An RC QP on n: CQs of cqe entries, max_wr WRs of 2 SGEs each way,
 * max_inline inline bytes. 0 or a negative errno (vt_node_qp_destroy
 * cleans up). */
int vt_node_qp_create(struct vt_node *n, struct vt_node_qp *q, int cqe, uint32_t max_wr,
		      uint32_t max_inline);
void vt_node_qp_destroy(struct vt_node_qp *q);

/* ---- manual transitions --------------------------------------------- */

int vt_modify_init(struct ql_qp *qp, unsigned int access);
int vt_modify_rtr(struct ql_qp *qp, enum ibv_qp_type type, const struct ql_conn_params *remote);
int vt_modify_rts(struct ql_qp *qp, enum ibv_qp_type type);
int vt_modify_state(struct ql_qp *qp, enum ibv_qp_state s);
/* Fill the attributes and required mask of a transition. */
int vt_attr_init(struct ibv_qp_attr *a, unsigned int access);
int vt_attr_rtr(struct ibv_qp_attr *a, enum ibv_qp_type type, const struct ql_conn_params *remote);
int vt_attr_rts(struct ibv_qp_attr *a, enum ibv_qp_type type);

/* ---- posting -------------------------------------------------------- */

int vt_post_write(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		  uint64_t raddr, uint32_t rkey, unsigned int flags);
int vt_post_write_imm(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		      uint64_t raddr, uint32_t rkey, uint32_t imm_be, unsigned int flags);
int vt_post_read(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		 uint64_t raddr, uint32_t rkey, unsigned int flags);
int vt_post_send(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		 unsigned int flags);
int vt_post_send_imm(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey,
		     uint32_t imm_be, unsigned int flags);
int vt_post_atomic(struct ql_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *laddr,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		   unsigned int flags);
int vt_post_recv(struct ql_qp *qp, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey);

/* ---- completions ---------------------------------------------------- */

uint64_t vt_now_ns(void);
/* Poll until one completion arrives or timeout_ms passes: 1, 0 on timeout,
 * or the negative errno ql_cq_poll returned. */
int vt_poll_one(struct ql_cq *cq, struct ibv_wc *wc, int timeout_ms);
/* Poll for ms milliseconds; the number of completions seen (stored in wc,
 * at most max), or a negative errno. */
int vt_poll_for(struct ql_cq *cq, struct ibv_wc *wc, int max, int ms);

/* Wait for a completion and check id, status (and opcode unless -1; the
 * opcode of a completion in error is undefined, as are all its fields but
 * wr_id, status, qp_num and vendor_err, so it is checked on success only). */
#define vt_expect_wc(cq, wcp, id, st, op)                                                     \
	do {                                                                                  \
		int vt_rc_ = vt_poll_one((cq), (wcp), VT_TIMEOUT_MS);                         \
		if (vt_rc_ != 1)                                                              \
			print_error("no completion within %d ms (poll: %d)\n", VT_TIMEOUT_MS, \
				    vt_rc_);                                                  \
		assert_int_equal(vt_rc_, 1);                                                  \
		if ((wcp)->status != (st))                                                    \
			print_error("wc status %s (%d), expected %s\n",                       \
				    ibv_wc_status_str((wcp)->status), (wcp)->status,          \
				    ibv_wc_status_str(st));                                   \
		assert_int_equal((wcp)->status, (st));                                        \
		assert_int_equal((wcp)->wr_id, (id));                                         \
		if ((int)(op) != -1 && (st) == IBV_WC_SUCCESS)                                \
			assert_int_equal((wcp)->opcode, (op));                                \
	} while (0)

/* The same, where a real device may take a documented alternative: status
 * st, or on an ibv device also alt (docs/ibv-provider.md says why; the
 * output notes it). Evaluates to true when the alternative was taken. */
#define vt_expect_wc_alt(p, cq, wcp, id, st, alt, why)                                        \
	({                                                                                    \
		int vt_rc_ = vt_poll_one((cq), (wcp), VT_TIMEOUT_MS);                         \
		bool vt_alt_ = false;                                                         \
		if (vt_rc_ != 1)                                                              \
			print_error("no completion within %d ms (poll: %d)\n", VT_TIMEOUT_MS, \
				    vt_rc_);                                                  \
		assert_int_equal(vt_rc_, 1);                                                  \
		if ((p)->ibv && (wcp)->status == (alt) && (alt) != (st)) {                    \
			vt_note((p), "%s: %s, where the IB spec has %s", (why),               \
				ibv_wc_status_str(alt), ibv_wc_status_str(st));               \
			vt_alt_ = true;                                                       \
		} else {                                                                      \
			if ((wcp)->status != (st))                                            \
				print_error("wc status %s (%d), expected %s\n",               \
					    ibv_wc_status_str((wcp)->status), (wcp)->status,  \
					    ibv_wc_status_str(st));                           \
			assert_int_equal((wcp)->status, (st));                                \
		}                                                                             \
		assert_int_equal((wcp)->wr_id, (id));                                         \
		vt_alt_;                                                                      \
	})

/* QP state s, or on an ibv device also the documented alternative alt
 * (noted). Evaluates to true when the alternative was found. */
#define vt_state_alt(p, qp, s, alt, why)                                                       \
	({                                                                                     \
		enum ibv_qp_state vt_s_ = ql_qp_state(qp);                                     \
		bool vt_alt_ = false;                                                          \
		if ((p)->ibv && vt_s_ == (alt) && (alt) != (s)) {                              \
			vt_note((p), "%s: QP in %s, where the IB spec has %s", (why),          \
				vt_state_str(alt), vt_state_str(s));                           \
			vt_alt_ = true;                                                        \
		} else {                                                                       \
			if (vt_s_ != (s))                                                      \
				print_error("QP state %s, expected %s\n", vt_state_str(vt_s_), \
					    vt_state_str(s));                                  \
			assert_int_equal(vt_s_, (s));                                          \
		}                                                                              \
		vt_alt_;                                                                       \
	})

/* No completion shows up within ms milliseconds. */
#define vt_expect_none(cq, ms)                                           \
	do {                                                             \
		struct ibv_wc vt_wc_[4];                                 \
		assert_int_equal(vt_poll_for((cq), vt_wc_, 4, (ms)), 0); \
	} while (0)

const char *vt_state_str(enum ibv_qp_state s);
/* soft+udp: wait until the pair's devices are quiet (a UC message that
 * completed at the requester has been handled by the responder); nothing
 * elsewhere. vt_counters does this by itself on a soft+udp device. */
/* ql_device_progress on every device of the fixture's open ends and nodes
 * (soft+udp in caller progress mode: one thread plays both ends; the
 * fixture's waits call it) */
void vt_progress_all(void);
void vt_settle(const struct vt_pair *pr);
void vt_udp_settle(struct ql_device *dev);
/* ql_device_counters of a device; all zero on a real device, which keeps
 * no such counters (check vt_has_counters before comparing). */
void vt_counters(struct ql_device *dev, struct ql_device_counters *c);
bool vt_has_counters(const struct vt_param *p);
void vt_fill(void *buf, size_t len, uint32_t seed);
bool vt_check(const void *buf, size_t len, uint32_t seed);

#endif
