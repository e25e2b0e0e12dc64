/* SPDX-License-Identifier: MIT */
/*
 * End to end in one process: the VPPU's QEC stream (ql_vppu_qec_run) over
 * a ring client on soft+shm, a daemon with its own dispatcher thread
 * serving the decoder plugin (qlink-qec.so) loaded as qlinkd loads it.
 * - the logical errors through qlink equal the offline decoding of the
 *   same seed bit for bit (count and the per-shot hash), for measurement
 *   outcomes and detection events as input, phenomenological and code
 *   capacity noise, closed loop and paced at 1 MHz; no round lost, every
 *   round decoded, the backlog drained at the end;
 * - a different seed gives different shots (the comparison can fail);
 * - a stream aimed at a decoder the daemon does not have is refused
 *   (-2 on every call), counted as errors with no shot completed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugin/loader.h"
#include "qlink/channel.h"
#include "qlink/daemon.h"
#include "qlink/qec_wire.h"
#include "qlink/ring.h"
#include "qlink/verbs.h"
#include "qlink/vppu.h"

#define CONFIG                                                    \
	"id=0 distance=3 rounds=4 p=0.03;"                        \
	"id=1 distance=5 rounds=5 p=0.02 q=0.01 input=detectors;" \
	"id=2 distance=5 noise=code_capacity p=0.08;"             \
	"id=3 distance=7 rounds=7 p=0.02"

struct fx {
	struct ql_plugin *plugin;
	struct ql_device *sdev, *cdev;
	struct ql_channel *ch;
	struct ql_daemon *d;
	struct ql_ring_client *cl;
	struct ql_vppu_client vc;
};

static struct fx F;

static int setup(void **state)
{
	struct ql_verbs_channel_config vc = { .num_slots = 64, .slot_size = 128 };
	struct ql_daemon_config dc = { .cpu = -1 };
	struct ql_conn_params sp, cp;
	char uri[64];

	(void)state;
	snprintf(uri, sizeof(uri), "soft+shm://qecstream%d", (int)getpid());
	if (ql_plugin_load(QL_TEST_QEC_PLUGIN, CONFIG, &F.plugin) || ql_device_open(uri, &F.sdev) ||
	    ql_device_open(uri, &F.cdev) || ql_verbs_channel_create(F.sdev, &vc, &F.ch) ||
	    ql_daemon_create(&dc, F.ch, &F.d) || ql_plugin_register(F.plugin, F.d) ||
	    ql_verbs_channel_local_params(F.ch, &sp) ||
	    ql_ring_client_create(F.cdev, &sp, NULL, &F.cl) ||
	    ql_ring_client_local_params(F.cl, &cp) || ql_verbs_channel_connect(F.ch, &cp, NULL) ||
	    ql_ring_client_connect(F.cl, &sp, NULL) || ql_daemon_start(F.d))
		return -1;
	ql_vppu_client_ring(&F.vc, F.cl);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ql_daemon_stop(F.d);
	ql_daemon_destroy(F.d);
	ql_ring_client_destroy(F.cl);
	ql_channel_destroy(F.ch);
	ql_device_close(F.cdev);
	ql_device_close(F.sdev);
	ql_plugin_unload(F.plugin);
	return 0;
}

static void config(struct ql_vppu_qec_config *c, int64_t id, unsigned d, unsigned rounds, double p,
		   double q, enum ql_qec_input input, uint64_t shots)
{
	memset(c, 0, sizeof(*c));
	c->params.distance = d;
	c->params.rounds = rounds;
	c->params.noise = rounds ? QL_QEC_PHENOMENOLOGICAL : QL_QEC_CODE_CAPACITY;
	c->params.p = p;
	c->params.q = q;
	c->params.seed = 1234;
	c->decoder_id = id;
	c->input = input;
	c->shots = shots;
	c->window = 32;
	c->timeout_ns = 20000000000ull; /* a loaded machine stalls; a loss still shows */
}

