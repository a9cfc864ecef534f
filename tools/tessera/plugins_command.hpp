// `tessera plugins list|info`: what plugins are available and what they accept.
#pragma once
#include <string>
#include <vector>

namespace tessera::cli {

/// Loads the bundled plugins, TESSERA_PLUGIN_PATH and `extra_paths`, then prints a table
/// (name empty) or one plugin's details. Returns the exit code.
int plugins_command(const std::string& name, const std::vector<std::string>& extra_paths);

}  // namespace tessera::cli
