// The C++ "tilecomm" process group and the module tilecomm._torch_pg (torch_pg.hpp says what it
// promises). Every method checks its tensors before any communication, then runs tilecomm's
// collective on the tensors' memory (bfloat16 as DataType::BFloat16).
#include <torch/csrc/utils/pybind.h>  // c10::intrusive_ptr as a pybind11 holder

#include <numeric>
#include <utility>

#include "torch_pg.hpp"

namespace tilecomm::python {

namespace {

constexpr const char* kDtypeNames = "float32, float64, int32, int64, bfloat16";

/// "torch.float16": how Python prints a dtype.
std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "torch.float32";
    case at::kDouble:
      return "torch.float64";
    case at::kHalf:
      return "torch.float16";
    case at::kBFloat16:
      return "torch.bfloat16";
    case at::kInt:
      return "torch.int32";
    case at::kLong:
      return "torch.int64";
    case at::kShort:
      return "torch.int16";
    case at::kChar:
      return "torch.int8";
    case at::kByte:
      return "torch.uint8";
    case at::kBool:
      return "torch.bool";
    case at::kComplexFloat:
      return "torch.complex64";
    case at::kComplexDouble:
      return "torch.complex128";
    default:
      return std::string("torch.") + c10::toString(t);
  }
}

bool supported(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kInt || t == at::kLong ||
         t == at::kBFloat16;
}

DataType data_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return DataType::Float32;
    case at::kDouble:
      return DataType::Float64;
    case at::kInt:
      return DataType::Int32;
    case at::kLong:
      return DataType::Int64;
    default:
      return DataType::BFloat16;  // the only other type check() lets through
  }
}

/// ValueError / TypeError naming `where` unless t is a CPU, contiguous tensor of a supported dtype.
void check(const at::Tensor& t, const std::string& where) {
  TORCH_CHECK_VALUE(t.defined(), where, " must be a tensor, got an undefined one");
  TORCH_CHECK_VALUE(t.device().is_cpu(), where, " must be a CPU tensor, got device ",
                    t.device().str());
  TORCH_CHECK_TYPE(supported(t.scalar_type()), where, " has dtype ", dtype_name(t.scalar_type()),
                   "; the tilecomm backend supports ", kDtypeNames);
  TORCH_CHECK_VALUE(t.is_contiguous(), where,
                    " must be contiguous (tensor.contiguous() makes a copy)");
}

void same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& where) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), where, ": tensors have dtypes ",
                   dtype_name(a.scalar_type()), " and ", dtype_name(b.scalar_type()),
                   "; they must match");
}

std::size_t count_of(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel());
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const std::string& where) {
  TORCH_CHECK_VALUE(tensors.size() == 1, where,
                    ": the tilecomm backend takes one tensor per process");
  check(tensors[0], where + ": tensor");
  return tensors[0];
}

/// tilecomm's operator for a torch ReduceOp (avg: sum, then `t` is divided by the group size);
/// ValueError for the others, TypeError for avg of integers.
ReduceOp reduce_op(const c10d::ReduceOp& op, const at::Tensor& t, bool& avg,
                   const std::string& where) {
  static const char* const kNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                                       "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
  avg = false;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::Sum;
    case c10d::ReduceOp::MAX:
      return ReduceOp::Max;
    case c10d::ReduceOp::MIN:
      return ReduceOp::Min;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK_TYPE(t.is_floating_point(), "avg of ", dtype_name(t.scalar_type()),
                       " tensors is not defined; use sum");
      avg = true;
      return ReduceOp::Sum;
    default:
      break;
  }
  const auto k = static_cast<std::size_t>(op.op_);
  C10_THROW_ERROR(
      ValueError,
      c10::str(where, ": reduce op RedOpType.", k < std::size(kNames) ? kNames[k] : "UNKNOWN",
               " is not supported by the tilecomm backend (supported: sum, max, min, "
               "avg; gloo provides product and the bitwise ops)"));
}

[[noreturn]] void unsupported(const char* op) {
  C10_THROW_ERROR(Error, c10::str("the tilecomm backend does not provide ", op,
                                  "; for CPU tensors the gloo backend does: run it on a group "
                                  "made with dist.new_group(backend='gloo')"));
}