/* Stream cfg and check it against the offline decoding. */
static void equal_offline(const struct ql_vppu_qec_config *cfg)
{
	struct ql_vppu_qec_report w, o;
	uint64_t frames = cfg->shots * (cfg->params.rounds + 1);

	assert_int_equal(ql_vppu_qec_offline(cfg, &o), 0);
	assert_int_equal(ql_vppu_qec_run(&F.vc, cfg, &w), 0);
	if (w.errors || w.lost || w.unexpected || w.transport_error || w.timed_out) {
		ql_vppu_qec_report_json(&w, stderr);
		fail_msg("the stream did not run clean");
	}
	assert_int_equal(o.shots, cfg->shots);
	assert_int_equal(w.shots, o.shots);
	assert_int_equal(w.logical_errors, o.logical_errors);
	assert_true(w.error_hash == o.error_hash);
	/* no round lost: each sent, answered and decoded */
	assert_int_equal(w.rounds_sent, frames);
	assert_int_equal(w.rounds_decoded, frames);
	assert_int_equal(w.responses, w.calls_sent);
	/* + the gets + the resets (the first, or one per shot) */
	assert_int_equal(w.calls_sent,
			 frames + cfg->shots + (cfg->reset_each_shot ? cfg->shots : 1));
	assert_true(w.backlog_max <= cfg->window);
	assert_true(w.backlog_final <= w.backlog_max);
	assert_int_equal(ql_hist_count(&w.round_rtt_ns), frames);
	assert_int_equal(ql_hist_count(&w.shot_rtt_ns), cfg->shots);
	/* the rates are high enough for the comparison to mean something */
	assert_true(o.logical_errors > 0 && o.logical_errors < o.shots);
}

static void test_equal_measurements(void **state)
{
	struct ql_vppu_qec_config c;

	(void)state;
	config(&c, 0, 3, 4, 0.03, 0.03, QL_QEC_INPUT_MEASUREMENTS, 3000);
	equal_offline(&c);
}

static void test_equal_detectors(void **state)
{
	struct ql_vppu_qec_config c;

	(void)state;
	config(&c, 1, 5, 5, 0.02, 0.01, QL_QEC_INPUT_DETECTORS, 2000);
	equal_offline(&c);
}

static void test_equal_code_capacity(void **state)
{
	struct ql_vppu_qec_config c;

	(void)state;
	config(&c, 2, 5, 0, 0.08, 0, QL_QEC_INPUT_MEASUREMENTS, 3000);
	c.reset_each_shot = 1; /* reset_decoder before every shot as well */
	equal_offline(&c);
}

static void test_equal_paced(void **state)
{
	struct ql_vppu_qec_config c;
	struct ql_vppu_qec_report w;

	(void)state;
	/* d = 7 at a 1 us cycle: 2000 shots of 8 frames */
	config(&c, 3, 7, 7, 0.02, 0.02, QL_QEC_INPUT_MEASUREMENTS, 2000);
	c.round_rate_hz = 1e6;
	equal_offline(&c);
	/* and the pacing is real: 16000 rounds at 1 MHz take at least 16 ms */
	assert_int_equal(ql_vppu_qec_run(&F.vc, &c, &w), 0);
	assert_true(w.elapsed_s >= 0.016);
}

static void test_other_seed_differs(void **state)
{
	struct ql_vppu_qec_config c;
	struct ql_vppu_qec_report a, b;

	(void)state;
	config(&c, 0, 3, 4, 0.03, 0.03, QL_QEC_INPUT_MEASUREMENTS, 2000);
	assert_int_equal(ql_vppu_qec_offline(&c, &a), 0);
	c.params.seed++;
	assert_int_equal(ql_vppu_qec_run(&F.vc, &c, &b), 0);
	assert_true(a.error_hash != b.error_hash);
}

static void test_unknown_decoder(void **state)
{
	struct ql_vppu_qec_config c;
	struct ql_vppu_qec_report w;

	(void)state;
	config(&c, 9, 3, 4, 0.03, 0.03, QL_QEC_INPUT_MEASUREMENTS, 10);
	assert_int_equal(ql_vppu_qec_run(&F.vc, &c, &w), 0);
	assert_int_equal(w.shots, 0);
	assert_int_equal(w.errors, w.calls_sent);
	assert_int_equal(w.first_error, QL_QEC_E_DECODER);
	assert_int_equal(w.lost, 0);
	/* and a decoder whose distance differs: every round the wrong size */
	config(&c, 1, 3, 5, 0.02, 0.01, QL_QEC_INPUT_DETECTORS, 10);
	assert_int_equal(ql_vppu_qec_run(&F.vc, &c, &w), 0);
	assert_int_equal(w.shots, 0);
	assert_int_equal(w.first_error, QL_QEC_E_INVALID);
	assert_int_equal(w.rounds_decoded, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_equal_measurements),  cmocka_unit_test(test_equal_detectors),
		cmocka_unit_test(test_equal_code_capacity), cmocka_unit_test(test_equal_paced),
		cmocka_unit_test(test_other_seed_differs),  cmocka_unit_test(test_unknown_decoder),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
