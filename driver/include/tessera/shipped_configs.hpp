// The configs shipped with tessera (pipelines, targets, models, suites), found by name.
#pragma once
#include <string>

namespace tessera {

/// The folder of shipped configs: <prefix>/share/tessera when this executable is installed,
/// else the source tree's configs/ this build came from; "" if neither exists.
std::string shipped_config_directory();

/// True for a bare name (`t16`, `small`): no '/', no '.yaml' or '.onnx' suffix, not empty.
bool is_config_name(const std::string& text);

/// `name_or_path` as a file: itself when it names a file or looks like a path (has a '/' or a
/// '.yaml'/'.onnx' suffix), else the shipped <kind>/<name>.yaml ("pipelines", "targets",
/// "models", "suites"). Throws Error for a name that is neither, with the nearest shipped name
/// and the list; `what` names the argument ("-p", "target:").
std::string find_config(const std::string& name_or_path, const std::string& kind, const std::string& what);

}  // namespace tessera
