// `tessera plugins list|info`.
#include "plugins_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/diagnostic.hpp"
#include "tessera/session.hpp"

namespace tessera::cli {

int plugins_command(const std::string& name, const std::vector<std::string>& extra_paths) {
  PluginHost host;
  find_plugins(host, extra_paths);
  if (name.empty()) {
    fmt::print("{:<20} {:<20} {:<8} {}\n", "kind", "name", "version", "file");
    for (const PluginInfo* info : host.plugins())
      fmt::print("{:<20} {:<20} {:<8} {}\n", plugin_kind_name(info->kind), info->name, info->version, info->file);
    return 0;
  }
  const PluginInfo* info = host.find(name);
  if (!info) {
    if (const std::string* reason = host.skipped_library(name))
      throw Error("cannot load plugin '" + name + "': " + *reason);
    for (PluginKind kind : {PluginKind::pass, PluginKind::cost_model, PluginKind::exchange_scheduler}) {
      std::string message = host.unknown_plugin_message(name, kind);
      if (message.find("did you mean") != std::string::npos) throw Error(message);
    }
    throw Error("unknown plugin '" + name + "' (see `tessera plugins list`)");
  }
  fmt::print("name: {}\nkind: {}\nversion: {}\nsummary: {}\nfile: {}\napi: {}.{}\nabi: {}\n", info->name,
             plugin_kind_name(info->kind), info->version, info->summary, info->file, info->api_major, info->api_minor,
             info->abi_tag);
  if (info->kind == PluginKind::pass) {
    fmt::print("requires: {}\nprovides: {}\n", fmt::join(info->required_facts, ", "),
               fmt::join(info->provided_facts, ", "));
  }
  fmt::print("options:{}\n", info->options.empty() ? " none" : "");
  for (const auto& option : info->options) {
    const std::string limits = option_limits_text(option);
    fmt::print("  {} ({}{}, default {}): {}\n", option.name, option_type_name(option.type),
               limits.empty() ? ""
                              : (!option.choices.empty()            ? ", "
                                 : option.minimum && option.maximum ? " in "
                                                                    : " ") +
                                    limits,
               option_value_text(option.default_value), option.doc);
  }
  return 0;
}

}  // namespace tessera::cli
