// tilecomm.allreduce / reduce_scatter / allgather / alltoall / alltoallv / algorithm_names.
//
// Output convention (all of them): `recv=None` returns a new array; a given `recv` (exact dtype of
// send, C-contiguous, writeable, the right number of elements, any shape) is filled and returned.
// In place is the library's rule, with numpy views: allreduce/alltoall with recv=send;
// reduce_scatter with recv = send.reshape(-1)[rank*n:(rank+1)*n]; allgather with
// send = recv.reshape(-1)[rank*n:(rank+1)*n]. Any other overlap raises tilecomm.Error.
// Python-side argument errors are raised before any communication, on the calling rank only.
#include <pybind11/stl.h>

#include <numeric>

#include "binding.hpp"

namespace tilecomm::python {

namespace {

ReduceOp parse_op(const std::string& op) {
  if (op == "sum") return ReduceOp::Sum;
  if (op == "max") return ReduceOp::Max;
  if (op == "min") return ReduceOp::Min;
  throw py::value_error("op '" + op + "' is not one of: sum, max, min");
}

Collective parse_collective(const std::string& name) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                       Collective::AllToAll, Collective::AllToAllv})
    if (name == to_string(c)) return c;
  throw py::value_error("collective '" + name +
                        "' is not one of: allreduce, reduce_scatter, allgather, alltoall, "
                        "alltoallv");
}

// The receive array: a new one of `shape`, or `recv` checked against send's dtype and `count`.
py::array recv_array(const py::object& recv, const py::array& send, std::size_t count,
                     const std::vector<std::size_t>& shape, const std::string& fn) {
  if (recv.is_none()) return py::array(send.dtype(), shape);
  py::array r = checked_array(recv, fn + ": recv", true);
  if (!same_dtype(r, send))
    throw py::type_error(fn + ": recv has dtype " + std::string(py::str(r.dtype())) +
                         ", send has " + std::string(py::str(send.dtype())));
  if (static_cast<std::size_t>(r.size()) != count)
    throw py::value_error(fn + ": recv must hold " + std::to_string(count) + " elements, got " +
                          std::to_string(r.size()) + " (shape " + shape_string(shape_of(r)) + ")");
  return r;
}

// Runs `call` on the communicator with the GIL released, one call at a time.
template <class F>
void run_on(const PyCommunicator& comm, F&& call) {
  CommState& s = comm.get();
  py::gil_scoped_release nogil;
  std::lock_guard lock(s.mu);
  call(*s.comm);
}

py::array py_allreduce(const PyCommunicator& comm, py::handle send_obj, py::object recv,
                       const std::string& op, const std::string& algorithm) {
  const std::string fn = "tilecomm.allreduce";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = data_type_of(send, fn + ": send");
  const std::size_t n = send.size();
  py::array r = recv_array(recv, send, n, shape_of(send), fn);
  const ReduceOp o = parse_op(op);
  const void* s = send.data();
  void* d = r.mutable_data();
  run_on(comm, [&](Communicator& c) { allreduce(c, s, d, n, t, o, {algorithm}); });
  return r;
}

py::array py_reduce_scatter(const PyCommunicator& comm, py::handle send_obj, py::object recv,
                            const std::string& op, const std::string& algorithm) {
  const std::string fn = "tilecomm.reduce_scatter";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = data_type_of(send, fn + ": send");
  const std::size_t p = static_cast<std::size_t>(comm.get().comm->size());
  if (send.size() % p != 0)
    throw py::value_error(fn + ": send holds " + std::to_string(send.size()) +
                          " elements, not a multiple of the " + std::to_string(p) + " ranks");
  const std::size_t n = send.size() / p;
  py::array r = recv_array(recv, send, n, {n}, fn);
  const ReduceOp o = parse_op(op);
  const void* s = send.data();
  void* d = r.mutable_data();
  run_on(comm, [&](Communicator& c) { reduce_scatter(c, s, d, n, t, o, {algorithm}); });
  return r;
}

py::array py_allgather(const PyCommunicator& comm, py::handle send_obj, py::object recv,
                       const std::string& algorithm) {
  const std::string fn = "tilecomm.allgather";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = data_type_of(send, fn + ": send");
  const std::size_t p = static_cast<std::size_t>(comm.get().comm->size());
  const std::size_t n = send.size();
  std::vector<std::size_t> shape = shape_of(send);
  shape.insert(shape.begin(), p);
  py::array r = recv_array(recv, send, p * n, shape, fn);
  const void* s = send.data();
  void* d = r.mutable_data();
  run_on(comm, [&](Communicator& c) { allgather(c, s, d, n, t, {algorithm}); });
  return r;
}

py::array py_alltoall(const PyCommunicator& comm, py::handle send_obj, py::object recv,
                      const std::string& algorithm) {
  const std::string fn = "tilecomm.alltoall";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = data_type_of(send, fn + ": send");
  const std::size_t p = static_cast<std::size_t>(comm.get().comm->size());
  if (send.size() % p != 0)
    throw py::value_error(fn + ": send holds " + std::to_string(send.size()) +
                          " elements, not a multiple of the " + std::to_string(p) + " ranks");
  py::array r = recv_array(recv, send, send.size(), shape_of(send), fn);
  const std::size_t n = send.size() / p;
  const void* s = send.data();
  void* d = r.mutable_data();
  run_on(comm, [&](Communicator& c) { alltoall(c, s, d, n, t, {algorithm}); });
  return r;
}

