// The page's files (dashboard/web/), built into the binary by cmake/embed_assets.cmake: the
// dashboard fetches nothing at run time and needs no files beside it.
#pragma once

#include <string_view>

namespace troupe::dashboard {

struct asset {
  std::string_view path; ///< "/index.html"
  std::string_view content_type;
  std::string_view body;
};

/// The file served at `path`, or nullptr.
const asset* find_asset(std::string_view path);

} // namespace troupe::dashboard
