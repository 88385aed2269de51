#include "troupe/log.hpp"

#include "troupe/error.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace troupe {

namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("troupe", sink);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
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
