#include "browser.hpp"

#include "scratch_area.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace troupe::testkit {

namespace {

std::string quote(const std::string& s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  return buf.GetString();
}

std::string to_json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return buf.GetString();
}

std::string base64_decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  std::string out;
  int bits = 0, acc = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0)
      continue; // '=' padding
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

constexpr auto call_limit = std::chrono::seconds(30);

} // namespace

std::string browser::find_chromium() {
  if (const char* given = std::getenv("TROUPE_CHROMIUM"))
    return given;
  if (::access("/usr/bin/chromium", X_OK) == 0)
    return "/usr/bin/chromium";
  return {};
}

browser::browser(const std::string& chromium, int width, int height) {
  char dir[] = "/tmp/troupe-chromium-XXXXXX";
  if (!::mkdtemp(dir))
    throw std::runtime_error("browser: cannot make a profile folder");
  profile_ = dir;
  int commands[2], events[2];
  if (::pipe2(commands, O_CLOEXEC) != 0 || ::pipe2(events, O_CLOEXEC) != 0)
    throw std::runtime_error("browser: cannot make its pipes");
  std::vector<std::string> args = {chromium,
                                   "--headless",
                                   "--remote-debugging-pipe",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-dev-shm-usage",
                                   "--no-first-run",
                                   "--no-default-browser-check",
                                   "--disable-extensions",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--user-data-dir=" + profile_,
                                   "--window-size=" + std::to_string(width) + "," +
                                     std::to_string(height),
                                   "about:blank"};
  std::string log = profile_ + ".log";
  pid_ = ::fork();
  if (pid_ == 0) {
    // Chromium reads commands on fd 3 and writes answers on fd 4. Both ends move above 4
    // first: an end that is fd 3 or 4 already would be overwritten by the other's dup2, or keep
    // its close-on-exec flag (dup2 onto itself does nothing).
    int read_end = ::fcntl(commands[0], F_DUPFD, 5);
    int write_end = ::fcntl(events[1], F_DUPFD, 5);
    ::dup2(read_end, 3);
    ::dup2(write_end, 4);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(commands[0]);
  ::close(events[1]);
  to_browser_ = commands[1];
  from_browser_ = events[0];
  if (pid_ < 0)
    throw std::runtime_error("browser: fork failed");
  auto target = call("Target.createTarget", R"({"url":"about:blank"})", false);
  rapidjson::Document t;
  t.Parse(target.c_str());
  std::string id = t["targetId"].GetString();
  auto attached =
    call("Target.attachToTarget", R"({"targetId":)" + quote(id) + R"(,"flatten":true})", false);
  rapidjson::Document a;
  a.Parse(attached.c_str());
  session_ = a["sessionId"].GetString();
  call("Page.enable", "{}");
  call("Emulation.setDeviceMetricsOverride", R"({"width":)" + std::to_string(width) +
                                               R"(,"height":)" + std::to_string(height) +
                                               R"(,"deviceScaleFactor":1,"mobile":false})");
}

browser::~browser() {
  if (pid_ > 0) {
    try {
      call("Browser.close", "{}", false);
    } catch (const std::exception&) {
    }
    bool gone = false;
    for (int i = 0; i < 50 && !gone; ++i) {
      gone = ::waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (!gone)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!gone) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  if (to_browser_ >= 0)
    ::close(to_browser_);
  if (from_browser_ >= 0)
    ::close(from_browser_);
  std::error_code ec;
  std::filesystem::remove_all(profile_, ec);
  std::filesystem::remove(profile_ + ".log", ec);
}

std::string browser::read_message(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    auto end = pending_.find('\0');
    if (end != std::string::npos) {
      auto message = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return message;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw std::runtime_error("browser: no answer within 30 s");
    pollfd p{from_browser_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      continue;
    char buf[65536];
    auto n = ::read(from_browser_, buf, sizeof buf);
    if (n <= 0) {
      std::ifstream in(profile_ + ".log");
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      throw std::runtime_error("browser: Chromium closed its pipe: " + text.substr(0, 2000));
    }
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

std::string browser::call(const std::string& method, const std::string& params, bool to_page) {
  int id = next_id_++;
  std::string message = R"({"id":)" + std::to_string(id) + R"(,"method":)" + quote(method) +
                        R"(,"params":)" + params +
                        (to_page ? R"(,"sessionId":)" + quote(session_) : std::string()) + "}";
  message.push_back('\0');
  std::size_t sent = 0;
  while (sent < message.size()) {
    auto n = ::write(to_browser_, message.data() + sent, message.size() - sent);
    if (n <= 0)
      throw std::runtime_error("browser: cannot write to Chromium");
    sent += static_cast<std::size_t>(n);
  }
  auto deadline = std::chrono::steady_clock::now() + call_limit;
  for (;;) {
    auto text = read_message(deadline);
    rapidjson::Document d;
    d.Parse(text.c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("id") || !d["id"].IsInt() ||
        d["id"].GetInt() != id)
      continue; // an event, or another call's answer
    if (d.HasMember("error"))
      throw std::runtime_error("browser: " + method + ": " + to_json(d["error"]));
    return d.HasMember("result") ? to_json(d["result"]) : std::string("{}");
  }
}

void browser::navigate(const std::string& url) {
  call("Page.navigate", R"({"url":)" + quote(url) + "}");
}

std::string browser::evaluate(const std::string& expression) {
  auto answer = call("Runtime.evaluate", R"({"expression":)" + quote(expression) +
                                           R"(,"returnByValue":true,"awaitPromise":true})");
  rapidjson::Document d;
  d.Parse(answer.c_str());
  if (d.HasMember("exceptionDetails")) {
    const auto& e = d["exceptionDetails"];
    std::string text = e.HasMember("exception") && e["exception"].HasMember("description")
                         ? e["exception"]["description"].GetString()
                         : to_json(e);
    throw std::runtime_error("browser: the page threw: " + text);
  }
  const auto& r = d["result"];
  return r.HasMember("value") ? to_json(r["value"]) : std::string("null");
}

bool browser::wait_for(const std::string& condition, std::chrono::milliseconds limit) {
  return wait_until(
    [&] {
      try {
        return evaluate("!!(" + condition + ")") == "true";
      } catch (const std::runtime_error&) {
        return false; // the page is loading
      }
    },
    limit);
}

void browser::click(const std::string& selector) {
  auto where = evaluate("(() => { const e = document.querySelector(" + quote(selector) +
                        "); if (!e) return null; e.scrollIntoView({block: 'center'}); "
                        "const r = e.getBoundingClientRect(); "
                        "return [r.left + r.width / 2, r.top + r.height / 2]; })()");
  if (where == "null")
    throw std::runtime_error("browser: nothing matches " + selector + " to click");
  rapidjson::Document d;
  d.Parse(where.c_str());
  auto x = std::to_string(d[0].GetDouble());
  auto y = std::to_string(d[1].GetDouble());
  for (const char* type : {"mouseMoved", "mousePressed", "mouseReleased"})
    call("Input.dispatchMouseEvent", std::string(R"({"type":")") + type + R"(","x":)" + x +
                                       R"(,"y":)" + y + R"(,"button":"left","clickCount":1})");
}

void browser::type(const std::string& selector, const std::string& text) {
  click(selector);
  call("Input.insertText", R"({"text":)" + quote(text) + "}");
}

void browser::screenshot(const std::string& path) {
  auto metrics = call("Page.getLayoutMetrics", "{}");
  rapidjson::Document m;
  m.Parse(metrics.c_str());
  const auto& size = m["cssContentSize"];
  auto width = std::to_string(size["width"].GetDouble());
  auto height = std::to_string(size["height"].GetDouble());
  auto shot = call("Page.captureScreenshot",
                   R"({"format":"png","captureBeyondViewport":true,"clip":{"x":0,"y":0,"width":)" +
                     width + R"(,"height":)" + height + R"(,"scale":1}})");
  rapidjson::Document d;
  d.Parse(shot.c_str());
  std::ofstream out(path, std::ios::binary);
  out << base64_decode(d["data"].GetString());
  if (!out)
    throw std::runtime_error("browser: cannot write " + path);
}

std::string artifact_dir(const std::string& sub) {
  std::filesystem::path base;
  if (const char* given = std::getenv("TROUPE_TEST_ARTIFACTS"))
    base = given;
  else
    base = std::filesystem::path(sibling_binary("troupe")).parent_path().parent_path() /
           "test-artifacts";
  auto dir = base / sub;
  std::filesystem::create_directories(dir);
  return dir.string();
}

} // namespace troupe::testkit
