// Loads and checks an A/B suite file.
#include "suite.hpp"

#include <cctype>
#include <filesystem>
#include <set>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "fingerprint.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/graph.hpp"
#include "tessera/onnx/import.hpp"
#include "tessera/strict_yaml.hpp"
#include "tessera/target.hpp"
#include "tessera/yaml_text.hpp"

namespace fs = std::filesystem;

namespace tessera::ab {

namespace {

std::string entry_path(const std::string& file, const YAML::Node& entry, const char* key) {
  const YAML::Node value = entry[key];
  if (!value.IsDefined())
    throw Error(yaml::place(file, entry) + ": a suite entry needs '" + key + "' (a path relative to the suite file)");
  if (!value.IsScalar()) throw Error(yaml::place(file, value) + ": '" + key + "' must be a file path");
  fs::path path(value.Scalar());
  if (path.is_relative()) path = fs::absolute(file).parent_path() / path;
  path = path.lexically_normal();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw Error(yaml::place(file, value) + ": " + key + " file not found: " + path.string() +
                " (paths are relative to the suite file)");
  return path.string();
}

// A model's name in ids: its file's stem, or its folder's name for an ONNX `model.onnx` (the
// layout of ONNX's test data and of tests/onnx/data).
std::string model_name(const std::string& path) {
  const fs::path file(path);
  if (file.filename() == "model.onnx" && file.has_parent_path() && !file.parent_path().filename().empty())
    return file.parent_path().filename().string();
  return file.stem().string();
}

}  // namespace

// Ids and names become folder names in the results directory.
bool is_safe_name(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.size() > 200) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '@')) return false;
  return true;
}

std::string suite_fingerprint(const std::string& name, const std::vector<SuiteEntry>& entries) {
  std::string text = "tessera-ab-suite/1\n" + name + "\n";
  for (const SuiteEntry& entry : entries) text += entry.id + " " + entry.model_hash + " " + entry.target_hash + "\n";
  return hash_text(text);
}

Suite load_suite(const std::string& path) {
  const YAML::Node root = yaml::load_file(path, "suite");
  Suite suite;
  suite.file = fs::absolute(path).lexically_normal().string();
  suite.name = fs::path(path).stem().string();
  YAML::Node models = root;
  if (root.IsMap()) {
    yaml::check_keys(path, root, {"suite", "models", "slurm"}, "a suite");
    if (root["suite"].IsDefined()) {
      if (!root["suite"].IsScalar()) throw Error(yaml::place(path, root["suite"]) + ": 'suite' must be a name");
      suite.name = root["suite"].Scalar();
    }
    if (const YAML::Node slurm = root["slurm"]; slurm.IsDefined()) {
      if (!slurm.IsMap())
        throw Error(yaml::place(path, slurm) +
                    ": 'slurm' must be a mapping, e.g. `slurm: {partition: compute, time: 1:00:00}`");
      yaml::check_keys(path, slurm, {"partition", "time", "mem", "account"}, "the suite's sbatch options");
      for (auto [key, field] : {std::pair{"partition", &suite.slurm.partition}, std::pair{"time", &suite.slurm.time},
                                std::pair{"mem", &suite.slurm.mem}, std::pair{"account", &suite.slurm.account}}) {
        if (!slurm[key].IsDefined()) continue;
        if (!slurm[key].IsScalar())
          throw Error(yaml::place(path, slurm[key]) + ": '" + key + "' must be a single value");
        *field = slurm[key].Scalar();
      }
    }
    models = root["models"];
  }
  if (!yaml::is_sequence(models) || models.size() == 0)
    throw Error(yaml::place(path, models.IsDefined() ? models : root) +
                ": a suite lists its models: `models: [{model: ../models/M.yaml, target: ../targets/T.yaml}]`");

  std::set<std::string> ids;
  for (const auto& node : models) {
    if (!node.IsMap()) throw Error(yaml::place(path, node) + ": a suite entry must be {model: PATH, target: PATH}");
    yaml::check_keys(path, node, {"model", "target", "name"}, "a suite entry");
    SuiteEntry entry;
    entry.model = entry_path(path, node, "model");
    entry.target = entry_path(path, node, "target");
    entry.id = yaml::is_scalar(node["name"]) ? node["name"].Scalar()
                                             : model_name(entry.model) + "@" + fs::path(entry.target).stem().string();
    if (!is_safe_name(entry.id))
      throw Error(yaml::place(path, node) + ": suite entry name '" + entry.id +
                  "' must use letters, digits, '-', '_', '.', '@' and not start with '.'; set `name:`");
    if (!ids.insert(entry.id).second)
      throw Error(yaml::place(path, node) + ": a second suite entry called '" + entry.id +
                  "'; give one of them another `name:`");
    onnx_import::load_any_model(entry.model);  // a broken model or target is reported now, not after an hour
    load_target(entry.target);
    entry.model_hash = hash_file(entry.model);
    entry.target_hash = hash_file(entry.target);
    suite.entries.push_back(std::move(entry));
  }
  // The name of the default results folder: it may not climb out of the cache or break a page.
  if (!is_safe_name(suite.name))
    throw Error(path + ": suite name " + echoed_token(suite.name) +
                " must use letters, digits, '-', '_', '.', '@' and not start with '.'; set `suite:`");
  suite.fingerprint = suite_fingerprint(suite.name, suite.entries);
  return suite;
}

}  // namespace tessera::ab
