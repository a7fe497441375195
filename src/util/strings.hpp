// Small string helpers shared by the config parser and the report.
#pragma once

#include <string>
#include <vector>

namespace hier::util {

std::string trim(const std::string& s);
std::string lower(std::string s);
std::vector<std::string> split(const std::string& s, char sep);
// Expands %h (host), %p (pid), %r (rank; "na" when < 0) and %% in a path template.
std::string expand_path_template(const std::string& tmpl, int rank);

}  // namespace hier::util