// Packed displacements (exclusive prefix sum) unless given.
std::vector<std::size_t> displs_or_packed(const py::object& displs,
                                          const std::vector<std::size_t>& counts, std::size_t p,
                                          const std::string& where) {
  std::vector<std::size_t> d;
  if (displs.is_none()) {
    d.assign(p, 0);
    for (std::size_t i = 1; i < p; ++i)
      d[i] = d[i - 1] + counts[i - 1];
  } else {
    d = counts_from(displs, where);
    if (d.size() != p)
      throw py::value_error(where + " must have " + std::to_string(p) + " entries (one per rank)" +
                            ", got " + std::to_string(d.size()));
  }
  return d;
}

py::array py_alltoallv(const PyCommunicator& comm, py::handle send_obj, py::handle send_counts,
                       py::object recv, py::object recv_counts, py::object send_displs,
                       py::object recv_displs, const std::string& algorithm) {
  const std::string fn = "tilecomm.alltoallv";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = data_type_of(send, fn + ": send");
  const std::size_t p = static_cast<std::size_t>(comm.get().comm->size());
  VarLayout sl, rl;
  sl.counts = counts_from(send_counts, fn + ": send_counts");
  if (sl.counts.size() != p)
    throw py::value_error(fn + ": send_counts must have " + std::to_string(p) +
                          " entries (one per rank), got " + std::to_string(sl.counts.size()));
  sl.displs = displs_or_packed(send_displs, sl.counts, p, fn + ": send_displs");
  sl.capacity = send.size();
  if (recv_counts.is_none()) {
    // Learn what every rank sends here: an all-to-all of the counts (collective).
    std::vector<std::int64_t> out(sl.counts.begin(), sl.counts.end()), in(p);
    run_on(comm,
           [&](Communicator& c) { alltoall(c, out.data(), in.data(), 1, DataType::Int64, {}); });
    rl.counts.assign(in.begin(), in.end());
  } else {
    rl.counts = counts_from(recv_counts, fn + ": recv_counts");
    if (rl.counts.size() != p)
      throw py::value_error(fn + ": recv_counts must have " + std::to_string(p) +
                            " entries (one per rank), got " + std::to_string(rl.counts.size()));
  }
  rl.displs = displs_or_packed(recv_displs, rl.counts, p, fn + ": recv_displs");
  std::size_t extent = 0;
  for (std::size_t i = 0; i < p; ++i)
    extent = std::max(extent, rl.displs[i] + rl.counts[i]);
  py::array r;
  if (recv.is_none()) {
    r = py::array(send.dtype(), std::vector<std::size_t>{extent});
  } else {
    r = checked_array(recv, fn + ": recv", true);
    if (!same_dtype(r, send))
      throw py::type_error(fn + ": recv has dtype " + std::string(py::str(r.dtype())) +
                           ", send has " + std::string(py::str(send.dtype())));
  }
  rl.capacity = r.size();
  const void* s = send.data();
  void* d = r.mutable_data();
  run_on(comm, [&](Communicator& c) { alltoallv(c, s, sl, d, rl, t, {algorithm}); });
  return r;
}

}  // namespace

void bind_collectives(py::module_& m) {
  m.def("allreduce", &py_allreduce, py::arg("comm"), py::arg("send"), py::arg("recv") = py::none(),
        py::arg("op") = "sum", py::arg("algorithm") = "", R"doc(
recv[i] = op over ranks of send[i]. op: "sum" | "max" | "min"; algorithm: "" (environment
override, then the default table) or a name from algorithm_names("allreduce").
recv=None returns a new array shaped like send; recv=send reduces in place. Returns recv.
)doc");
  m.def("reduce_scatter", &py_reduce_scatter, py::arg("comm"), py::arg("send"),
        py::arg("recv") = py::none(), py::arg("op") = "sum", py::arg("algorithm") = "", R"doc(
send holds size*n elements; this rank gets the reduction of block `rank` (n elements).
recv=None returns a new 1-D array of n elements. Returns recv.
)doc");
  m.def("allgather", &py_allgather, py::arg("comm"), py::arg("send"), py::arg("recv") = py::none(),
        py::arg("algorithm") = "", R"doc(
recv gets every rank's send (n elements each) in rank order. recv=None returns a new array of shape
(size, *send.shape). Returns recv.
)doc");
  m.def("alltoall", &py_alltoall, py::arg("comm"), py::arg("send"), py::arg("recv") = py::none(),
        py::arg("algorithm") = "", R"doc(
send holds size*n elements; block p goes to rank p and lands in block `rank` of its recv.
recv=None returns a new array shaped like send; recv=send is in place. Returns recv.
)doc");
  m.def("alltoallv", &py_alltoallv, py::arg("comm"), py::arg("send"), py::arg("send_counts"),
        py::arg("recv") = py::none(), py::arg("recv_counts") = py::none(),
        py::arg("send_displs") = py::none(), py::arg("recv_displs") = py::none(),
        py::arg("algorithm") = "", R"doc(
send_counts[p] elements at send_displs[p] go to rank p and land at recv_displs[rank] there.
Displacements default to packed (prefix sums of the counts). recv_counts=None learns them with an
extra all-to-all of the counts: pass recv_counts on every rank or on none. recv=None returns a new
1-D array just large enough. Not in place. Returns recv.
)doc");
  m.def(
      "algorithm_names",
      [](const std::string& collective) { return algorithm_names(parse_collective(collective)); },
      py::arg("collective"),
      "Names of a collective's algorithms (\"allreduce\", \"reduce_scatter\", \"allgather\", "
      "\"alltoall\", \"alltoallv\"), in table order.");
}

}  // namespace tilecomm::python
