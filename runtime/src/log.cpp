#include "troupe/log.hpp"

#include "troupe/error.hpp"

#include "utf8.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace troupe {

std::string loggable(std::string_view text, std::size_t max) {
  std::string out;
  auto shown = std::min(text.size(), max);
  out.reserve(shown + 16);
  auto hex = [&](unsigned char c) { out += fmt::format("\\x{:02x}", c); };
  std::size_t i = 0;
  while (i < shown) {
    auto c = static_cast<unsigned char>(text[i]);
    auto len = detail::utf8_sequence(text, i);
    if (len != 0 && i + len > shown)
      break; // a character the bound cuts: left out whole
    if (len == 0) {
      hex(c); // not UTF-8
      ++i;
      continue;
    }
    if (len > 1) {
      // The C1 controls (U+0080 to U+009F, such as CSI) drive terminals too.
      if (len == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
        hex(c);
        hex(static_cast<unsigned char>(text[i + 1]));
      } else {
        out.append(text.substr(i, len));
      }
      i += len;
      continue;
    }
    switch (c) {
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\\':
      out += "\\\\";
      break;
    default:
      if (c < 0x20 || c == 0x7f)
        hex(c);
      else
        out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  if (shown < text.size())
    out += fmt::format("... ({} bytes in all)", text.size());
  return out;
}

namespace {

/// Writes each line to stderr with its message made loggable: one line per message, bounded.
class bounded_stderr_sink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    auto text = loggable(std::string_view(msg.payload.data(), msg.payload.size()), max_log_message);
    spdlog::details::log_msg safe(msg.time, msg.source, msg.logger_name, msg.level, text);
    spdlog::memory_buf_t line;
    formatter_->format(safe, line);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<bounded_stderr_sink>();
  auto logger = std::make_shared<spdlog::logger>("troupe", sink);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  logger->set_level(spdlog::level::info);
  return logger;
}

std::shared_ptr<spdlog::logger>& instance() {
  static std::shared_ptr<spdlog::logger> logger = make_logger();
  return logger;
}

} // namespace

spdlog::logger& log() {
  return *instance();
}

void configure_logging(std::string_view level, std::string_view format) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off")
    throw error(errc::invalid_argument, "log level \"" + std::string(level) +
                                          "\" is not one of trace, debug, info, warn, error, off");
  if (format != "text")
    throw error(errc::invalid_argument,
                "log format \"" + std::string(format) + "\" is not supported (only \"text\")");
  log().set_level(lvl);
}

} // namespace troupe
