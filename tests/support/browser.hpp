// A real browser for the dashboard's tests: Debian's headless Chromium, driven over its DevTools
// protocol on a pipe (--remote-debugging-pipe: JSON messages ended by NUL on file descriptors 3
// and 4), so no driver package and no WebSocket client are needed. Clicks are mouse events at
// the element's place on the page, as a user's are.
#pragma once

#include <chrono>
#include <string>

namespace troupe::testkit {

class browser {
public:
  /// The Chromium to run: $TROUPE_CHROMIUM, else /usr/bin/chromium when it exists; empty when
  /// there is none.
  static std::string find_chromium();

  /// Starts `chromium` headless with a fresh profile and opens one page of `width` x `height`.
  /// Throws std::runtime_error when it does not answer within 30 s.
  explicit browser(const std::string& chromium, int width = 1280, int height = 900);
  ~browser(); ///< closes it, kills it if need be, and removes its profile
  browser(const browser&) = delete;
  browser& operator=(const browser&) = delete;

  /// Loads `url` (returns once the navigation is committed; wait_for what the page must show).
  void navigate(const std::string& url);
  /// The value of JavaScript `expression` in the page (a promise is awaited), as JSON text.
  /// Throws std::runtime_error with the page's exception text.
  std::string evaluate(const std::string& expression);
  /// Evaluates `condition` every 100 ms until it is true or `limit` passes; whether it was.
  bool wait_for(const std::string& condition,
                std::chrono::milliseconds limit = std::chrono::seconds(15));
  /// A left click at the middle of the first element `selector` matches (scrolled into view).
  /// Throws std::runtime_error when none does.
  void click(const std::string& selector);
  /// Clicks the field `selector` and types `text` into it.
  void type(const std::string& selector, const std::string& text);
  /// A PNG of the whole page at `path`.
  void screenshot(const std::string& path);

private:
  /// Sends `method` with `params` (a JSON object) to the page's session (or to the browser) and
  /// returns its "result" as JSON text.
  std::string call(const std::string& method, const std::string& params, bool to_page = true);
  std::string read_message(std::chrono::steady_clock::time_point deadline);

  int pid_ = -1;
  int to_browser_ = -1;
  int from_browser_ = -1;
  int next_id_ = 1;
  std::string pending_;
  std::string session_;
  std::string profile_;
};

/// Where a test saves what it leaves for people to look at (screenshots): $TROUPE_TEST_ARTIFACTS,
/// else test-artifacts/ in the build folder; `sub` below it, created.
std::string artifact_dir(const std::string& sub);

} // namespace troupe::testkit
