// The Python file:line that made the current MPI call, for programs in CPython 3.11 (Debian 12's
// python3). Read by the calling thread itself from its own frames, which stay put while it is
// inside the call, without the GIL (mpi4py releases it around MPI calls): plain loads of the
// thread state's current frame, its code object, the code's file name (a compact str) and
// PyCode_Addr2Line (a read of the immutable line table, no allocation). Only when Python is in
// the process (dlsym of Py_Version), its version is 3.11 and it is not a debug build: the field
// offsets are 3.11's (tests/unit/python_site_test.cpp checks them against Python.h).
#pragma once

#include <cstddef>

namespace hier::diag::python {

// CPython 3.11's layout (64-bit, release build), as read by current_site().
namespace py311 {
constexpr size_t kTstateCframe = 56;       // PyThreadState::cframe
constexpr size_t kCframeCurrent = 8;       // _PyCFrame::current_frame
constexpr size_t kFrameCode = 32;          // _PyInterpreterFrame::f_code
constexpr size_t kFramePrevious = 48;      // _PyInterpreterFrame::previous
constexpr size_t kFramePrevInstr = 56;     // _PyInterpreterFrame::prev_instr
constexpr size_t kFrameOwner = 69;         // _PyInterpreterFrame::owner
constexpr char kOwnedByGenerator = 1;      // FRAME_OWNED_BY_GENERATOR
constexpr size_t kObType = 8;              // PyObject::ob_type
constexpr size_t kCodeFilename = 112;      // PyCodeObject::co_filename
constexpr size_t kCodeQualname = 128;      // PyCodeObject::co_qualname
constexpr size_t kCodeFirstTraceable = 168;  // PyCodeObject::_co_firsttraceable
constexpr size_t kCodeAdaptive = 184;      // PyCodeObject::co_code_adaptive (_PyCode_CODE)
constexpr size_t kStrLength = 16;          // PyASCIIObject::length
constexpr size_t kStrState = 32;           // PyASCIIObject::state
constexpr size_t kStrAsciiData = 48;       // sizeof(PyASCIIObject): a compact ASCII str's bytes
constexpr size_t kStrUtf8 = 56;            // PyCompactUnicodeObject::utf8 (nullptr until made)
constexpr size_t kStrUtf8Length = 48;      // PyCompactUnicodeObject::utf8_length
}  // namespace py311

// The calling thread's innermost Python frame outside mpi4py's own files, as an interned site
// (a record inside libhier, the same for every call from that file and line); nullptr when there
// is none (no Python 3.11, no Python frame on this thread, the 512 records all taken).
const void* current_site() noexcept;

// Where `site` is one of current_site's records: its "file.py:42" and function name; else false.
bool describe(const void* site, const char** file_line, const char** function) noexcept;

}  // namespace hier::diag::python
