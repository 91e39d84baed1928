// tilecomm.GemvAllReduce / EmbeddingAllToAll / GemmAllToAll: operator contexts over numpy arrays
// and torch tensors (CPU, contiguous, float32: used in place, see binding.hpp).
//
// Each context is built collectively for one shape and keeps its Communicator and Device alive.
// EmbeddingAllToAll also takes bfloat16 tables (torch.bfloat16 tensors, or uint16/int16 arrays
// with table_dtype="bfloat16", as the collectives' dtype="bfloat16") and has output(), a numpy
// view of its zero-copy output in the shared segment.
// run(..., mode="fused") takes "sequential" | "shaped" | "fused" | "auto" (auto_choice: the
// settled mode's name, None while trying); the output argument is either
// None (a new array is returned) or an exact-dtype, C-contiguous, writeable array of the right
// shape that does not overlap the inputs (it is filled and returned). Data inputs must be float32
// and C-contiguous (no silent copies); embedding indices/offsets may be any integer dtype (copied
// to int64). Python-side argument errors are raised on the calling rank before communicating;
// errors the library finds (tilecomm.Error) are raised on every rank.
#include <pybind11/stl.h>

#include <numeric>

#include "binding.hpp"

namespace tilecomm::python {

namespace {

OpOptions op_options(std::size_t tile, const std::string& algorithm, bool remote_first,
                     int shaped_free_cus, int shaped_chunks, const std::string& shaped_policy,
                     int auto_rounds, double auto_min_trial_ms, const std::string& profile) {
  OpOptions o;
  o.tile = tile;
  o.algorithm = algorithm;
  o.remote_first = remote_first;
  o.shaped.free_cus = shaped_free_cus;
  o.shaped.chunks = shaped_chunks;
  o.shaped.policy = parse_shaped_policy(shaped_policy);
  o.auto_rounds = auto_rounds;
  o.auto_min_trial_ms = auto_min_trial_ms;
  o.profile = profile;
  return o;
}

/// Mode::Auto's settled mode as Python sees it: its name, or None while still trying modes.
py::object auto_choice_object(std::optional<Mode> m) {
  if (!m) return py::none();
  return py::str(std::string(to_string(*m)));
}

/// An operator context as Python holds it. Members are destroyed op first, so the context never
/// outlives its communicator or device. After MPI_Finalize the op is leaked instead of freed.
template <class Op>
struct PyOp {
  std::shared_ptr<CommState> comm;
  std::shared_ptr<Device> device;
  std::unique_ptr<Op> op;
  std::string name;
  /// Shape facts the library does not report back: EmbeddingAllToAll: the rows of each local
  /// table; GemmAllToAll: {k, n}.
  std::vector<std::size_t> dims;

