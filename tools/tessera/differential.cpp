// ONNX Runtime as a differential reference: the run's inputs through tools/onnxruntime/run.js.
#include "differential.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "subprocess.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/onnx/tensor_file.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/host_exchange.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

/// The folder holding run.js and its node_modules.
fs::path onnxruntime_dir() {
  if (const char* dir = std::getenv("TESSERA_ONNXRUNTIME_DIR"); dir != nullptr && *dir != '\0') return dir;
  return TESSERA_ONNXRUNTIME_DIR;
}

/// A fresh private folder, removed with everything in it when this goes out of scope.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "tessera-differential-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw Error(fmt::format("cannot create a folder like {}", pattern));
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

DifferentialReport differential_check(const Package& package, const PreparedRun& prepared,
                                      const runtime::RunOptions& options, const runtime::HostTensors& device) {
  const fs::path script = onnxruntime_dir() / "run.js";
  if (!fs::exists(script))
    throw Error(
        fmt::format("--differential: {} is missing; set TESSERA_ONNXRUNTIME_DIR to the folder holding Tessera's "
                    "tools/onnxruntime",
                    script.string()));
  ScratchDir scratch;
  // The device's inputs exactly: given ones, and the seeded values of the rest.
  runtime::HostTensors inputs = runtime::initial_host_tensors(package.graph, TensorKind::input);
  for (const auto& [name, values] : options.inputs) inputs[name] = values;
  std::vector<std::string> command = {"node", script.string(), prepared.model, (scratch.path / "outputs").string()};
  for (std::size_t i = 0; i < prepared.input_dims.size(); ++i) {
    const auto& [name, dims] = prepared.input_dims[i];
    auto values = inputs.find(name);
    if (values == inputs.end())
      throw Error(fmt::format("--differential: the package has no input '{}' of the model", name));
    const std::string file = (scratch.path / fmt::format("input_{}.npy", i)).string();
    const std::int64_t index = package.graph.find_tensor(name);
    const DType dtype = index < 0 ? DType::float32 : package.graph.tensors[static_cast<std::size_t>(index)].dtype;
    const auto type = prepared.element_types.find(name);
    onnx_import::write_tensor_file(file,
                                   {name, dims, onnx_import::host_values(values->second, dtype),
                                    type == prepared.element_types.end() ? onnx_import::kFloatElements : type->second});
    command.push_back(name + "=" + file);
  }
  // Inputs the compile froze are constants on the device; ONNX Runtime is given their values.
  for (std::size_t i = 0; i < prepared.frozen_inputs.size(); ++i) {
    const auto& [value, values] = prepared.frozen_inputs[i];
    const std::string file = (scratch.path / fmt::format("frozen_{}.npy", i)).string();
    onnx_import::write_tensor_file(file, {value.name, value.dims, values, value.element_type});
    command.push_back(value.name + "=" + file);
  }
  if (find_in_path("node").empty())
    throw Error(
        "--differential: node is not in PATH; install Node.js and npm (scripts/bootstrap.sh installs Debian's nodejs "
        "and npm)");
  const ab::CapturedOutput ran = ab::run_captured(command);
  std::string message = ran.err;
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (ran.exit_code != 0)
    throw Error(
        fmt::format("--differential: ONNX Runtime failed on {} (exit {}): {}", prepared.model, ran.exit_code, message));
  DifferentialReport report;
  std::smatch version;
  const std::string& printed = ran.out;
  if (std::regex_search(printed, version, std::regex("onnxruntime=([0-9A-Za-z.+-]+)")))
    report.onnxruntime_version = version[1];
  report.passed = true;
  for (const auto& [name, dims] : prepared.output_dims) {
    std::string file = name;
    for (char& c : file)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
    const onnx_import::TensorFile reference =
        onnx_import::read_tensor_file((scratch.path / "outputs" / (file + ".npy")).string());
    const std::int64_t index = package.graph.find_tensor(name);
    const DType dtype = index < 0 ? DType::float32 : package.graph.tensors[static_cast<std::size_t>(index)].dtype;
    runtime::HostTensors expected{
        {name, onnx_import::device_words(reference, dtype, fmt::format("--differential: ONNX Runtime's '{}'", name))}};
    runtime::HostTensors got{{name, device.at(name)}};
    // Rounding the weights to halves moves every output by about the same share of its scale.
    double atol = options.expect_atol;
    if (prepared.float16_stored_weights > 0) {
      double largest = 0;
      for (float value : expected.at(name)) largest = std::max(largest, std::fabs(static_cast<double>(value)));
      atol += runtime::float16_relative_tolerance(package.graph) * largest;
    }
    DifferentialOutput output{
        name, runtime::compare_with_expected(package.graph, got, expected, atol, options.expect_rtol), atol};
    report.passed = report.passed && output.report.passed;
    report.outputs.push_back(std::move(output));
  }
  logger("tessera.runtime")
      ->info("differential run against onnxruntime model={} onnxruntime={} outputs={} passed={}", prepared.model,
             report.onnxruntime_version, report.outputs.size(), report.passed);
  return report;
}

}  // namespace tessera::cli
