/* SPDX-License-Identifier: MIT */
/*
 * sdr_sender: the sending half of the SDR-RDMA example; see sdr_receiver.c.
 *
 *   sdr_sender URI DIR [SIZE [none|sr|ec]]
 *
 * The sender is the connector: it creates its side of the connection,
 * swaps QP addresses with the receiver through DIR, connects (the HELLO
 * handshake tells it where the receiver's slots are), and sends one message
 * from memory registered on the connection's PD. ql_sdr_send_post queues
 * it until the receiver's clear-to-send names a slot; progress then posts
 * one RDMA WRITE WITH IMMEDIATE per packet (the immediate: message id,
 * packet offset, user bits) as the receiver's credits allow, and the
 * reliability scheme repairs what the wire lost (sr: the NACKed packets;
 * ec: parity packets after the data, then the NACKed ones).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qlink/error.h>
#include <qlink/sdr.h>
#include <qlink/sdr_ec.h>

#include "example_util.h"

int main(int argc, char **argv)
{
	struct ql_sdr_send_opts so = { .rel = QL_SDR_REL_SR };
	struct ql_sdr_config cfg;
	struct ql_conn_params data, ctrl;
	struct ql_sdr_conn *conn;
	struct ql_sdr_send *tx;
	struct ql_device *dev;
	struct ql_mr *mr;
	uint8_t *buf;
	char line[1024];
	size_t len = argc > 3 ? strtoul(argv[3], NULL, 0) : 1u << 20;
	int status;

	if (argc < 3 || len == 0 || (argc > 4 && ql_sdr_rel_parse(argv[4], &so.rel))) {
		fprintf(stderr, "usage: sdr_sender URI DIR [SIZE [none|sr|ec]]\n");
		return 2;
	}
	CHECK(ql_device_open(argv[1], &dev));
	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = len;
	if (so.rel == QL_SDR_REL_EC) /* the sender's parity scratch */
		cfg.parity_size = ql_sdr_ec_parity_size(len, 0, 0);
	CHECK(ql_sdr_conn_create(dev, &cfg, &conn));

	CHECK(get_line(argv[2], "receiver", line, sizeof(line)));
	CHECK(ql_sdr_conn_params_parse(line, &data, &ctrl));
	CHECK(ql_sdr_conn_params_format(conn, line, sizeof(line)));
	CHECK(put_line(argv[2], "sender", line));
	CHECK(ql_sdr_connect(conn, &data, &ctrl, 20000));

	/* the message, in memory the data QP can read */
	CHECK(ql_sdr_buf_alloc(conn, len, (void **)&buf, &mr));
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	CHECK(ql_sdr_send_post(conn, buf, len, mr, &so, &tx));
	/* drive progress until the receiver acknowledged (sr, ec) or every
	 * packet was posted (none) */
	status = ql_sdr_send_wait(conn, tx, 20000);

	struct ql_sdr_stats st;
	ql_sdr_conn_stats(conn, &st);
	printf("sender: %s, %zu bytes, %llu packets sent, %llu retransmitted, %llu NACKs\n",
	       status ? ql_strerror(status) : "delivered", len, (unsigned long long)st.pkts_sent,
	       (unsigned long long)st.pkts_retransmitted, (unsigned long long)st.nacks_received);
	ql_sdr_send_release(tx);
	ql_sdr_buf_free(conn, buf, mr);
	ql_sdr_conn_destroy(conn);
	ql_device_close(dev);
	return status ? 1 : 0;
}
