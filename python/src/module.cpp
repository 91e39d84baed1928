// The `tilecomm` Python module: tilecomm.Error, Device, Communicator (from an mpi4py
// communicator) and the array checks shared by the collectives and operators.
#include <mpi4py/mpi4py.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <utility>

#include "binding.hpp"

namespace tilecomm::python {

namespace {

// tilecomm.Error. A new reference kept for the life of the process (never released, so nothing
// touches it after the interpreter is gone).
PyObject* g_error_type = nullptr;

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

// The MPI_Comm inside an mpi4py communicator; TypeError for anything else.
MPI_Comm mpi_comm_from(py::handle obj) {
  py::object comm_type = py::module_::import("mpi4py.MPI").attr("Comm");
  if (!py::isinstance(obj, comm_type))
    throw py::type_error(
        "tilecomm.Communicator: comm must be an mpi4py.MPI.Comm (e.g. "
        "MPI.COMM_WORLD), got " +
        std::string(py::str(py::type::of(obj).attr("__name__"))));
  MPI_Comm* c = PyMPIComm_Get(obj.ptr());
  if (c == nullptr) throw py::error_already_set();
  return *c;
}

// MPI must be up with MPI_THREAD_MULTIPLE before a Communicator is built. Checked here as well as
// in the library so the message can say what to do from Python.
void require_thread_multiple() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw Error(ErrorCode::InvalidUsage,
                "tilecomm.Communicator: MPI is not initialised (import mpi4py.MPI with "
                "mpi4py.rc.initialize = True, the default) or is already finalised");
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE)
    throw Error(ErrorCode::InvalidUsage,
                std::string("tilecomm.Communicator: MPI was initialised with ") +
                    thread_level_name(level) +
                    "; tilecomm needs MPI_THREAD_MULTIPLE. Leave mpi4py.rc.thread_level = "
                    "'multiple' (mpi4py's default) before the first `from mpi4py import MPI`.");
}

void bind_error(py::module_& m) {
  g_error_type = PyErr_NewExceptionWithDoc(
      "tilecomm.Error",
      "An error raised by the tilecomm library. `.code` is the tilecomm::ErrorCode name "
      "(e.g. 'InvalidArgument', 'Mismatch', 'Timeout'); `.message` the text without prefix.",
      PyExc_RuntimeError, nullptr);
  if (g_error_type == nullptr) throw py::error_already_set();
  m.add_object("Error", py::reinterpret_borrow<py::object>(g_error_type));
  py::tuple codes(8);
  int i = 0;
  for (ErrorCode c : {ErrorCode::InvalidArgument, ErrorCode::InvalidUsage, ErrorCode::NotSupported,
                      ErrorCode::Mismatch, ErrorCode::Timeout, ErrorCode::MpiError,
                      ErrorCode::SystemError, ErrorCode::Internal})
    codes[i++] = py::str(std::string(to_string(c)));
  m.attr("ERROR_CODES") = codes;

  // Every tilecomm::Error becomes a tilecomm.Error carrying .code and .message.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object type = py::reinterpret_borrow<py::object>(g_error_type);
      py::object inst = type(e.what());
      inst.attr("code") = std::string(to_string(e.code()));
      inst.attr("message") = e.message();
      PyErr_SetObject(g_error_type, inst.ptr());
    }
  });
}

