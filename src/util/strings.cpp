#include "util/strings.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace hier::util {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.push_back(trim(s.substr(start, pos - start)));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string expand_path_template(const std::string& tmpl, int rank) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '%' || i + 1 >= tmpl.size()) { out += tmpl[i]; continue; }
    const char c = tmpl[++i];
    if (c == 'h') {
      char host[256] = {0};
      gethostname(host, sizeof host - 1);
      out += host;
    } else if (c == 'p') {
      out += std::to_string(getpid());
    } else if (c == 'r') {
      out += rank >= 0 ? std::to_string(rank) : std::string("na");
    } else if (c == '%') {
      out += '%';
    } else {
      out += '%';
      out += c;
    }
  }
  return out;
}

}  // namespace hier::util