  PyOp(const PyCommunicator& c, const PyDevice& d, std::string n)
      : comm(c.state), device(d.device), name(std::move(n)) {
    c.get();
    d.get();
  }
  ~PyOp() {
    if (op && mpi_finalized()) (void)op.release();
  }
  Op& get() const {
    if (!op) throw py::value_error("tilecomm." + name + " is closed");
    if (mpi_finalized()) throw py::value_error("tilecomm." + name + ": MPI is already finalised");
    return *op;
  }
  /// Builds the op (collective) with the GIL released, one call at a time on the communicator.
  template <class F>
  void build(F&& make) {
    py::gil_scoped_release nogil;
    std::lock_guard lock(comm->mu);
    op = make(*comm->comm, *device);
  }
  /// Runs `call(op)` with the GIL released, one call at a time on the communicator.
  template <class F>
  void run(F&& call) {
    Op& o = get();
    py::gil_scoped_release nogil;
    std::lock_guard lock(comm->mu);
    call(o);
  }
  /// Collective: frees the op, then drops the communicator and device references.
  void close() {
    py::gil_scoped_release nogil;
    op.reset();
    device.reset();
    comm.reset();
  }
};

template <class Op>
void add_lifetime(py::class_<PyOp<Op>, std::shared_ptr<PyOp<Op>>>& cls) {
  cls.def("close", &PyOp<Op>::close, "Collective: frees the context (its shared buffers).")
      .def_property_readonly("closed", [](const PyOp<Op>& p) { return !p.op; })
      .def("__enter__", [](std::shared_ptr<PyOp<Op>> p) { return p; })
      .def("__exit__", [](PyOp<Op>& p, py::args) { p.close(); });
}

/// ValueError when `out` shares memory with any of `inputs`.
void require_disjoint(const py::array& out, const std::vector<py::array>& inputs,
                      const std::string& where) {
  for (const py::array& in : inputs)
    if (overlaps(out, in)) throw py::value_error(where + " overlaps an input array");
}

/// A float32 output: a new zeroed array of `shape`, or `obj` checked against it.
py::array_t<float, py::array::c_style> float_output(const py::object& obj,
                                                    const std::vector<std::size_t>& shape,
                                                    const std::string& where) {
  if (obj.is_none()) return py::array_t<float, py::array::c_style>(shape);
  auto a = typed_array<float>(obj, where, true);
  require_shape(a, shape, where);
  return a;
}

/// What run() returns: the output object the caller gave (array or tensor), else the new array,
/// as a tensor sharing its memory when the inputs were tensors.
py::object output_object(const py::object& given, const py::array& out, bool tensors) {
  if (!given.is_none()) return given;
  if (tensors) return torch_from_numpy(out);
  return out;
}

/// Python objects of a sequence argument, with its length checked.
std::vector<py::handle> items(py::handle seq, std::size_t expected, const std::string& where) {
  if (py::isinstance<py::str>(seq) || !py::isinstance<py::sequence>(seq))
    throw py::type_error(where + " must be a sequence (list or tuple)");
  std::vector<py::handle> out;
  for (py::handle h : seq)
    out.push_back(h);
  if (out.size() != expected)
    throw py::value_error(where + " must have " + std::to_string(expected) + " entries, got " +
                          std::to_string(out.size()));
  return out;
}

/// An integer index array (any integer dtype, or a list) as a 1-D int64 array (copied if needed).
py::array_t<std::int64_t, py::array::c_style> index_array(py::handle obj,
                                                          const std::string& where) {
  py::object view;
  if (is_tensor(obj)) view = tensor_as_array(obj, where);
  py::handle src = view ? view : obj;
  py::array a = py::isinstance<py::array>(src) ? py::reinterpret_borrow<py::array>(src)
                                               : py::array::ensure(src);
  if (!a) throw py::type_error(where + " must be an integer array or a list of integers");
  if (a.ndim() != 1)
    throw py::value_error(where + " must be 1-D, got shape " + shape_string(shape_of(a)));
  const char kind = a.dtype().kind();
  if (a.size() > 0 && kind != 'i' && kind != 'u')
    throw py::type_error(where + " must have an integer dtype, got " +
                         std::string(py::str(a.dtype())));
  return py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
}

/// An embedding table stored as bfloat16: a torch.bfloat16 tensor (its 16-bit patterns, no copy),
/// or a uint16/int16 array holding them (numpy has no bfloat16 dtype). `where` prefixes errors.
py::array bf16_table(py::handle obj, const std::string& where) {
  if (is_tensor(obj)) {
    const std::string dtype = py::str(obj.attr("dtype"));
    if (dtype != "torch.bfloat16")
      throw py::type_error(where +
                           " must have dtype torch.bfloat16 (the call's tables are "
                           "bfloat16), got " +
                           dtype);
    py::object bits = obj.attr("view")(py::module_::import("torch").attr("int16"));
    return checked_array(tensor_as_array(bits, where, "int16"), where, false);
  }
  py::array a = checked_array(obj, where, false);
  if (a.itemsize() != 2 || (a.dtype().kind() != 'u' && a.dtype().kind() != 'i'))
    throw py::type_error(where +
                         " must be a uint16 or int16 array holding bfloat16 bits "
                         "(table_dtype='bfloat16'), got " +
                         std::string(py::str(a.dtype())));
  return a;
}

/// Whether a run()'s tables are bfloat16: table_dtype "bfloat16", or "auto" with a first table
/// that is a torch.bfloat16 tensor.
bool tables_are_bf16(const std::string& table_dtype, const std::vector<py::handle>& tables,
                     const std::string& where) {
  if (table_dtype == "bfloat16") return true;
  if (table_dtype == "float32") return false;
  if (table_dtype != "auto")
    throw py::value_error(where + "table_dtype '" + table_dtype +
                          "' is not one of: auto, float32, bfloat16");
  return !tables.empty() && is_tensor(tables[0]) &&
         std::string(py::str(tables[0].attr("dtype"))) == "torch.bfloat16";
}

using PyGemv = PyOp<GemvAllReduce>;
using PyEmb = PyOp<EmbeddingAllToAll>;
using PyGemm = PyOp<GemmAllToAll>;

// output() of an operator with a zero-copy view (EmbeddingAllToAll, GemmAllToAll): the view of the
// next fused call as a numpy array of shape shape_of(floats) (or a torch tensor) that keeps the
// Python context object alive (not a closed one's memory).
template <class Op, class ShapeOf>
py::object output_view(const std::shared_ptr<PyOp<Op>>& self, bool as_tensor, ShapeOf shape_of) {
  std::span<float> view;
  {  // the epoch it depends on moves in run(): one call at a time on the communicator
    py::gil_scoped_release nogil;
    std::lock_guard lock(self->comm->mu);
    view = self->get().output();
  }
  py::array_t<float, py::array::c_style> a(shape_of(view.size()), view.data(), py::cast(self));
  if (as_tensor) return torch_from_numpy(a);
  return a;
}

void bind_gemv(py::module_& m) {
  py::class_<PyGemv, std::shared_ptr<PyGemv>> cls(m, "GemvAllReduce", R"doc(
GEMV + AllReduce (tensor-parallel decode): rank r holds W_r [m x k_local] and x_r [k_local];
run() gives every rank y = sum over r of W_r x_r [m]. With batch = n > 1, x_r is [k_local, n] and
y [m, n] (n vectors per call, row-major: column c of x is vector c). Built collectively; m and
batch must agree on every rank (k_local may differ). Options: tile (rows per tile, 0 = default), algorithm (collective of the
sequential/shaped modes), remote_first, shaped_free_cus, shaped_chunks, fused_algorithm ("auto",
"one_shot": the latency path, "two_shot"; auto = one_shot up to 256 KiB of output, m x batch x 4 bytes, on up to two nodes; on more while (nodes - 1) x output <= 48 KiB),
shaped_policy ("lds", "cu_mask": a dedicated communication CU, "nonblocking": the host posts each
chunk's collective), auto_rounds (mode="auto": timed calls per mode before settling; see auto_choice),
auto_min_trial_ms (mode="auto": short trials are extended until they add up to this; 0: off),
profile (mode="auto"'s cost profile: "" = TILECOMM_PROFILE or the default path if present, a path,
or "none"; docs/model.md).
)doc");
  cls.def(py::init([](const PyCommunicator& comm, const PyDevice& device, std::size_t m,
                      std::size_t k_local, std::size_t batch, std::size_t tile,
                      const std::string& algorithm, bool remote_first, int free_cus, int chunks,
                      const std::string& fused_algorithm, const std::string& policy,
                      int auto_rounds, double auto_min_trial_ms, const std::string& profile) {
            auto p = std::make_shared<PyGemv>(comm, device, "GemvAllReduce");
            OpOptions o = op_options(tile, algorithm, remote_first, free_cus, chunks, policy,
                                     auto_rounds, auto_min_trial_ms, profile);
            o.fused_algorithm = parse_fused_algorithm(fused_algorithm);
            p->build([&](Communicator& c, Device& d) {
              return std::make_unique<GemvAllReduce>(c, d, m, k_local, batch, o);
            });
            return p;
          }),
          py::arg("comm"), py::arg("device"), py::arg("m"), py::arg("k_local"), py::kw_only(),
          py::arg("batch") = 1, py::arg("tile") = 0, py::arg("algorithm") = "",
          py::arg("remote_first") = true, py::arg("shaped_free_cus") = 1,
          py::arg("shaped_chunks") = 4, py::arg("fused_algorithm") = "auto",
          py::arg("shaped_policy") = "lds", py::arg("auto_rounds") = 3,
          py::arg("auto_min_trial_ms") = 20.0, py::arg("profile") = "")
      .def(
          "run",
          [](PyGemv& self, py::handle w_obj, py::handle x_obj, py::object y_obj,
             const std::string& mode) {
            const std::string fn = "tilecomm.GemvAllReduce.run: ";
            GemvAllReduce& op = self.get();
            auto w = typed_array<float>(w_obj, fn + "w", false);
            require_shape(w, {op.m(), op.k_local()}, fn + "w");
            auto x = typed_array<float>(x_obj, fn + "x", false);
            const std::size_t n = op.batch();
            using Dims = std::vector<std::size_t>;
            require_shape(x, n == 1 ? Dims{op.k_local()} : Dims{op.k_local(), n}, fn + "x");
            auto y = float_output(y_obj, n == 1 ? Dims{op.m()} : Dims{op.m(), n}, fn + "y");
            require_disjoint(y, {w, x}, fn + "y");
            const Mode md = parse_mode(mode);
            const float* wp = w.data();
            const float* xp = x.data();
            float* yp = y.mutable_data();
            self.run([&](GemvAllReduce& o) { o.run(wp, xp, yp, md); });
            return output_object(y_obj, y, is_tensor(x_obj));
          },
          py::arg("w"), py::arg("x"), py::arg("y") = py::none(), py::arg("mode") = "fused",
          "y = sum_r W_r x_r. w: float32 [m, k_local], x: float32 [k_local] ([k_local, batch] "
          "with batch > 1), y: float32 [m] ([m, batch]) or None (new array). Returns y.")
      .def_property_readonly("m", [](const PyGemv& p) { return p.get().m(); })
      .def_property_readonly("k_local", [](const PyGemv& p) { return p.get().k_local(); })
      .def_property_readonly("batch", [](const PyGemv& p) { return p.get().batch(); })
      .def_property_readonly(
          "auto_choice", [](const PyGemv& p) { return auto_choice_object(p.get().auto_choice()); })
      .def_property_readonly("tile_rows", [](const PyGemv& p) { return p.get().tile_rows(); })
      .def_property_readonly("fused_algorithm", [](const PyGemv& p) {
        return std::string(to_string(p.get().fused_algorithm()));
      });
  add_lifetime(cls);
}

void bind_embedding(py::module_& m) {
  py::class_<PyEmb, std::shared_ptr<PyEmb>> cls(m, "EmbeddingAllToAll", R"doc(
Embedding-bag pooling + All-to-All (DLRM model-parallel sparse features). This rank owns tables
[rows_i x dim] (table_rows lists rows_i; may be empty); tables are numbered globally in rank order.
run() gives this rank out[b, t, :] = pooled vector of bag batch_begin+b of global table t, shape
[local_batch, num_tables, dim]. pooling: "sum" | "mean". Built collectively; dim, global_batch and
pooling must agree on every rank. Options as GemvAllReduce (tile = bags per tile).
)doc");
  cls.def(py::init([](const PyCommunicator& comm, const PyDevice& device, py::handle table_rows,
                      std::size_t dim, std::size_t global_batch, const std::string& pooling,
                      std::size_t tile, const std::string& algorithm, bool remote_first,
                      int free_cus, int chunks, const std::string& policy, int auto_rounds,
                      double auto_min_trial_ms, const std::string& profile) {
            std::vector<std::size_t> rows =
                counts_from(table_rows, "tilecomm.EmbeddingAllToAll: table_rows");
            Pooling pool;
            if (pooling == "sum")
              pool = Pooling::Sum;
            else if (pooling == "mean")
              pool = Pooling::Mean;
            else
              throw py::value_error("tilecomm.EmbeddingAllToAll: pooling '" + pooling +
                                    "' is not one of: sum, mean");
            auto p = std::make_shared<PyEmb>(comm, device, "EmbeddingAllToAll");
            p->dims = rows;
            const OpOptions o = op_options(tile, algorithm, remote_first, free_cus, chunks, policy,
                                           auto_rounds, auto_min_trial_ms, profile);
            p->build([&](Communicator& c, Device& d) {
              return std::make_unique<EmbeddingAllToAll>(c, d, rows, dim, global_batch, pool, o);
            });
            return p;
          }),
          py::arg("comm"), py::arg("device"), py::arg("table_rows"), py::arg("dim"),
          py::arg("global_batch"), py::arg("pooling") = "sum", py::kw_only(), py::arg("tile") = 0,
          py::arg("algorithm") = "", py::arg("remote_first") = true, py::arg("shaped_free_cus") = 1,
          py::arg("shaped_chunks") = 4, py::arg("shaped_policy") = "lds",
          py::arg("auto_rounds") = 3, py::arg("auto_min_trial_ms") = 20.0, py::arg("profile") = "")
      .def(
          "run",
          [](PyEmb& self, py::handle tables_obj, py::handle indices_obj, py::handle offsets_obj,
             py::object weights_obj, py::object out_obj, const std::string& mode,
             const std::string& table_dtype) {
            const std::string fn = "tilecomm.EmbeddingAllToAll.run: ";
            EmbeddingAllToAll& op = self.get();
            const std::size_t nt = self.dims.size();
            auto table_items = items(tables_obj, nt, fn + "tables");
            auto index_items = items(indices_obj, nt, fn + "indices");
            auto offset_items = items(offsets_obj, nt, fn + "offsets");
            std::vector<py::handle> weight_items;
            if (!weights_obj.is_none()) weight_items = items(weights_obj, nt, fn + "weights");
            std::vector<py::array> keep;  // every array the call reads, alive until it returns
            const bool bf16 = tables_are_bf16(table_dtype, table_items, fn);
            std::vector<const float*> tables;
            std::vector<const bfloat16*> tables16;
            std::vector<EmbeddingBags> bags;
            for (std::size_t i = 0; i < nt; ++i) {
              const std::string t = "[" + std::to_string(i).append("]");
              py::array tab =
                  bf16 ? bf16_table(table_items[i], fn + "tables" + t)
                       : py::array(typed_array<float>(table_items[i], fn + "tables" + t, false));
              require_shape(tab, {self.dims[i], op.dim()}, fn + "tables" + t);
              auto idx = index_array(index_items[i], fn + "indices" + t);
              auto off = index_array(offset_items[i], fn + "offsets" + t);
              EmbeddingBags b;
              b.indices = {idx.data(), static_cast<std::size_t>(idx.size())};
              b.offsets = {off.data(), static_cast<std::size_t>(off.size())};
              if (!weight_items.empty() && !weight_items[i].is_none()) {
                auto wt = typed_array<float>(weight_items[i], fn + "weights" + t, false);
                require_shape(wt, {b.indices.size()}, fn + "weights" + t);
                b.weights = {wt.data(), static_cast<std::size_t>(wt.size())};
                keep.push_back(wt);
              }
              if (bf16)
                tables16.push_back(static_cast<const bfloat16*>(tab.data()));
              else
                tables.push_back(static_cast<const float*>(tab.data()));
              bags.push_back(b);
              keep.push_back(tab);
              keep.push_back(idx);
              keep.push_back(off);
            }
            auto out =
                float_output(out_obj, {op.local_batch(), op.num_tables(), op.dim()}, fn + "out");
            require_disjoint(out, keep, fn + "out");
            const Mode md = parse_mode(mode);
            float* op_out = out.mutable_data();
            self.run([&](EmbeddingAllToAll& o) {
              if (bf16)
                o.run(tables16, bags, op_out, md);
              else
                o.run(tables, bags, op_out, md);
            });
            return output_object(out_obj, out, nt > 0 && is_tensor(table_items[0]));
          },
          py::arg("tables"), py::arg("indices"), py::arg("offsets"),
          py::arg("weights") = py::none(), py::arg("out") = py::none(), py::arg("mode") = "fused",
          py::arg("table_dtype") = "auto",
          R"doc(
tables[i]: [rows_i, dim] (local table i), float32, or bfloat16 (every table of the call alike):
torch.bfloat16 tensors, or uint16/int16 numpy arrays holding the bits with table_dtype="bfloat16";
table_dtype: "auto" (bfloat16 when tables[0] is a torch.bfloat16 tensor, else float32), "float32"
or "bfloat16". indices[i], offsets[i]: its bags over the whole global batch in CSR form (offsets
has global_batch+1 entries, as torch.nn.EmbeddingBag); weights: None, or per table None or float32
[len(indices[i])] per-sample weights. out: float32 [local_batch, num_tables, dim] or None (new
array), or (mode="fused" only) output(): no copy of on-node peers' tiles. Returns out (always
float32; bfloat16 tables are widened exactly and pooled in float32).
)doc")
      .def(
          "output",
          [](std::shared_ptr<PyEmb> self, bool as_tensor) -> py::object {
            const EmbeddingAllToAll& op = self->get();
            return output_view(self, as_tensor, [&](std::size_t) {
              return std::vector<std::size_t>{op.local_batch(), op.num_tables(), op.dim()};
            });
          },
          py::kw_only(), py::arg("as_tensor") = false, R"doc(
Zero-copy output of the next fused run(): a float32 [local_batch, num_tables, dim] array (or, with
as_tensor=True, a torch tensor) sharing memory with this rank's part of the context's shared
segment. Pass it as out= to the next run(..., mode="fused"): on-node peers store their tiles
straight into it. It alternates between two buffers, so call output() before every run(). Its
contents are valid from the return of that run() until this rank's next run() on the context
begins (any mode); copy what you need to keep. Passing it in another mode, or an earlier call's
view, raises tilecomm.Error(InvalidArgument). Never use it after close().
)doc")
      .def_property_readonly("num_tables", [](const PyEmb& p) { return p.get().num_tables(); })
      .def_property_readonly("first_table", [](const PyEmb& p) { return p.get().first_table(); })
      .def_property_readonly("local_batch", [](const PyEmb& p) { return p.get().local_batch(); })
      .def_property_readonly("batch_begin", [](const PyEmb& p) { return p.get().batch_begin(); })
      .def_property_readonly("dim", [](const PyEmb& p) { return p.get().dim(); })
      .def_property_readonly("tile_bags", [](const PyEmb& p) { return p.get().tile_bags(); })
      .def_property_readonly(
          "auto_choice", [](const PyEmb& p) { return auto_choice_object(p.get().auto_choice()); })
      .def_property_readonly("table_rows", [](const PyEmb& p) { return p.dims; });
  add_lifetime(cls);
}

// Every local expert's weights, float32 [k, n] each (kept alive in `keep`).
std::vector<const float*> gemm_weights(PyGemm& self, py::handle weights_obj,
                                       const std::string& what, std::vector<py::array>& keep) {
  auto w_items = items(weights_obj, self.get().local_experts(), what);
  std::vector<const float*> weights;
  for (std::size_t e = 0; e < w_items.size(); ++e) {
    const std::string name = what + "[" + std::to_string(e) + "]";
    auto w = typed_array<float>(w_items[e], name, false);
    require_shape(w, {self.dims[0], self.dims[1]}, name);
    weights.push_back(w.data());
    keep.push_back(w);
  }
  return weights;
}

// GemmAllToAll.run (x: dispatched rows, grouped by local expert then source) and run_layer (x:
// this rank's routed tokens, grouped by global expert): the same checks, x's rows differ.
py::object gemm_call(PyGemm& self, py::handle weights_obj, py::handle x_obj, py::handle recv_obj,
                     py::handle send_obj, py::object y_obj, const std::string& mode, bool layer) {
  const std::string fn =
      layer ? "tilecomm.GemmAllToAll.run_layer: " : "tilecomm.GemmAllToAll.run: ";
  std::vector<py::array> keep;
  // None: the weights packed by set_weights().
  const std::vector<const float*> weights =
      weights_obj.is_none() ? std::vector<const float*>{}
                            : gemm_weights(self, weights_obj, fn + "weights", keep);
  const std::vector<std::size_t> recv = counts_from(recv_obj, fn + "recv_counts");
  const std::vector<std::size_t> send = counts_from(send_obj, fn + "send_counts");
  const std::size_t rows_in = std::accumulate(recv.begin(), recv.end(), std::size_t{0});
  const std::size_t rows_out = std::accumulate(send.begin(), send.end(), std::size_t{0});
  const std::string x_name = fn + (layer ? "tokens" : "x");
  auto x = typed_array<float>(x_obj, x_name, false);
  require_shape(x, {layer ? rows_out : rows_in, self.dims[0]}, x_name);
  keep.push_back(x);
  auto y = float_output(y_obj, {rows_out, self.dims[1]}, fn + "y");
  require_disjoint(y, keep, fn + "y");
  const Mode md = parse_mode(mode);
  const float* xp = x.data();
  float* yp = y.mutable_data();
  self.run([&](GemmAllToAll& o) {
    if (layer)
      o.run_layer(weights, xp, recv, send, yp, md);
    else
      o.run(weights, xp, recv, send, yp, md);
  });
  return output_object(y_obj, y, is_tensor(x_obj));
}

void bind_gemm(py::module_& m) {
  py::class_<PyGemm, std::shared_ptr<PyGemm>> cls(m, "GemmAllToAll", R"doc(
GEMM + All-to-All(v) (mixture-of-experts): this rank holds local_experts experts W_e [k x n];
experts are numbered globally in rank order. run() starts from dispatched tokens and returns each
result row to the rank and position its token came from. max_rows_in / max_rows_out: the most rows
this rank's experts receive / this rank routes out per call. Built collectively; k, n and the tiling
must agree on every rank. Options as GemvAllReduce (tile = rows per tile).
)doc");
  cls.def(py::init([](const PyCommunicator& comm, const PyDevice& device, std::size_t local_experts,
                      std::size_t k, std::size_t n, std::size_t max_rows_in,
                      std::size_t max_rows_out, std::size_t tile, const std::string& algorithm,
                      bool remote_first, int free_cus, int chunks, const std::string& policy,
                      int auto_rounds, double auto_min_trial_ms, const std::string& profile) {
            auto p = std::make_shared<PyGemm>(comm, device, "GemmAllToAll");
            p->dims = {k, n};
            const OpOptions o = op_options(tile, algorithm, remote_first, free_cus, chunks, policy,
                                           auto_rounds, auto_min_trial_ms, profile);
            p->build([&](Communicator& c, Device& d) {
              return std::make_unique<GemmAllToAll>(c, d, local_experts, k, n, max_rows_in,
                                                    max_rows_out, o);
            });
            return p;
          }),
          py::arg("comm"), py::arg("device"), py::arg("local_experts"), py::arg("k"), py::arg("n"),
          py::arg("max_rows_in"), py::arg("max_rows_out"), py::kw_only(), py::arg("tile") = 0,
          py::arg("algorithm") = "", py::arg("remote_first") = true, py::arg("shaped_free_cus") = 1,
          py::arg("shaped_chunks") = 4, py::arg("shaped_policy") = "lds",
          py::arg("auto_rounds") = 3, py::arg("auto_min_trial_ms") = 20.0, py::arg("profile") = "")
      .def(
          "run",
          [](PyGemm& self, py::handle weights_obj, py::handle x_obj, py::handle recv_obj,
             py::handle send_obj, py::object y_obj, const std::string& mode) {
            return gemm_call(self, weights_obj, x_obj, recv_obj, send_obj, y_obj, mode, false);
          },
          py::arg("weights"), py::arg("x"), py::arg("recv_counts"), py::arg("send_counts"),
          py::arg("y") = py::none(), py::arg("mode") = "fused", R"doc(
weights[e]: float32 [k, n] (local expert e), or None for set_weights()' packing. recv_counts[e*size + s]: rows this rank's expert e
received from rank s; x: float32 [sum(recv_counts), k], grouped by local expert, then source rank.
send_counts[g]: rows this rank routed to global expert g. y: float32 [sum(send_counts), n] or None
(new array), grouped by global expert in order. Returns y.
)doc")
      .def(
          "run_layer",
          [](PyGemm& self, py::handle weights_obj, py::handle tokens_obj, py::handle recv_obj,
             py::handle send_obj, py::object y_obj, const std::string& mode) {
            return gemm_call(self, weights_obj, tokens_obj, recv_obj, send_obj, y_obj, mode, true);
          },
          py::arg("weights"), py::arg("tokens"), py::arg("recv_counts"), py::arg("send_counts"),
          py::arg("y") = py::none(), py::arg("mode") = "fused", R"doc(
The whole expert layer in one call: dispatch of this rank's routed tokens, the expert GEMMs and the
return (C++ GemmAllToAll::run_layer; fused mode starts each expert's tiles as its rows arrive).
tokens: float32 [sum(send_counts), k], the rows routed to global expert g grouped by g in order;
y: float32 [sum(send_counts), n] or None, row i = row i of tokens times its expert's weights.
recv_counts and send_counts as for run(). Returns y.
)doc")
      .def(
          "set_weights",
          [](PyGemm& self, py::handle weights_obj) {
            std::vector<py::array> keep;
            const auto weights =
                gemm_weights(self, weights_obj, "tilecomm.GemmAllToAll.set_weights: weights", keep);
            self.run([&](GemmAllToAll& o) { o.set_weights(weights); });
          },
          py::arg("weights"), R"doc(
Packs the local experts' weights (float32 [k, n] each) once: run() and run_layer() with
weights=None then use them instead of packing per call. For weights that do not change; call again
after changing them. A call that passes weights ends this packing.
)doc")
      .def(
          "output",
          [](std::shared_ptr<PyGemm> self, bool as_tensor) -> py::object {
            const std::size_t n = self->dims[1];  // [max_rows_out, n]
            return output_view(self, as_tensor, [n](std::size_t floats) {
              return std::vector<std::size_t>{floats / n, n};
            });
          },
          py::kw_only(), py::arg("as_tensor") = false, R"doc(
Zero-copy output of the next fused run() or run_layer(): a float32 [max_rows_out, n] array (or,
with as_tensor=True, a torch tensor) sharing memory with this rank's part of the context's shared
segment. Pass its first sum(send_counts) rows as y= to the next call with mode="fused"
(y=op.output()[:rows]): on-node experts' ranks store their result tiles straight into it. It
alternates between two buffers, so call output() before every call. Its contents are valid from
the return of that call until this rank's next call on the context begins (any mode); copy what you
need to keep. Passing it in another mode, or an earlier call's view, raises
tilecomm.Error(InvalidArgument). Never use it after close().
)doc")
      .def_property_readonly("num_experts", [](const PyGemm& p) { return p.get().num_experts(); })
      .def_property_readonly("first_expert", [](const PyGemm& p) { return p.get().first_expert(); })
      .def_property_readonly("local_experts",
                             [](const PyGemm& p) { return p.get().local_experts(); })
      .def_property_readonly(
          "auto_choice", [](const PyGemm& p) { return auto_choice_object(p.get().auto_choice()); })
      .def_property_readonly(
          "layer_auto_choice",
          [](const PyGemm& p) { return auto_choice_object(p.get().layer_auto_choice()); })
      .def_property_readonly("tile_rows", [](const PyGemm& p) { return p.get().tile_rows(); })
      .def_property_readonly("tile_cols", [](const PyGemm& p) { return p.get().tile_cols(); })
      .def_property_readonly("k", [](const PyGemm& p) { return p.dims[0]; })
      .def_property_readonly("n", [](const PyGemm& p) { return p.dims[1]; });
  add_lifetime(cls);
}

}  // namespace

void bind_ops(py::module_& m) {
  bind_gemv(m);
  bind_embedding(m);
  bind_gemm(m);
}

}  // namespace tilecomm::python
