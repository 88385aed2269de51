#include "socket_proxy.hpp"

#include "troupe/dsn.hpp"
#include "troupe/error.hpp"

#include <fmt/format.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace troupe::testkit {

namespace {

sockaddr_un address_of(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path))
    throw std::runtime_error("socket path too long: " + path);
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// Writes all of `data`, or returns false when the peer is gone.
bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    auto n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

} // namespace

socket_proxy::socket_proxy(std::string target_dir, int port) : port_(port) {
  char pattern[] = "/tmp/troupe-proxy-XXXXXX";
  if (::mkdtemp(pattern) == nullptr)
    throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  target_ = fmt::format("{}/.s.PGSQL.{}", target_dir, port);
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
  auto a = address_of(fmt::format("{}/.s.PGSQL.{}", dir_, port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::pipe(wake_) != 0)
    throw std::runtime_error("cannot listen at " + dir_);
  thread_ = std::thread([this] { run(); });
}

socket_proxy::~socket_proxy() {
  done_ = true;
  char c = 0;
  (void)!::write(wake_[1], &c, 1);
  thread_.join();
  for (auto& p : pairs_) {
    ::close(p.client);
    ::close(p.server);
  }
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string socket_proxy::dsn(const std::string& dsn) const {
  auto user = dsn_option(dsn, "user").value_or("postgres");
  auto db = dsn_option(dsn, "dbname").value_or("postgres");
  return fmt::format("host={} port={} user={} dbname={}", dir_, port_, user, db);
}

void socket_proxy::cut_all() {
  cut_ = true;
  char c = 0;
  (void)!::write(wake_[1], &c, 1);
  while (cut_)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void socket_proxy::run() {
  char buf[65536];
  while (!done_) {
    std::vector<pollfd> fds;
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& p : pairs_) {
      fds.push_back({p.client, POLLIN, 0});
      fds.push_back({p.server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0)
      continue;
    if (fds[0].revents & POLLIN) {
      (void)!::read(wake_[0], buf, sizeof(buf));
      if (cut_) {
        for (auto& p : pairs_) {
          ::close(p.client);
          ::close(p.server);
        }
        pairs_.clear();
        cut_ = false;
        continue;
      }
    }
    auto polled = pairs_.size(); // the pairs fds[2...] watch; one accepted now waits its turn
    if (fds[1].revents & POLLIN) {
      int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client >= 0) {
        if (refusing_) {
          ::close(client);
          ++refused_count_;
        } else {
          int server = ::socket(AF_UNIX, SOCK_STREAM, 0);
          auto a = address_of(target_);
          if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
            ::close(server);
            ::close(client);
          } else {
            pairs_.push_back({client, server});
          }
        }
      }
    }
    std::vector<pair> kept;
    for (std::size_t i = 0; i < pairs_.size(); ++i) {
      auto& p = pairs_[i];
      if (i >= polled) {
        kept.push_back(p);
        continue;
      }
      bool alive = true;
      for (int side = 0; side < 2 && alive; ++side) {
        const auto& f = fds[2 + 2 * i + static_cast<std::size_t>(side)];
        if (!(f.revents & (POLLIN | POLLHUP | POLLERR)))
          continue;
        int from = side == 0 ? p.client : p.server;
        int to = side == 0 ? p.server : p.client;
        auto n = ::recv(from, buf, sizeof(buf), 0);
        alive = n > 0 && write_all(to, buf, static_cast<std::size_t>(n));
      }
      if (alive) {
        kept.push_back(p);
      } else {
        ::close(p.client);
        ::close(p.server);
      }
    }
    pairs_ = std::move(kept);
  }
}

} // namespace troupe::testkit