void bind_device(py::module_& m) {
  py::class_<PyDevice, std::shared_ptr<PyDevice>>(m, "Device", R"doc(
The CPU device model: `cus` compute units with `slots` workgroup slots each and `lds_bytes` of LDS
per CU. 0 takes the default of RuntimeConfig.from_env() (TILECOMM_CUS, TILECOMM_WG_SLOTS,
TILECOMM_LDS_BYTES; for CUs: the cores of the affinity mask). Owns worker threads; close() (or
leaving a `with` block) waits for its work and joins them. Operator contexts keep it alive.
)doc")
      .def(py::init([](int cus, int slots, std::size_t lds_bytes) {
             if (cus < 0 || slots < 0)
               throw py::value_error("tilecomm.Device: cus and slots must be >= 0");
             RuntimeConfig c = RuntimeConfig::from_env();
             if (cus > 0) c.num_cus = cus;
             if (slots > 0) c.wg_slots_per_cu = slots;
             if (lds_bytes > 0) c.lds_bytes_per_cu = lds_bytes;
             auto d = std::make_shared<PyDevice>();
             d->device = std::make_shared<Device>(c);
             return d;
           }),
           py::arg("cus") = 0, py::arg("slots") = 0, py::arg("lds_bytes") = 0)
      .def_property_readonly("num_cus", [](const PyDevice& d) { return d.get().num_cus(); })
      .def_property_readonly("wg_slots_per_cu",
                             [](const PyDevice& d) { return d.get().wg_slots_per_cu(); })
      .def_property_readonly("lds_bytes_per_cu",
                             [](const PyDevice& d) { return d.get().lds_bytes_per_cu(); })
      .def_property_readonly("pinned", [](const PyDevice& d) { return d.get().pinned(); })
      .def_property_readonly("closed", [](const PyDevice& d) { return !d.device; })
      .def(
          "synchronize",
          [](const PyDevice& d) {
            Device& dev = d.get();
            py::gil_scoped_release nogil;
            dev.synchronize();
          },
          "Blocks until every stream is idle; raises the first workgroup error.")
      .def(
          "close",
          [](PyDevice& d) {
            std::shared_ptr<Device> dev = std::move(d.device);
            py::gil_scoped_release nogil;
            dev.reset();
          },
          "Drops this handle; the device is destroyed once no operator context uses it.")
      .def("__enter__", [](std::shared_ptr<PyDevice> d) { return d; })
      .def("__exit__", [](PyDevice& d, py::args) {
        std::shared_ptr<Device> dev = std::move(d.device);
        py::gil_scoped_release nogil;
        dev.reset();
      });
}

void bind_communicator(py::module_& m) {
  py::class_<PyCommunicator, std::shared_ptr<PyCommunicator>>(m, "Communicator", R"doc(
A tilecomm communicator built collectively from an mpi4py communicator (which it duplicates).
MPI must be initialised with MPI_THREAD_MULTIPLE (mpi4py's default). `shm_bytes`, `node_size`,
`timeout_s` and `check` are CommConfig's fields (0 / -1 / -1 / -1: the TILECOMM_* environment
defaults; node_size > 0 makes pretend nodes of that many ranks, so off-node paths run on one host;
check = 1 is verify mode: every call's arguments are compared across ranks first, so a mismatch
is reported on every rank and leaves the communicator usable).
Every rank makes the same calls in the same order. close() (or leaving a `with` block) is
collective: the communicator is freed once no operator context uses it.
)doc")
      .def(py::init([](py::handle comm, std::size_t shm_bytes, int node_size, double timeout_s,
                       int check) {
             MPI_Comm c = mpi_comm_from(comm);
             require_thread_multiple();
             CommConfig config;
             config.shm_bytes = shm_bytes;
             config.node_size = node_size;
             config.timeout_s = timeout_s;
             config.check = check;
             auto state = std::make_shared<CommState>();
             {
               py::gil_scoped_release nogil;
               state->comm = std::make_unique<Communicator>(c, config);
             }
             auto p = std::make_shared<PyCommunicator>();
             p->state = std::move(state);
             return p;
           }),
           py::arg("comm"), py::arg("shm_bytes") = CommConfig{}.shm_bytes,
           py::arg("node_size") = CommConfig{}.node_size,
           py::arg("timeout_s") = CommConfig{}.timeout_s, py::arg("check") = CommConfig{}.check)
      .def_property_readonly("rank", [](const PyCommunicator& c) { return c.get().comm->rank(); })
      .def_property_readonly("size", [](const PyCommunicator& c) { return c.get().comm->size(); })
      .def_property_readonly("node", [](const PyCommunicator& c) { return c.get().comm->node(); })
      .def_property_readonly("num_nodes",
                             [](const PyCommunicator& c) { return c.get().comm->num_nodes(); })
      .def_property_readonly("local_rank",
                             [](const PyCommunicator& c) { return c.get().comm->local_rank(); })
      .def_property_readonly("local_size",
                             [](const PyCommunicator& c) { return c.get().comm->local_size(); })
      .def_property_readonly("closed", [](const PyCommunicator& c) { return !c.state; })
      .def(
          "_state",
          [](const PyCommunicator& c) {
            c.get();
            return state_capsule(c.state);
          },
          "Internal: a capsule sharing this communicator (the C++ torch process group holds it).")
      .def_static(
          "_from_state",
          [](py::handle capsule) {
            auto p = std::make_shared<PyCommunicator>();
            p->state = state_from_capsule(capsule, "Communicator._from_state: state");
            return p;
          },
          "Internal: a new handle on the communicator in a capsule from _state().")
      .def(
          "barrier",
          [](const PyCommunicator& c) {
            CommState& s = c.get();
            py::gil_scoped_release nogil;
            std::lock_guard lock(s.mu);
            s.comm->barrier();
          },
          "Waits for every rank.")
      .def(
          "close",
          [](PyCommunicator& c) {
            std::shared_ptr<CommState> s = std::move(c.state);
            py::gil_scoped_release nogil;
            s.reset();
          },
          "Collective. Drops this handle; frees the communicator once no context uses it.")
      .def("__enter__", [](std::shared_ptr<PyCommunicator> c) { return c; })
      .def("__exit__", [](PyCommunicator& c, py::args) {
        std::shared_ptr<CommState> s = std::move(c.state);
        py::gil_scoped_release nogil;
        s.reset();
      });
}

}  // namespace

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

