/* SPDX-License-Identifier: MIT */
/* What a connection tells about itself beyond its statistics (sdr.h). */
#include "qlink/sdr.h"
#include "sdr/sdr_int.h"

uint32_t ql_sdr_conn_cts_pending(const struct ql_sdr_conn *conn)
{
	return conn->cts_count;
}