/// Whether the Python function calling the group is a torch.distributed function whose local
/// async_op is False (it waits on the Work at once). torch's bindings release the GIL before
/// calling the group; this takes it back to look at the innermost Python frame (pybind11 calls
/// push no frame). A thread Python does not know (a C++ caller) never blocks.
bool caller_blocks() {
  if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  bool blocks = false;
  if (PyFrameObject* frame = PyEval_GetFrame()) {
    auto* f = reinterpret_cast<PyObject*>(frame);
    PyObject* globals = PyObject_GetAttrString(f, "f_globals");
    PyObject* name = globals ? PyDict_GetItemString(globals, "__name__") : nullptr;
    if (name && PyUnicode_Check(name) &&
        PyUnicode_CompareWithASCIIString(name, "torch.distributed.distributed_c10d") == 0) {
      PyObject* locals = PyObject_GetAttrString(f, "f_locals");
      PyObject* async_op =
          locals && PyDict_Check(locals) ? PyDict_GetItemString(locals, "async_op") : nullptr;
      blocks = async_op == Py_False;
      Py_XDECREF(locals);
    }
    Py_XDECREF(globals);
    PyErr_Clear();
  }
  PyGILState_Release(gil);
  return blocks;
}

/// Element counts per rank from dim-0 split sizes (empty: equal split).
std::vector<std::size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits,
                                      int p, const std::string& where) {
  const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
  const int64_t row = rows ? t.numel() / rows : 0;
  std::vector<std::size_t> counts;
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % p == 0, where, ": none given and dim 0 (", rows,
                      ") is not divisible by ", p);
    counts.assign(p, static_cast<std::size_t>(rows / p * row));
    return counts;
  }
  bool ok = splits.size() == static_cast<std::size_t>(p);
  int64_t sum = 0;
  for (int64_t s : splits) {
    ok = ok && s >= 0;
    sum += s;
  }
  if (!ok || sum != rows) {
    std::string list = "[";
    for (std::size_t i = 0; i < splits.size(); ++i)
      list += (i ? ", " : "") + std::to_string(splits[i]);
    TORCH_CHECK_VALUE(false, where, ": ", list, "] must be ", p,
                      " non-negative sizes summing to dim 0 (", rows, ")");
  }
  for (int64_t s : splits)
    counts.push_back(static_cast<std::size_t>(s * row));
  return counts;
}

VarLayout layout(std::vector<std::size_t> counts, std::size_t capacity) {
  VarLayout l;
  l.displs.resize(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), l.displs.begin(), std::size_t{0});
  l.counts = std::move(counts);
  l.capacity = capacity;
  return l;
}

}  // namespace

