// A list of ranks as report text: ascending runs collapsed ("0-3,5,7-8"). Shared by the
// watchdog's hang report and the finalize mismatch check, which name rank groups the same way.
#pragma once

#include <string>
#include <vector>

namespace hier::diag {

// `ranks` ascending; "" when empty.
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace hier::diag
