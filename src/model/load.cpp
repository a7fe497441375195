#include "model/load.hpp"

#include <mpi.h>  // which family this build is for (no MPI calls here)

#include <climits>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "diag/log.hpp"
#include "model/builtin_files.hpp"
#include "util/files.hpp"

namespace hier::model {

Family build_family() {
#if defined(OMPI_MAJOR_VERSION)
  return Family::OpenMPI;
#elif defined(MPICH_VERSION)
  return Family::Mpich;
#else
#error "libhier's model: neither Open MPI nor MPICH"
#endif
}

const std::string& builtin_text(Family f) {
  static const std::string ompi(kBuiltinOpenMPI), mpich(kBuiltinMPICH);
  return f == Family::OpenMPI ? ompi : mpich;
}

const Model& builtin(Family f) {
  static std::once_flag once;
  static Model models[2];
  std::call_once(once, [] {
    for (Family fam : {Family::OpenMPI, Family::Mpich}) {
      TuneFile t;
      std::string err;
      // The built-in files are part of the source tree; the unit tests parse them.
      if (!parse(builtin_text(fam), fam, JobShape{}, Model{}, t, err)) std::abort();
      t.model.source = "built-in";
      models[static_cast<int>(fam)] = t.model;
    }
  });
  return models[static_cast<int>(f)];
}


TuneFile load(const std::string& path, Family family, const JobShape& job) {
  TuneFile t;
  t.model = builtin(family);
  if (path.empty()) return t;
  std::string text, err;
  TuneFile f;
  if (util::read_file_capped(path, kMaxTuneBytes, text, err) && parse(text, family, job, t.model, f, err)) {
    f.source = path;
    if (f.version == 2) f.model.source = path;
    f.text = text;
    return f;
  }
  t.warning = "HIER_TUNE_FILE=" + path + ": " + err + "; using the built-in model";
  return t;
}

JobShape job_from_env() {
  auto num = [](const char* a, const char* b) {
    const char* v = std::getenv(a);
    if (!v) v = std::getenv(b);
    return v ? std::atoi(v) : 0;
  };
  const int size = num("OMPI_COMM_WORLD_SIZE", "PMI_SIZE");
  const int local = num("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS");
  if (size <= 0 || local <= 0 || size % local) return {};
  return {size / local, local};
}

std::string fingerprint(const TuneFile& t) {
  if (t.text.empty()) return "built-in";
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : t.text) h = (h ^ c) * 1099511628211ull;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string("a file with contents hash ") + buf;
}

namespace {
TuneFile g_process;
std::once_flag g_process_once;
}  // namespace

void force_builtin() {
  process();  // loaded (and warned about) once, then replaced
  TuneFile b;
  b.model = builtin(build_family());
  g_process = std::move(b);
}

const TuneFile& process() {
  static TuneFile& t = g_process;
  std::call_once(g_process_once, [] {
    t = load(config::get().tune_file, build_family(), job_from_env());
    if (!t.warning.empty()) HIER_WARN("model", "%s", t.warning.c_str());
    else if (t.version == 2) HIER_INFO("model", "machine model from HIER_TUNE_FILE=%s", t.source.c_str());
    else if (t.version == 1)
      HIER_INFO("model", "HIER_TUNE_FILE=%s is libhier-tune/1: datatype model only; collectives use the built-in model",
                t.source.c_str());
  });
  return t;
}

}  // namespace hier::model