ProcessGroupTilecomm::ProcessGroupTilecomm(std::shared_ptr<CommState> state)
    : c10d::ProcessGroup(state->comm->rank(), state->comm->size()), state_(std::move(state)) {}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::run(c10d::OpType type, const Call& call,
                                                         std::function<void()> finish,
                                                         std::vector<at::Tensor> outputs,
                                                         std::vector<at::Tensor> keep) {
  const bool blocking = caller_blocks();  // before the lock: it takes the GIL
  Request request;
  {
    std::lock_guard lock(state_->mu);
    request = call(*state_->comm, blocking);
    ++(blocking ? blocking_calls_ : async_calls_);
  }
  if (blocking) {
    if (finish) finish();
    return c10::make_intrusive<TilecommWork>(rank_, type, std::move(outputs));
  }
  return c10::make_intrusive<TilecommWork>(rank_, type, std::move(request), std::move(finish),
                                           std::move(outputs), std::move(keep), state_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  const std::string where = "all_reduce";
  at::Tensor t = single(tensors, where);
  bool avg = false;
  const ReduceOp op = reduce_op(opts.reduceOp, t, avg, where);
  std::function<void()> finish;
  if (avg) finish = [t, p = size_] { t.div_(p); };
  void* buf = t.data_ptr();
  return run(c10d::OpType::ALLREDUCE,
             [&](Communicator& c, bool blocking) {
               if (!blocking) return iallreduce(c, buf, buf, count_of(t), data_type(t), op);
               tilecomm::allreduce(c, buf, buf, count_of(t), data_type(t), op);
               return Request{};
             },
             std::move(finish), {t}, {t});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  const std::string where = "broadcast";
  at::Tensor t = single(tensors, where);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, where, ": root tensor ", opts.rootTensor,
                    ": one tensor per process");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, where, ": root ", opts.rootRank,
                    " is not a rank of the group (size ", size_, ")");
  const int root = static_cast<int>(opts.rootRank);
  void* buf = t.data_ptr();
  return run(c10d::OpType::BROADCAST,
             [&](Communicator& c, bool blocking) {
               if (!blocking) return ibroadcast(c, buf, count_of(t), data_type(t), root);
               tilecomm::broadcast(c, buf, count_of(t), data_type(t), root);
               return Request{};
             },
             nullptr, {t}, {t});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  const std::string where = "all_gather_into_tensor";
  check(output, where + ": output");
  check(input, where + ": input");
  same_dtype(output, input, where);
  TORCH_CHECK_VALUE(output.numel() == size_ * input.numel(), where, ": output has ", output.numel(),
                    " elements, expected group size ", size_, " x input's ", input.numel());
  const void* send = input.data_ptr();
  void* recv = output.data_ptr();
  return run(c10d::OpType::_ALLGATHER_BASE,
             [&](Communicator& c, bool blocking) {
               if (!blocking) return iallgather(c, send, recv, count_of(input), data_type(input));
               tilecomm::allgather(c, send, recv, count_of(input), data_type(input));
               return Request{};
             },
             nullptr, {output}, {output, input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::allgather(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const std::string where = "all_gather";
  at::Tensor t = single(inputs, where);
  TORCH_CHECK_VALUE(output_lists.size() == 1 && output_lists[0].size() == std::size_t(size_), where,
                    ": needs one list of ", size_, " output tensors");
  std::vector<at::Tensor> outs = output_lists[0];
  for (std::size_t k = 0; k < outs.size(); ++k) {
    check(outs[k], where + ": output[" + std::to_string(k) + "]");
    same_dtype(outs[k], t, where);
    TORCH_CHECK_VALUE(outs[k].numel() == t.numel(), where, ": output[", k, "] has ",
                      outs[k].numel(), " elements, input has ", t.numel());
  }
  at::Tensor flat = at::empty({static_cast<int64_t>(size_), t.numel()}, t.options());
  const void* send = t.data_ptr();
  void* recv = flat.data_ptr();
  auto finish = [outs, flat] {
    for (std::size_t k = 0; k < outs.size(); ++k)
      outs[k].copy_(flat[static_cast<int64_t>(k)].view(outs[k].sizes()));
  };
  return run(c10d::OpType::ALLGATHER,
             [&](Communicator& c, bool blocking) {
               if (!blocking) return iallgather(c, send, recv, count_of(t), data_type(t));
               tilecomm::allgather(c, send, recv, count_of(t), data_type(t));
               return Request{};
             },
             finish, outs, {flat, t});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const std::string where = "reduce_scatter_tensor";
  check(output, where + ": output");
  check(input, where + ": input");
  same_dtype(output, input, where);
  TORCH_CHECK_VALUE(input.numel() == size_ * output.numel(), where, ": input has ", input.numel(),
                    " elements, expected group size ", size_, " x output's ", output.numel());
  bool avg = false;
  const ReduceOp op = reduce_op(opts.reduceOp, output, avg, where);
  std::function<void()> finish;
  if (avg) finish = [output, p = size_] { output.div_(p); };
  const void* send = input.data_ptr();
  void* recv = output.data_ptr();
  return run(c10d::OpType::_REDUCE_SCATTER_BASE,
             [&](Communicator& c, bool blocking) {
               if (!blocking)
                 return ireduce_scatter(c, send, recv, count_of(output), data_type(output), op);
               tilecomm::reduce_scatter(c, send, recv, count_of(output), data_type(output), op);
               return Request{};
             },
             std::move(finish), {output}, {output, input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& input_lists,
    const c10d::ReduceScatterOptions& opts) {
  const std::string where = "reduce_scatter";
  at::Tensor out = single(outputs, where);
  TORCH_CHECK_VALUE(input_lists.size() == 1 && input_lists[0].size() == std::size_t(size_), where,
                    ": needs one list of ", size_, " input tensors");
  std::vector<at::Tensor> flats;
  for (std::size_t k = 0; k < input_lists[0].size(); ++k) {
    const at::Tensor& t = input_lists[0][k];
    check(t, where + ": input[" + std::to_string(k) + "]");
    same_dtype(out, t, where);
    TORCH_CHECK_VALUE(t.numel() == out.numel(), where, ": input[", k, "] has ", t.numel(),
                      " elements, output ", out.numel());
    flats.push_back(t.reshape(-1));
  }
  bool avg = false;
  const ReduceOp op = reduce_op(opts.reduceOp, out, avg, where);
  std::function<void()> finish;
  if (avg) finish = [out, p = size_] { out.div_(p); };
  at::Tensor flat = at::cat(flats);
  const void* send = flat.data_ptr();
  void* recv = out.data_ptr();
  return run(c10d::OpType::REDUCE_SCATTER,
             [&](Communicator& c, bool blocking) {
               if (!blocking)
                 return ireduce_scatter(c, send, recv, count_of(out), data_type(out), op);
               tilecomm::reduce_scatter(c, send, recv, count_of(out), data_type(out), op);
               return Request{};
             },
             std::move(finish), {out}, {flat, out});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& /*opts*/) {
  const std::string where = "all_to_all_single";
  check(output, where + ": output");
  check(input, where + ": input");
  same_dtype(output, input, where);
  const void* send = input.data_ptr();
  void* recv = output.data_ptr();
  const DataType dt = data_type(input);
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK_VALUE(input.numel() == output.numel() && input.numel() % size_ == 0, where,
                      ": without split sizes input (", input.numel(), " elements) and output (",
                      output.numel(), ") must be equal and divisible by the group size ", size_);
    const std::size_t count = count_of(input) / static_cast<std::size_t>(size_);
    return run(c10d::OpType::ALLTOALL_BASE,
               [&](Communicator& c, bool blocking) {
                 if (!blocking) return ialltoall(c, send, recv, count, dt);
                 tilecomm::alltoall(c, send, recv, count, dt);
                 return Request{};
               },
               nullptr, {output}, {output, input});
  }
  const VarLayout sl =
      layout(split_counts(input, input_split_sizes, size_, where + ": input_split_sizes"),
             count_of(input));
  const VarLayout rl =
      layout(split_counts(output, output_split_sizes, size_, where + ": output_split_sizes"),
             count_of(output));
  return run(c10d::OpType::ALLTOALL_BASE,
             [&](Communicator& c, bool blocking) {
               if (!blocking) return ialltoallv(c, send, sl, recv, rl, dt);
               tilecomm::alltoallv(c, send, sl, recv, rl, dt);
               return Request{};
             },
             nullptr, {output}, {output, input});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& /*opts*/) {
  const std::string where = "all_to_all";
  TORCH_CHECK_VALUE(outputs.size() == std::size_t(size_) && inputs.size() == std::size_t(size_),
                    where, ": needs ", size_, " output and ", size_,
                    " input tensors (one per rank)");
  std::vector<at::Tensor> flats;
  std::vector<std::size_t> send_counts, recv_counts;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    check(inputs[k], where + ": input[" + std::to_string(k) + "]");
    flats.push_back(inputs[k].reshape(-1));
    send_counts.push_back(count_of(inputs[k]));
  }
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    check(outputs[k], where + ": output[" + std::to_string(k) + "]");
    same_dtype(outputs[k], inputs[0], where);
    recv_counts.push_back(count_of(outputs[k]));
  }
  for (const at::Tensor& t : inputs)
    same_dtype(t, inputs[0], where);
  at::Tensor send = at::cat(flats);
  const std::size_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), std::size_t{0});
  at::Tensor recv = at::empty({static_cast<int64_t>(total)}, inputs[0].options());
  const VarLayout sl = layout(send_counts, count_of(send));
  const VarLayout rl = layout(recv_counts, total);
  std::vector<at::Tensor> outs = outputs;
  auto finish = [outs, recv] {
    int64_t at = 0;
    for (const at::Tensor& t : outs) {
      t.copy_(recv.slice(0, at, at + t.numel()).view(t.sizes()));
      at += t.numel();
    }
  };
  const DataType dt = data_type(inputs[0]);
  return run(c10d::OpType::ALLTOALL,
             [&](Communicator& c, bool blocking) {
               if (!blocking) return ialltoallv(c, send.data_ptr(), sl, recv.data_ptr(), rl, dt);
               tilecomm::alltoallv(c, send.data_ptr(), sl, recv.data_ptr(), rl, dt);
               return Request{};
             },
             finish, outs, {send, recv});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::barrier(const c10d::BarrierOptions& /*opts*/) {
  return run(c10d::OpType::BARRIER,
             [](Communicator& c, bool blocking) {
               if (!blocking) return ibarrier(c);
               tilecomm::barrier(c);
               return Request{};
             },
             nullptr, {}, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::allreduce_coalesced(
    std::vector<at::Tensor>&, const c10d::AllreduceCoalescedOptions&) {
  unsupported("allreduce_coalesced");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::reduce(std::vector<at::Tensor>&,
                                                            const c10d::ReduceOptions&) {
  unsupported("reduce");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
    const c10d::AllgatherOptions&) {
  unsupported("allgather_coalesced");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::gather(std::vector<std::vector<at::Tensor>>&,
                                                            std::vector<at::Tensor>&,
                                                            const c10d::GatherOptions&) {
  unsupported("gather");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::scatter(std::vector<at::Tensor>&,
                                                             std::vector<std::vector<at::Tensor>>&,
                                                             const c10d::ScatterOptions&) {
  unsupported("scatter");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::send(std::vector<at::Tensor>&, int, int) {
  unsupported("send");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::recv(std::vector<at::Tensor>&, int, int) {
  unsupported("recv");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupTilecomm::recvAnysource(std::vector<at::Tensor>&, int) {
  unsupported("recv_anysource");
}
void ProcessGroupTilecomm::monitoredBarrier(const c10d::BarrierOptions&, bool) {
  unsupported("monitored_barrier");
}

}  // namespace tilecomm::python

PYBIND11_MODULE(_torch_pg, m) {
  namespace tp = tilecomm::python;
  namespace py = pybind11;
  m.doc() = "The C++ \"tilecomm\" torch.distributed process group (see tilecomm.torch).";
  // The base class is torch's: its module must be loaded for pybind11 to know it.
  py::module_::import("torch._C._distributed_c10d");
  py::class_<tp::ProcessGroupTilecomm, c10d::ProcessGroup,
             c10::intrusive_ptr<tp::ProcessGroupTilecomm>>(m, "ProcessGroupTilecomm", R"doc(
torch.distributed process group on a tilecomm.Communicator (C++). Made by torch through the
registered backend ("tilecomm"), not by hand: ProcessGroupTilecomm(comm._state()) shares the
communicator `comm`. Every collective is posted on the communicator in call order; async_op=True
returns a Work whose wait() completes it.
)doc")
      .def(py::init([](py::handle state) {
             auto s = tp::state_from_capsule(state, "ProcessGroupTilecomm: state");
             if (!s || !s->comm)
               throw py::value_error("ProcessGroupTilecomm: the communicator is closed");
             return c10::make_intrusive<tp::ProcessGroupTilecomm>(std::move(s));
           }),
           py::arg("state"))
      .def_property_readonly(
          "comm",
          [](const tp::ProcessGroupTilecomm& pg) {
            return py::module_::import("tilecomm._core")
                .attr("Communicator")
                .attr("_from_state")(tp::state_capsule(pg.state()));
          },
          "A tilecomm.Communicator handle on the group's communicator (for the fused operators).")
      .def_property_readonly(
          "_calls",
          [](const tp::ProcessGroupTilecomm& pg) {
            return py::make_tuple(pg.blocking_calls(), pg.async_calls());
          },
          "(calls run blocking, calls posted non-blocking) so far.")
      .def("__repr__", [](const tp::ProcessGroupTilecomm& pg) {
        return "ProcessGroupTilecomm(rank=" + std::to_string(pg.getRank()) +
               ", size=" + std::to_string(pg.getSize()) + ")";
      });
}
