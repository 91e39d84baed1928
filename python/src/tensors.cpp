// torch.Tensor arguments: recognised without linking libtorch (the module imports nothing from
// torch; a tensor can only exist once the user has imported it), checked with the numpy rules and
// handed on as the numpy array that shares the tensor's memory (tensor.detach().numpy(): no copy).
#include "binding.hpp"

namespace tilecomm::python {

namespace {

// torch.Tensor once torch is imported, else None. Kept for the life of the process.
py::handle tensor_type() {
  static PyObject* type = nullptr;
  if (type != nullptr) return type;
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return py::none();
  py::object t = modules["torch"].attr("Tensor");
  type = t.release().ptr();
  return type;
}

}  // namespace

bool is_tensor(py::handle obj) {
  py::handle t = tensor_type();
  return !t.is_none() && py::isinstance(obj, t);
}

py::object tensor_as_array(py::handle obj, const std::string& where, const char* want_dtype) {
  const std::string device = py::str(obj.attr("device").attr("type"));
  if (device != "cpu")
    throw py::value_error(where + " must be a CPU tensor, got device " +
                          std::string(py::str(obj.attr("device"))));
  const std::string dtype = py::str(obj.attr("dtype"));  // "torch.float32"
  if (want_dtype != nullptr && dtype != std::string("torch.") + want_dtype)
    throw py::type_error(where + " must have dtype torch." + want_dtype + ", got " + dtype);
  if (!obj.attr("is_contiguous")().cast<bool>())
    throw py::value_error(where + " must be contiguous (tensor.contiguous() makes a copy)");
  return obj.attr("detach")().attr("numpy")();
}

py::object torch_from_numpy(const py::array& a) {
  return py::module_::import("torch").attr("from_numpy")(a);
}

}  // namespace tilecomm::python
