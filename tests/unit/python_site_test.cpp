// diag/python_site.hpp: its CPython 3.11 offsets against Python.h's structures, and the site it
// reads from a running interpreter (embedded here), with the GIL held and released, past a frame
// of mpi4py's own files.
#define PY_SSIZE_T_CLEAN
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "diag/python_site.hpp"

namespace py = hier::diag::python;
namespace L = hier::diag::python::py311;

static_assert(PY_VERSION_HEX >> 16 == 0x030B, "the offsets are CPython 3.11's");
static_assert(offsetof(PyThreadState, cframe) == L::kTstateCframe);
static_assert(offsetof(_PyCFrame, current_frame) == L::kCframeCurrent);
static_assert(offsetof(_PyInterpreterFrame, f_code) == L::kFrameCode);
static_assert(offsetof(_PyInterpreterFrame, previous) == L::kFramePrevious);
static_assert(offsetof(_PyInterpreterFrame, prev_instr) == L::kFramePrevInstr);
static_assert(offsetof(_PyInterpreterFrame, owner) == L::kFrameOwner);
static_assert(FRAME_OWNED_BY_GENERATOR == L::kOwnedByGenerator);
static_assert(offsetof(PyObject, ob_type) == L::kObType);
static_assert(offsetof(PyCodeObject, co_filename) == L::kCodeFilename);
static_assert(offsetof(PyCodeObject, co_qualname) == L::kCodeQualname);
static_assert(offsetof(PyCodeObject, _co_firsttraceable) == L::kCodeFirstTraceable);
static_assert(offsetof(PyCodeObject, co_code_adaptive) == L::kCodeAdaptive);
static_assert(offsetof(PyASCIIObject, length) == L::kStrLength);
static_assert(offsetof(PyASCIIObject, state) == L::kStrState);
static_assert(sizeof(PyASCIIObject) == L::kStrAsciiData);
static_assert(offsetof(PyCompactUnicodeObject, utf8) == L::kStrUtf8);
static_assert(offsetof(PyCompactUnicodeObject, utf8_length) == L::kStrUtf8Length);

namespace {

std::string g_with_gil, g_without_gil;

std::string text(const void* site) {
  const char *fl = nullptr, *fn = nullptr;
  return py::describe(site, &fl, &fn) ? std::string(fl) + " (" + fn + ")" : std::string("none");
}

PyObject* probe(PyObject*, PyObject*) {
  g_with_gil = text(py::current_site());
  const void* s = nullptr;
  Py_BEGIN_ALLOW_THREADS
  s = py::current_site();
  Py_END_ALLOW_THREADS
  g_without_gil = text(s);
  Py_RETURN_NONE;
}

PyMethodDef g_probe = {"probe", probe, METH_NOARGS, nullptr};

void run(const char* src, const char* file, PyObject* globals) {
  PyObject* code = Py_CompileString(src, file, Py_file_input);
  ASSERT_NE(code, nullptr);
  PyObject* r = PyEval_EvalCode(code, globals, globals);
  if (!r) PyErr_Print();
  ASSERT_NE(r, nullptr);
  Py_DECREF(r);
  Py_DECREF(code);
}

}  // namespace

TEST(PythonSite, NamesTheCallingLineWithAndWithoutTheGil) {
  EXPECT_EQ(text(py::current_site()), "none");  // no interpreter yet
  Py_InitializeEx(0);
  PyObject* g = PyDict_New();
  PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins());
  PyObject* fn = PyCFunction_New(&g_probe, nullptr);
  PyDict_SetItemString(g, "probe", fn);
  // A frame of mpi4py's own Python (its path has /mpi4py/) is passed over.
  run("def wrapped():\n    probe()\n", "/usr/lib/python3/dist-packages/mpi4py/util/x.py", g);
  run("import os\n\ndef step(n):\n    if n:\n        wrapped()  # line 5\n\nstep(1)\n", "/home/u/train.py", g);
  EXPECT_EQ(g_with_gil, "train.py:5 (step)");
  EXPECT_EQ(g_without_gil, "train.py:5 (step)");
  run("probe()\n", "/home/u/top.py", g);  // module level
  EXPECT_EQ(g_without_gil, "top.py:1 (<module>)");
  Py_DECREF(fn);
  Py_DECREF(g);
}

TEST(PythonSite, OtherAddressesAreNotPythonSites) {
  const char *fl = nullptr, *fn = nullptr;
  int local = 0;
  EXPECT_FALSE(py::describe(&local, &fl, &fn));
  EXPECT_FALSE(py::describe(nullptr, &fl, &fn));
}
