// tilecomm.allreduce / reduce_scatter / allgather / alltoall / alltoallv / broadcast, their
// non-blocking i* forms (returning a tilecomm.Request), and algorithm_names.
//
// Output convention (all of them): `recv=None` returns a new array; a given `recv` (exact dtype of
// send, C-contiguous, writeable, the right number of elements, any shape) is filled and returned.
// In place is the library's rule, with numpy views: allreduce/alltoall with recv=send;
// reduce_scatter with recv = send.reshape(-1)[rank*n:(rank+1)*n]; allgather with
// send = recv.reshape(-1)[rank*n:(rank+1)*n]. Any other overlap raises tilecomm.Error.
// Python-side argument errors are raised before any communication, on the calling rank only.
// dtype="bfloat16" reads 2-byte integer arrays (uint16/int16, which hold the bits) as bfloat16:
// numpy has no bfloat16 type. The i* forms take the same arguments and return a Request whose
// wait() returns what the blocking form returns; the arrays must not be touched until then (the
// Request keeps them alive).
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
                       Collective::AllToAll, Collective::AllToAllv, Collective::Broadcast})
    if (name == to_string(c)) return c;
  throw py::value_error("collective '" + name +
                        "' is not one of: allreduce, reduce_scatter, allgather, alltoall, "
                        "alltoallv, broadcast");
}

/// A non-blocking call as Python holds it: the Request, the communicator and every array the call
/// uses (alive until it completes), and what wait() returns. Dropping an unfinished request waits
/// for it (its buffers must outlive the call).
struct PyRequest {
  Request req;
  std::shared_ptr<CommState> comm;
  std::vector<py::object> keep;
  py::object result;
  bool done = false;

  PyRequest() = default;
  PyRequest(const PyRequest&) = delete;
  PyRequest& operator=(const PyRequest&) = delete;
  ~PyRequest() {
    if (done || mpi_finalized()) return;
    py::gil_scoped_release nogil;
    try {
      req.wait();
    } catch (...) {  // nobody is left to see the error
    }
  }
  py::object wait() {
    if (!done) {
      {
        py::gil_scoped_release nogil;
        req.wait();  // rethrows the call's error (once)
      }
      done = true;
      keep.clear();
    }
    return result;
  }
  bool test() {
    if (done) return true;
    if (!req.test()) return false;
    done = true;
    keep.clear();
    return true;
  }
};

