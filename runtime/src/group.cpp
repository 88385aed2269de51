#include "composition_access.hpp"
#include "json_options.hpp"
#include "pipeline_steps.hpp"
#include "publish_plan.hpp"
#include "troupe/composition.hpp"
#include "troupe/error.hpp"
#include "troupe/options.hpp"

#include "storage/borrowed_connection.hpp"
#include "storage/migrations.hpp"
#include "storage/naming.hpp"
#include "storage/operations.hpp"

#include <fmt/format.h>

namespace troupe {

namespace detail {

namespace {

std::string json_string(const std::string& s) {
  return encode_value(s);
}

std::string steps_array(const std::vector<message>& steps, const std::string& composition_id) {
  std::string out = "[";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    auto m = steps[i];
    m.options_json = with_option(m.options_json, "composition_id", composition_id);
    if (i > 0)
      out += ',';
    out += step_json(m);
  }
  return out + "]";
}

} // namespace

std::vector<message> render_group(const group& g, const std::string& composition_id,
                                  const std::string& pipe_target_json) {
  std::vector<message> out;
  std::string members = "[";
  for (const auto& each : g.members()) {
    std::string result_id;
    if (auto* m = each.as_message()) {
      auto s = *m;
      s.options_json = with_option(s.options_json, "composition_id", composition_id);
      s.options_json = with_option(s.options_json, "group_id", g.id());
      result_id = s.id;
      out.push_back(std::move(s));
    } else {
      const auto& p = *each.as_pipeline();
      for (auto& s : render_pipeline(p.steps(), composition_id, g.id()))
        out.push_back(std::move(s));
      result_id = p.last().id;
    }
    members += (members.size() > 1 ? "," : "") + json_string(result_id);
  }
  members += "]";
  // The callbacks and the next step are plain data of the group's row until it finishes.
  std::string def =
    fmt::format(R"({{"id":{},"members":{},"on_success":{},"on_failure":{})", json_string(g.id()),
                members, steps_array(g.on_success_messages(), composition_id),
                steps_array(g.on_failure_messages(), composition_id));
  if (!pipe_target_json.empty())
    def += R"(,"pipe_target":)" + pipe_target_json;
  def += "}";
  // The first message may be the first of a nested group too (a member pipeline that starts
  // with a group): it then carries every group it starts, outermost last.
  auto& first = out.front();
  if (auto inner = option_json(first.options_json, "group_def"))
    first.options_json = with_json_option(first.options_json, "group_def",
                                          inner->front() == '[' ? append_to_array(*inner, def)
                                                                : "[" + *inner + "," + def + "]");
  else
    first.options_json = with_object_option(first.options_json, "group_def", def);
  return out;
}

void collect_ids(const group& g, std::vector<std::string>& out) {
  for (const auto& each : g.members()) {
    if (auto* m = each.as_message())
      out.push_back(m->id);
    else
      collect_ids(each.as_pipeline()->steps(), out);
  }
  for (const auto& m : g.on_success_messages())
    out.push_back(m.id);
  for (const auto& m : g.on_failure_messages())
    out.push_back(m.id);
}

error groups_missing(int version) {
  return error(errc::invalid_argument,
               fmt::format("the area is at schema version {}; groups need migration {} "
                           "(troupe upgrade)",
                           version, groups_version));
}

void require_groups(client& c) {
  if (auto v = client_access::area_version(c); v < groups_version)
    throw groups_missing(v);
}

void require_groups(pg_conn* native, const area& where) {
  storage::borrowed_connection conn(native);
  auto stmts = statements_for(where);
  auto table = storage::quote_identifier(where.schema) + "." +
               storage::quote_identifier(where.prefix + "groups");
  if (conn.run(stmts->get(storage::sql::area_exists), {table}).is_null(0, 0))
    throw error(errc::invalid_argument,
                fmt::format("the area has no groups yet: they need migration {} (troupe upgrade)",
                            groups_version));
}

} // namespace detail

group::group(std::vector<member> members) : id_(new_message_id()) {
  if (members.empty())
    throw error(errc::invalid_argument, "a group needs at least one member");
  if (members.size() > max_group_members)
    throw error(errc::invalid_argument, fmt::format("a group has at most {} members, got {}",
                                                    max_group_members, members.size()));
  for (auto& each : members) {
    if (auto* m = each.as_message()) {
      auto copy = *m;
      normalize_message(copy);
      members_.emplace_back(std::move(copy));
    } else {
      if (!each.as_pipeline()->steps().back().as_message())
        throw error(errc::invalid_argument,
                    "a pipeline that is a group member must end with a message, not a group");
      members_.push_back(std::move(each));
    }
  }
  std::vector<std::string> ids;
  detail::collect_ids(*this, ids);
  detail::require_unique(ids, "group");
}

namespace {

void add_callback(std::vector<message>& to, message m, const group& g, const char* kind) {
  if (to.size() >= max_group_members)
    throw error(errc::invalid_argument,
                fmt::format("a group has at most {} {} callbacks", max_group_members, kind));
  normalize_message(m);
  std::vector<std::string> ids;
  detail::collect_ids(g, ids);
  ids.push_back(m.id);
  detail::require_unique(std::move(ids), "group");
  to.push_back(std::move(m));
}

} // namespace

group& group::on_success(message callback) {
  add_callback(on_success_, std::move(callback), *this, "success");
  return *this;
}

group& group::on_failure(message callback) {
  add_callback(on_failure_, std::move(callback), *this, "failure");
  return *this;
}

std::vector<std::string> group::result_ids() const {
  std::vector<std::string> out;
  for (const auto& each : members_)
    out.push_back(each.as_message() ? each.as_message()->id : each.as_pipeline()->last().id);
  return out;
}

std::vector<message> group::messages() const {
  return detail::render_group(*this, id_, {});
}

std::vector<message> group::run(client& c, const enqueue_options& options) const {
  auto published = messages();
  auto opts = detail::composition_options(options, published.size(), "group");
  detail::require_groups(c);
  return c.enqueue_many(std::move(published), std::move(opts));
}

std::vector<message> group::run_in_transaction(pg_conn* conn, const area& where,
                                               const enqueue_options& options) const {
  auto published = messages();
  auto opts = detail::composition_options(options, published.size(), "group");
  detail::require_groups(conn, where);
  return enqueue_many_in_transaction(conn, where, std::move(published), std::move(opts));
}

std::vector<std::string> group::get_results_json(client& c, bool block,
                                                 std::chrono::milliseconds timeout) const {
  std::vector<std::string> out;
  for (const auto& id : result_ids())
    out.push_back(c.get_result_json(id, block, timeout));
  return out;
}

group_status group::status(client& c) const {
  return get_group(c, id_);
}

std::size_t group::completed_count(client& c) const {
  return static_cast<std::size_t>(status(c).succeeded);
}

bool group::completed(client& c) const {
  return status(c).state == "done";
}

group_status get_group(client& c, const std::string& id) {
  std::string canonical;
  if (!parse_uuid(id, canonical))
    throw error(errc::invalid_argument, "group id \"" + id + "\" is not a UUID");
  return detail::client_access::read_group(c, canonical);
}

} // namespace troupe
