#pragma once
// Shared pieces of the Python module: the objects Python holds (communicator, device) and the
// checks every numpy argument goes through.
//
// Array contract (all entry points):
//  - an argument that must be an array and is not an ndarray raises TypeError;
//  - a wrong dtype raises TypeError naming the expected and the given dtype (no silent casts);
//  - a non-C-contiguous or misaligned array raises ValueError (no silent copies);
//  - an output array must also be writeable, else ValueError;
//  - a wrong shape or size raises ValueError naming the expected and the given shape.
// Only integer index/offset arrays of the embedding operator are converted (to int64), because a
// copy of them is cheap and harmless.
//
// torch.Tensor arguments (tensors.cpp) follow the same rules: a CPU, contiguous tensor of the
// right dtype is used through the numpy array that shares its memory (no copy); another device is
// a ValueError, a wrong dtype a TypeError, a non-contiguous tensor a ValueError. The fused
// operators return a given output object itself, and a new output as a tensor when the inputs
// were tensors.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tilecomm/tilecomm.hpp"

namespace tilecomm::python {

namespace py = pybind11;

/// A Communicator as Python holds it. Shared by the Python object and every operator context
/// built on it, so closing the Python object frees the communicator only after its last context.
/// `mu` serialises calls from several Python threads (the library requires one call at a time).
/// Destruction is collective; after MPI_Finalize it is skipped (the memory is leaked) instead of
/// calling MPI.
struct CommState {
  std::unique_ptr<Communicator> comm;
  std::mutex mu;
  ~CommState();
};

/// The Python `tilecomm.Communicator`: a handle that close() empties.
struct PyCommunicator {
  std::shared_ptr<CommState> state;
  /// The live state; ValueError when closed.
  CommState& get() const;
};

/// The Python `tilecomm.Device`.
struct PyDevice {
  std::shared_ptr<Device> device;
  Device& get() const;
};

/// True once MPI_Finalize has run: destructors that would call MPI must not run then.
bool mpi_finalized();

/// A communicator's state handed between the extension modules (tilecomm._core and
/// tilecomm._torch_pg, which share one libtilecomm.so): a PyCapsule named kStateCapsule owning a
/// std::shared_ptr<CommState>. Communicator._state() makes one, Communicator._from_state(capsule)
/// wraps one in a new handle, and the C++ torch process group keeps the pointer.
inline constexpr const char* kStateCapsule = "tilecomm.CommState";

inline py::capsule state_capsule(std::shared_ptr<CommState> state) {
  auto* owned = new std::shared_ptr<CommState>(std::move(state));
  PyObject* cap = PyCapsule_New(owned, kStateCapsule, [](PyObject* c) {
    delete static_cast<std::shared_ptr<CommState>*>(PyCapsule_GetPointer(c, kStateCapsule));
  });
  if (cap == nullptr) {
    delete owned;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

/// The state in a capsule from state_capsule(); TypeError for anything else.
inline std::shared_ptr<CommState> state_from_capsule(py::handle obj, const std::string& where) {
  void* p =
      PyCapsule_CheckExact(obj.ptr()) ? PyCapsule_GetPointer(obj.ptr(), kStateCapsule) : nullptr;
  if (p == nullptr) {
    PyErr_Clear();
    throw py::type_error(where + " must be a capsule from tilecomm.Communicator._state()");
  }
  return *static_cast<std::shared_ptr<CommState>*>(p);
}

/// Whether `obj` is a torch.Tensor (false without importing torch when torch is not loaded).
bool is_tensor(py::handle obj);
/// The numpy array sharing a tensor's memory, after the tensor checks: CPU (else ValueError),
/// dtype torch.<want_dtype> when given (else TypeError), contiguous (else ValueError).
py::object tensor_as_array(py::handle tensor, const std::string& where,
                           const char* want_dtype = nullptr);
/// torch.from_numpy(a): a tensor sharing a's memory.
py::object torch_from_numpy(const py::array& a);

/// `obj` as an ndarray, unconverted (a tensor: its numpy view, after the tensor checks). TypeError
/// if it is not one; ValueError if it is not C-contiguous or aligned, or (when `output`) not
/// writeable. `where` prefixes messages.
py::array checked_array(py::handle obj, const std::string& where, bool output);

/// The tilecomm element type of an array's dtype; TypeError listing the supported ones.
DataType data_type_of(const py::array& a, const std::string& where);

/// checked_array() and exactly dtype T (TypeError otherwise).
template <class T>
py::array_t<T, py::array::c_style> typed_array(py::handle obj, const std::string& where,
                                               bool output) {
  if (is_tensor(obj) && std::is_same_v<T, float>) {
    py::object view = tensor_as_array(obj, where, "float32");
    return typed_array<T>(view, where, output);
  }
  py::array a = checked_array(obj, where, output);
  if (!py::isinstance<py::array_t<T>>(a))
    throw py::type_error(where + " must have dtype " + std::string(py::str(py::dtype::of<T>())) +
                         ", got " + std::string(py::str(a.dtype())));
  return py::reinterpret_borrow<py::array_t<T, py::array::c_style>>(a);
}

/// Whether two arrays have equivalent dtypes (numpy's PyArray_EquivTypes).
inline bool same_dtype(const py::array& a, const py::array& b) {
  return py::detail::npy_api::get().PyArray_EquivTypes_(a.dtype().ptr(), b.dtype().ptr());
}

/// ValueError unless `a` has exactly `shape`.
void require_shape(const py::array& a, const std::vector<std::size_t>& shape,
                   const std::string& where);
/// "(2, 3)".
std::string shape_string(const std::vector<std::size_t>& shape);
std::vector<std::size_t> shape_of(const py::array& a);
/// Whether the memory of two (C-contiguous) arrays overlaps.
bool overlaps(const py::array& a, const py::array& b);
/// A sequence of non-negative integers (list, tuple or 1-D integer array); ValueError otherwise.
std::vector<std::size_t> counts_from(py::handle obj, const std::string& where);

/// Module parts, defined in collectives.cpp and ops.cpp.
void bind_collectives(py::module_& m);
void bind_ops(py::module_& m);

}  // namespace tilecomm::python
