// opreg._opreg: the registry and every op of the manifest, to Python. The pure-Python package
// (python/opreg) is the face users import; this module is what it stands on.
#include <Python.h>
#include <nanobind/stl/string.h>

#include <array>
#include <exception>

#include "module.h"
#include "opreg/error.h"
#include "opreg/version.h"
#include "registry/fail.h"
#include "registry/quote.h"

namespace opreg::py {

std::string text_argument(nb::handle value, const std::string& what) {
  if (!PyUnicode_Check(value.ptr())) {
    fail(ErrorKind::invalid_argument, "{}: expected a string, got {}", what, nb::type_name(value.type()).c_str());
  }
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (utf8 == nullptr) throw nb::python_error();  // a lone surrogate: Python's UnicodeEncodeError
  const std::string out(utf8, static_cast<std::size_t>(size));
  if (out.find('\0') != std::string::npos) {
    fail(ErrorKind::invalid_argument, "{}={}: contains a NUL character, which is never part of a valid value", what,
         quote(out));
  }
  return out;
}

namespace {

// One Python exception class per ErrorKind, under a common opreg.Error; each also derives from the
// builtin a Python caller would catch for that kind (invalid arguments are ValueErrors, ...).
struct ErrorClass {
  ErrorKind kind;
  const char* name;  // as opreg exposes it
  PyObject* builtin;
};
std::array<PyObject*, 4> g_error_types{};
PyObject* g_error_base = nullptr;

PyObject* new_error_type(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("opreg.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

void bind_errors(nb::module_& m) {
  g_error_base = new_error_type(m, "Error", PyExc_RuntimeError,
                                "An opreg error; .kind names its ErrorKind. Subclasses: one per kind.");
  m.attr("Error").attr("kind") = "error";
  const std::array<ErrorClass, 4> classes{{
      {ErrorKind::invalid_argument, "InvalidArgumentError", PyExc_ValueError},
      {ErrorKind::unsupported, "UnsupportedError", PyExc_NotImplementedError},
      {ErrorKind::device, "DeviceError", nullptr},
      {ErrorKind::internal, "InternalError", nullptr},
  }};
  for (const ErrorClass& c : classes) {
    nb::object bases = c.builtin != nullptr ? nb::make_tuple(nb::handle(g_error_base), nb::handle(c.builtin))
                                            : nb::make_tuple(nb::handle(g_error_base));
    PyObject* type = new_error_type(m, c.name, bases.ptr(), nullptr);
    m.attr(c.name).attr("kind") = std::string(to_string(c.kind));
    g_error_types[static_cast<std::size_t>(c.kind)] = type;
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(g_error_types[static_cast<std::size_t>(e.kind())], e.what());
    }
  });
}

}  // namespace
}  // namespace opreg::py

NB_MODULE(_opreg, m) {
  using namespace opreg::py;
  m.doc() = "opreg's registry and ops (the package `opreg` is the interface to use)";
  m.attr("__version__") = OPREG_VERSION;
  bind_errors(m);
  bind_registry(m);
  bind_ops(m);
}