CommState::~CommState() {
  if (mpi_finalized()) (void)comm.release();  // freeing would call MPI after MPI_Finalize
}

CommState& PyCommunicator::get() const {
  if (!state) throw py::value_error("tilecomm.Communicator is closed");
  if (mpi_finalized()) throw py::value_error("tilecomm.Communicator: MPI is already finalised");
  return *state;
}

Device& PyDevice::get() const {
  if (!device) throw py::value_error("tilecomm.Device is closed");
  return *device;
}

py::array checked_array(py::handle obj, const std::string& where, bool output) {
  if (is_tensor(obj)) return checked_array(tensor_as_array(obj, where), where, output);
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(where + " must be a numpy.ndarray or torch.Tensor, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  auto a = py::reinterpret_borrow<py::array>(obj);
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(where + " must be C-contiguous (numpy.ascontiguousarray makes a copy)");
  if (!(a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_))
    throw py::value_error(where + " must be aligned");
  if (output && !a.writeable()) throw py::value_error(where + " must be writeable");
  return a;
}

DataType data_type_of(const py::array& a, const std::string& where) {
  if (py::isinstance<py::array_t<float>>(a)) return DataType::Float32;
  if (py::isinstance<py::array_t<double>>(a)) return DataType::Float64;
  if (py::isinstance<py::array_t<std::int32_t>>(a)) return DataType::Int32;
  if (py::isinstance<py::array_t<std::int64_t>>(a)) return DataType::Int64;
  throw py::type_error(where + " has dtype " + std::string(py::str(a.dtype())) +
                       "; supported: float32, float64, int32, int64 (native byte order)");
}

std::vector<std::size_t> shape_of(const py::array& a) {
  return std::vector<std::size_t>(a.shape(), a.shape() + a.ndim());
}

std::string shape_string(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

void require_shape(const py::array& a, const std::vector<std::size_t>& shape,
                   const std::string& where) {
  if (shape_of(a) != shape)
    throw py::value_error(where + " must have shape " + shape_string(shape) + ", got " +
                          shape_string(shape_of(a)));
}

bool overlaps(const py::array& a, const py::array& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  auto pa = reinterpret_cast<std::uintptr_t>(a.data());
  auto pb = reinterpret_cast<std::uintptr_t>(b.data());
  return pa < pb + static_cast<std::uintptr_t>(b.nbytes()) &&
         pb < pa + static_cast<std::uintptr_t>(a.nbytes());
}

std::vector<std::size_t> counts_from(py::handle obj, const std::string& where) {
  if (py::isinstance<py::str>(obj) || !py::isinstance<py::sequence>(obj))
    throw py::type_error(where + " must be a sequence of integers");
  std::vector<std::size_t> out;
  for (py::handle item : obj) {
    if (!PyIndex_Check(item.ptr()))
      throw py::type_error(where + " must hold integers, got " +
                           std::string(py::str(py::type::of(item).attr("__name__"))));
    const long long v = py::int_(py::reinterpret_borrow<py::object>(item)).cast<long long>();
    if (v < 0) throw py::value_error(where + " must not be negative, got " + std::to_string(v));
    out.push_back(static_cast<std::size_t>(v));
  }
  return out;
}

}  // namespace tilecomm::python

PYBIND11_MODULE(_core, m) {
  namespace tp = tilecomm::python;
  namespace py = pybind11;
  m.doc() = "tilecomm: fused compute-collective operators on a CPU device model over MPI.";
  // Imports mpi4py.MPI (which initialises MPI, by default with MPI_THREAD_MULTIPLE).
  if (import_mpi4py() < 0) throw py::error_already_set();
  tp::bind_error(m);
  tp::bind_device(m);
  tp::bind_communicator(m);
  tp::bind_collectives(m);
  tp::bind_ops(m);
  m.attr("MODES") = py::make_tuple("sequential", "shaped", "fused");
}
