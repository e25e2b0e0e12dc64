/* SPDX-License-Identifier: MIT */
/*
 * qlink.h: every public header of qlink in one include, as liburing.h is
 * for liburing. Link libqlink (pkg-config qlink, CMake qlink::qlink); the
 * control plane (qlink/control.h, qlink/qcs.h, qlink/hololink.h) is in
 * libqlink-control (pkg-config qlink-control, CMake qlink::control).
 *
 *   util       qlink/version.h qlink/error.h qlink/log.h qlink/clock.h
 *              qlink/histogram.h
 *   verbs      qlink/verbs.h qlink/mlx5.h (mlx5 queues, header-only)
 *   transport  qlink/ring.h qlink/channel.h qlink/client.h (the client
 *              of ring, hsb and udp)
 *   rpc        qlink/rpc.h = qlink/rpc_wire.h (the message bytes, CUDA-Q
 *              Realtime compatible) + rpc_stream.h + rpc_table.h + rpc_fn.h
 *   service    qlink/daemon.h qlink/vppu.h qlink/plugin.h (the plugin ABI)
 *              qlink/gpu.h (GPU dispatcher) + qlink/gpu_rpc.h (its handlers)
 *              qlink/rdmaxcel.h (one WQE, doorbell or CQE, host or GPU)
 *   control    qlink/control.h qlink/qcs.h qlink/hololink.h (Hololink
 *              register protocol); qlink/endpoint.h (the endpoint
 *              service, also in libqlink-control)
 */
#ifndef QLINK_QLINK_H
#define QLINK_QLINK_H

#include "qlink/version.h"

#include "qlink/clock.h"
#include "qlink/error.h"
#include "qlink/histogram.h"
#include "qlink/log.h"

#include "qlink/mlx5.h"
#include "qlink/sdr.h"
#include "qlink/verbs.h"

#include "qlink/channel.h"
#include "qlink/client.h"
#include "qlink/hsb.h"
#include "qlink/ring.h"
#include "qlink/udp.h"

#include "qlink/rpc.h"
#include "qlink/rpc_fn.h"
#include "qlink/rpc_stream.h"
#include "qlink/rpc_table.h"
#include "qlink/rpc_wire.h"

#include "qlink/daemon.h"
#include "qlink/dispatcher.h"
#include "qlink/gpu.h"
#include "qlink/gpu_rpc.h"
#include "qlink/plugin.h"
#include "qlink/qec.h"
#include "qlink/qec_wire.h"
#include "qlink/rdmaxcel.h"
#include "qlink/sdr_ec.h"
#include "qlink/vppu.h"

#include "qlink/control.h"
#include "qlink/endpoint.h"
#include "qlink/hololink.h"
#include "qlink/qcs.h"

#endif