// The element type of `a`, or bfloat16 when `dtype` asks for it (2-byte integer arrays only).
DataType element_type(const py::array& a, const std::string& dtype, const std::string& where) {
  if (dtype.empty()) return data_type_of(a, where);
  if (dtype == "bfloat16") {
    const char kind = a.dtype().kind();
    if (a.itemsize() != 2 || (kind != 'u' && kind != 'i'))
      throw py::type_error(where + ": dtype='bfloat16' needs a uint16 or int16 array holding the " +
                           "bits, got " + std::string(py::str(a.dtype())));
    return DataType::BFloat16;
  }
  const DataType t = data_type_of(a, where);
  if (to_string(t) != dtype)
    throw py::type_error(where + " has dtype " + std::string(py::str(a.dtype())) + ", but dtype='" +
                         dtype + "' was given");
  return t;
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

/// Blocking: runs `blocking(comm)` and returns `result`. Non-blocking: posts `post(comm)` (which
/// returns a Request) and returns a tilecomm.Request keeping `keep` alive, whose wait() returns
/// `result`.
template <class Blocking, class Post>
py::object finish(const PyCommunicator& comm, bool nonblocking, py::object result,
                  std::vector<py::object> keep, Blocking&& blocking, Post&& post) {
  if (!nonblocking) {
    run_on(comm, blocking);
    return result;
  }
  auto r = std::make_shared<PyRequest>();
  r->comm = comm.state;
  r->keep = std::move(keep);
  r->result = std::move(result);
  run_on(comm, [&](Communicator& c) { r->req = post(c); });
  return py::cast(r);
}

ReduceOrder parse_order(const std::string& order, const std::string& fn) {
  if (order == "any") return ReduceOrder::Any;
  if (order == "canonical") return ReduceOrder::Canonical;
  throw Error(ErrorCode::InvalidArgument,
              fn + ": order = '" + order + "' is not a reduce order; valid: any, canonical");
}

py::object py_allreduce(bool nb, const PyCommunicator& comm, py::handle send_obj, py::object recv,
                        const std::string& op, const std::string& algorithm,
                        const std::string& dtype, const std::string& order) {
  const std::string fn = nb ? "tilecomm.iallreduce" : "tilecomm.allreduce";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = element_type(send, dtype, fn + ": send");
  const std::size_t n = send.size();
  py::array r = recv_array(recv, send, n, shape_of(send), fn);
  const ReduceOp o = parse_op(op);
  const void* s = send.data();
  void* d = r.mutable_data();
  const CollectiveOptions opt{algorithm, parse_order(order, fn)};
  return finish(
      comm, nb, r, {send, r}, [&](Communicator& c) { allreduce(c, s, d, n, t, o, opt); },
      [&](Communicator& c) { return iallreduce(c, s, d, n, t, o, opt); });
}

py::object py_reduce_scatter(bool nb, const PyCommunicator& comm, py::handle send_obj,
                             py::object recv, const std::string& op, const std::string& algorithm,
                             const std::string& dtype, const std::string& order) {
  const std::string fn = nb ? "tilecomm.ireduce_scatter" : "tilecomm.reduce_scatter";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = element_type(send, dtype, fn + ": send");
  const std::size_t p = static_cast<std::size_t>(comm.get().comm->size());
  if (send.size() % p != 0)
    throw py::value_error(fn + ": send holds " + std::to_string(send.size()) +
                          " elements, not a multiple of the " + std::to_string(p) + " ranks");
  const std::size_t n = send.size() / p;
  py::array r = recv_array(recv, send, n, {n}, fn);
  const ReduceOp o = parse_op(op);
  const void* s = send.data();
  void* d = r.mutable_data();
  const CollectiveOptions opt{algorithm, parse_order(order, fn)};
  return finish(
      comm, nb, r, {send, r}, [&](Communicator& c) { reduce_scatter(c, s, d, n, t, o, opt); },
      [&](Communicator& c) { return ireduce_scatter(c, s, d, n, t, o, opt); });
}

py::object py_allgather(bool nb, const PyCommunicator& comm, py::handle send_obj, py::object recv,
                        const std::string& algorithm, const std::string& dtype) {
  const std::string fn = nb ? "tilecomm.iallgather" : "tilecomm.allgather";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = element_type(send, dtype, fn + ": send");
  const std::size_t p = static_cast<std::size_t>(comm.get().comm->size());
  const std::size_t n = send.size();
  std::vector<std::size_t> shape = shape_of(send);
  shape.insert(shape.begin(), p);
  py::array r = recv_array(recv, send, p * n, shape, fn);
  const void* s = send.data();
  void* d = r.mutable_data();
  const CollectiveOptions opt{algorithm};
  return finish(
      comm, nb, r, {send, r}, [&](Communicator& c) { allgather(c, s, d, n, t, opt); },
      [&](Communicator& c) { return iallgather(c, s, d, n, t, opt); });
}

py::object py_alltoall(bool nb, const PyCommunicator& comm, py::handle send_obj, py::object recv,
                       const std::string& algorithm, const std::string& dtype) {
  const std::string fn = nb ? "tilecomm.ialltoall" : "tilecomm.alltoall";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = element_type(send, dtype, fn + ": send");
  const std::size_t p = static_cast<std::size_t>(comm.get().comm->size());
  if (send.size() % p != 0)
    throw py::value_error(fn + ": send holds " + std::to_string(send.size()) +
                          " elements, not a multiple of the " + std::to_string(p) + " ranks");
  py::array r = recv_array(recv, send, send.size(), shape_of(send), fn);
  const std::size_t n = send.size() / p;
  const void* s = send.data();
  void* d = r.mutable_data();
  const CollectiveOptions opt{algorithm};
  return finish(
      comm, nb, r, {send, r}, [&](Communicator& c) { alltoall(c, s, d, n, t, opt); },
      [&](Communicator& c) { return ialltoall(c, s, d, n, t, opt); });
}

py::object py_broadcast(bool nb, const PyCommunicator& comm, py::handle buf_obj, int root,
                        const std::string& algorithm, const std::string& dtype) {
  const std::string fn = nb ? "tilecomm.ibroadcast" : "tilecomm.broadcast";
  py::array buf = checked_array(buf_obj, fn + ": buf", true);
  const DataType t = element_type(buf, dtype, fn + ": buf");
  const int p = comm.get().comm->size();
  if (root < 0 || root >= p)
    throw py::value_error(fn + ": root = " + std::to_string(root) + " is not a rank (size " +
                          std::to_string(p) + ")");
  const std::size_t n = buf.size();
  void* d = buf.mutable_data();
  const CollectiveOptions opt{algorithm};
  return finish(
      comm, nb, buf, {buf}, [&](Communicator& c) { broadcast(c, d, n, t, root, opt); },
      [&](Communicator& c) { return ibroadcast(c, d, n, t, root, opt); });
}

py::object py_barrier(const PyCommunicator& comm, bool nb) {
  return finish(
      comm, nb, py::none(), {}, [&](Communicator& c) { barrier(c); },
      [&](Communicator& c) { return ibarrier(c); });
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

py::object py_alltoallv(bool nb, const PyCommunicator& comm, py::handle send_obj,
                        py::handle send_counts, py::object recv, py::object recv_counts,
                        py::object send_displs, py::object recv_displs,
                        const std::string& algorithm, const std::string& dtype) {
  const std::string fn = nb ? "tilecomm.ialltoallv" : "tilecomm.alltoallv";
  py::array send = checked_array(send_obj, fn + ": send", false);
  const DataType t = element_type(send, dtype, fn + ": send");
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
  const CollectiveOptions opt{algorithm};
  return finish(
      comm, nb, r, {send, r}, [&](Communicator& c) { alltoallv(c, s, sl, d, rl, t, opt); },
      [&](Communicator& c) { return ialltoallv(c, s, sl, d, rl, t, opt); });
}

/// Defines `name` (blocking) and "i" + name (non-blocking) from fn(nonblocking, args...).
template <class... A, class... Extra>
void both(py::module_& m, const char* name, py::object (*fn)(bool, A...), const Extra&... extra) {
  m.def(
      name, [fn](A... a) { return fn(false, std::forward<A>(a)...); }, extra...);
  m.def(("i" + std::string(name)).c_str(), [fn](A... a) { return fn(true, std::forward<A>(a)...); },
        extra...);
}

}  // namespace

void bind_collectives(py::module_& m) {
  py::class_<PyRequest, std::shared_ptr<PyRequest>>(m, "Request", R"doc(
A non-blocking collective in flight (from tilecomm.iallreduce etc.). wait() blocks (GIL released)
until it completes, raises its error, and returns what the blocking call returns; test() is True
once it completed. Until then its arrays must not be touched (the Request keeps them alive).
Dropping an unfinished Request waits for it.
)doc")
      .def("wait", &PyRequest::wait, "Blocks until complete; returns the call's result.")
      .def("test", &PyRequest::test, "True when complete (raises the call's error).")
      .def_property_readonly("done", [](const PyRequest& r) { return r.done; });

  // Each call twice: blocking (name) and non-blocking (i + name, returning a Request).
  both(m, "allreduce", &py_allreduce, py::arg("comm"), py::arg("send"),
       py::arg("recv") = py::none(), py::arg("op") = "sum", py::arg("algorithm") = "",
       py::arg("dtype") = "", py::arg("order") = "any", R"doc(
recv[i] = op over ranks of send[i]. op: "sum" | "max" | "min"; algorithm: "" (environment
override, then the default table) or a name from algorithm_names("allreduce"); dtype: "" (the
array's) or "bfloat16" (uint16/int16 arrays holding the bits). order: "any" (the algorithm's) or
"canonical" (node sums in node order, each in rank order: the same bits whatever the algorithm;
only one_shot, two_shot and hierarchical run).
recv=None returns a new array shaped like send; recv=send reduces in place. Returns recv
(iallreduce: a Request whose wait() returns it).
)doc");
  both(m, "reduce_scatter", &py_reduce_scatter, py::arg("comm"), py::arg("send"),
       py::arg("recv") = py::none(), py::arg("op") = "sum", py::arg("algorithm") = "",
       py::arg("dtype") = "", py::arg("order") = "any", R"doc(
send holds size*n elements; this rank gets the reduction of block `rank` (n elements).
recv=None returns a new 1-D array of n elements. Returns recv (ireduce_scatter: a Request).
)doc");
  both(m, "allgather", &py_allgather, py::arg("comm"), py::arg("send"),
       py::arg("recv") = py::none(), py::arg("algorithm") = "", py::arg("dtype") = "", R"doc(
recv gets every rank's send (n elements each) in rank order. recv=None returns a new array of shape
(size, *send.shape). Returns recv (iallgather: a Request).
)doc");
  both(m, "alltoall", &py_alltoall, py::arg("comm"), py::arg("send"), py::arg("recv") = py::none(),
       py::arg("algorithm") = "", py::arg("dtype") = "", R"doc(
send holds size*n elements; block p goes to rank p and lands in block `rank` of its recv.
recv=None returns a new array shaped like send; recv=send is in place. Returns recv (ialltoall: a
Request).
)doc");
  both(m, "alltoallv", &py_alltoallv, py::arg("comm"), py::arg("send"), py::arg("send_counts"),
       py::arg("recv") = py::none(), py::arg("recv_counts") = py::none(),
       py::arg("send_displs") = py::none(), py::arg("recv_displs") = py::none(),
       py::arg("algorithm") = "", py::arg("dtype") = "",
       R"doc(
send_counts[p] elements at send_displs[p] go to rank p and land at recv_displs[rank] there.
Displacements default to packed (prefix sums of the counts). recv_counts=None learns them with an
extra (blocking) all-to-all of the counts: pass recv_counts on every rank or on none. recv=None
returns a new 1-D array just large enough. Not in place. Returns recv (ialltoallv: a Request).
)doc");
  both(m, "broadcast", &py_broadcast, py::arg("comm"), py::arg("buf"), py::arg("root") = 0,
       py::arg("algorithm") = "", py::arg("dtype") = "", R"doc(
buf (C-contiguous, writeable; same size and dtype on every rank) gets root's buf, in place.
Returns buf (ibroadcast: a Request).
)doc");
  m.def(
      "ibarrier", [](const PyCommunicator& c) { return py_barrier(c, true); }, py::arg("comm"),
      "Non-blocking barrier: a Request that completes once every rank has issued it (and every "
      "earlier call of this rank has completed).");
  m.def(
      "algorithm_names",
      [](const std::string& collective) { return algorithm_names(parse_collective(collective)); },
      py::arg("collective"),
      "Names of a collective's algorithms (\"allreduce\", \"reduce_scatter\", \"allgather\", "
      "\"alltoall\", \"alltoallv\"), in table order.");
}

}  // namespace tilecomm::python
