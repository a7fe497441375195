// Extension points for components that need the process lifecycle or the report without
// core knowing them: register once (e.g. on first use), run at finalize / report time. A leaf
// (src/base): every layer may register.
#pragma once

#include <functional>
#include <string>

namespace hier::base {

// Runs at MPI_Finalize, after the report is written and before PMPI_Finalize, in reverse
// order of registration (free level communicators, caches, ...). Thread-safe.
void add_finalize_hook(std::function<void()> fn);

// Adds a top-level key to the report; `json_text` returns a JSON value as text.
void add_report_section(std::string key, std::function<std::string()> json_text);

// One INFO line from a layer that cannot include the logger (device, a leaf's peer): core sets
// the sink at init (diag's logger at HIER_DEBUG=INFO); a line noted before that is kept and
// written when the sink is set.
void note_info(const char* subsys, const std::string& text);
void set_info_sink(std::function<void(const char* subsys, const std::string& text)> sink);

// Used by core itself.
void run_finalize_hooks();
void for_each_report_section(const std::function<void(const std::string&, const std::string&)>& fn);

}  // namespace hier::base
