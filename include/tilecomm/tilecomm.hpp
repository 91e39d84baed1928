#pragma once
/// \file tilecomm.hpp
/// Everything a user includes.

#include "tilecomm/calibrate.hpp"
#include "tilecomm/collectives.hpp"
#include "tilecomm/communicator.hpp"
#include "tilecomm/defaults.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/embedding_alltoall.hpp"
#include "tilecomm/env.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/gemm_alltoall.hpp"
#include "tilecomm/gemm_reduce_scatter.hpp"
#include "tilecomm/gemv_allreduce.hpp"
#include "tilecomm/isa.hpp"
#include "tilecomm/ops.hpp"
#include "tilecomm/runtime_config.hpp"
#include "tilecomm/trace.hpp"
#include "tilecomm/types.hpp"
