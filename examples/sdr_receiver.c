/* SPDX-License-Identifier: MIT */
/*
 * sdr_receiver: the receiving half of the SDR-RDMA example (docs/sdr.md).
 *
 *   sdr_receiver URI DIR [SIZE [none|sr|ec]]    then, elsewhere:
 *   sdr_sender   URI2 DIR [SIZE [none|sr|ec]]
 *
 * The receiver is the acceptor: it creates a connection (a UC data QP, an
 * RC control QP and a root buffer of message slots), hands its QPs'
 * addresses to the sender through a file in DIR, takes the sender's from
 * another, accepts, posts one receive (a clear-to-send goes to the sender)
 * and waits for the message while ql_sdr_progress polls the receive CQ,
 * sets the packet bitmap and runs the chosen reliability. Both processes
 * use the same SIZE (default 1 MiB) and reliability (default sr).
 * soft+shm://NAME (both ends the same NAME) or soft+udp://IP (one address
 * each) reach across processes.
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
	struct ql_sdr_recv_opts ro = { .rel = QL_SDR_REL_SR };
	struct ql_sdr_config cfg;
	struct ql_conn_params data, ctrl;
	struct ql_sdr_conn *conn;
	struct ql_sdr_recv *rx;
	struct ql_device *dev;
	char line[1024];
	size_t len = argc > 3 ? strtoul(argv[3], NULL, 0) : 1u << 20;
	int status;

	if (argc < 3 || len == 0 || (argc > 4 && ql_sdr_rel_parse(argv[4], &ro.rel))) {
		fprintf(stderr, "usage: sdr_receiver URI DIR [SIZE [none|sr|ec]]\n");
		return 2;
	}
	CHECK(ql_device_open(argv[1], &dev));
	ql_sdr_config_default(&cfg);
	cfg.max_msg_size = len;
	if (ro.rel == QL_SDR_REL_EC) /* room after each slot for the parity */
		cfg.parity_size = ql_sdr_ec_parity_size(len, 0, 0);
	CHECK(ql_sdr_conn_create(dev, &cfg, &conn));

	/* 1. swap QP addresses ("data <params> ; ctrl <params>") */
	CHECK(ql_sdr_conn_params_format(conn, line, sizeof(line)));
	CHECK(put_line(argv[2], "receiver", line));
	CHECK(get_line(argv[2], "sender", line, sizeof(line)));
	CHECK(ql_sdr_conn_params_parse(line, &data, &ctrl));
	/* 2. connect both QPs and exchange root MR and slot geometry (HELLO) */
	CHECK(ql_sdr_accept(conn, &data, &ctrl, 20000));
	/* 3. post the receive: a slot is taken and a clear-to-send goes out */
	CHECK(ql_sdr_recv_post(conn, len, &ro, &rx));
	/* 4. drive progress until every chunk arrived (or the scheme gave up) */
	status = ql_sdr_recv_wait(conn, rx, 20000);

	const uint8_t *p = ql_sdr_recv_data(rx);
	size_t bad = 0;
	for (size_t i = 0; i < len; i++)
		bad += p[i] != (uint8_t)(i * 7 + 1); /* the sender's pattern */
	struct ql_sdr_stats st;
	ql_sdr_conn_stats(conn, &st);
	printf("receiver: %s, message id %u, %zu bytes, %u of %u packets, %zu bytes wrong; "
	       "%llu packets received, %llu rebuilt, %llu NACKs sent\n",
	       status ? ql_strerror(status) : "complete", ql_sdr_recv_msg_id(rx), len,
	       ql_sdr_recv_bitmap(rx, NULL, 0), ql_sdr_recv_packets(rx), bad,
	       (unsigned long long)st.pkts_received, (unsigned long long)st.pkts_recovered,
	       (unsigned long long)st.nacks_sent);
	ql_sdr_recv_release(rx);
	/* let the sender see our ACK before the QPs go away */
	for (int i = 0; i < 1000; i++)
		ql_sdr_progress(conn);
	ql_sdr_conn_destroy(conn);
	ql_device_close(dev);
	return status || bad ? 1 : 0;
}
