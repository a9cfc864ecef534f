// End-to-end: an ONNX MLP compiled and run with its real weights, a .pb/.npy input and expected outputs.
#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <cstring>
#include <regex>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/onnx/tensor_file.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kModel = "tests/onnx/data/mlp-b2-w64-n3";

std::string tail(const std::string& text) { return text.substr(text.size() > 4000 ? text.size() - 4000 : 0); }

CommandResult run_tessera(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), tessera_binary());
  return run_command(arguments, {std::string("TESSERA_PLUGIN_PATH=")});
}

std::string compile(const TempDir& dir, const std::string& model) {
  const std::string package = (dir.path() / "model.tpkg").string();
  auto r = run_tessera(
      {"compile", model, "-p", pipeline_copy(dir, source_path("configs/pipelines/small.yaml")), "-o", package});
  INFO(tail(r.err));
  REQUIRE(r.exit_code == 0);
  return package;
}

}  // namespace

TEST_CASE("tessera compiles an ONNX MLP and runs it with a .pb input, matching the expected output", "[onnx][e2e]") {
  TempDir dir;
  const std::string package = compile(dir, source_path(kModel + "/model.onnx"));
  const std::string outputs = (dir.path() / "out").string();
  auto r = run_tessera({"run", package, "--lock", (dir.path() / "device.lock").string(), "--input",
                        "x=" + source_path(kModel + "/test_data_set_0/input_0.pb"), "--expect",
                        "y=" + source_path(kModel + "/test_data_set_0/output_0.pb"), "--output-dir", outputs, "-v"});
  INFO(tail(r.err) << r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("expectTest=PASS"));
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
  CHECK_THAT(r.out, Catch::Contains("mismatches=0 elements=32 "));
  CHECK_THAT(r.err, Catch::Contains("generated_inputs=0"));
  // The weights are read once the device holds the program, not while the package holds it too.
  const std::size_t loaded = r.err.find("application loaded"), read = r.err.find("weights read from the model");
  REQUIRE(loaded != std::string::npos);
  REQUIRE(read != std::string::npos);
  CHECK(loaded < read);
  CHECK_THAT(r.err, Catch::Contains("weights=6 ") && Catch::Contains("given_weights=6 "));
  // The written output has the model's dims and the device's values, which matched the expected ones.
  const auto written = tessera::onnx_import::read_tensor_file(outputs + "/y.pb");
  const auto expected = tessera::onnx_import::read_tensor_file(source_path(kModel + "/test_data_set_0/output_0.pb"));
  CHECK(written.dims == std::vector<std::int64_t>{2, 16});
  REQUIRE(written.values.size() == expected.values.size());
  for (std::size_t i = 0; i < written.values.size(); ++i)
    CHECK(written.values[i] == Approx(expected.values[i]).epsilon(1e-3).margin(1e-7));

  // The same input as .npy gives the same answer.
  const std::string npy = (dir.path() / "x.npy").string();
  tessera::onnx_import::write_tensor_file(
      npy, tessera::onnx_import::read_tensor_file(source_path(kModel + "/test_data_set_0/input_0.pb")));
  r = run_tessera({"run", package, "--lock", (dir.path() / "device.lock").string(), "--input", "x=" + npy, "--expect",
                   "y=" + source_path(kModel + "/test_data_set_0/output_0.pb")});
  INFO(tail(r.err));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("expectTest=PASS"));
}

TEST_CASE("a transformer encoder layer as torch exports it runs with its weights and matches its expected output",
          "[onnx][e2e]") {
  // nn.TransformerEncoderLayer's export pattern (scripts/make_onnx_models.py): packed Q/K/V
  // chunked by Slice, heads split and merged by Reshape and Transpose, K^T read as transpose_b.
  TempDir dir;
  const std::string model = "tests/onnx/data/encoder-torch-s16-e32-h2";
  const std::string package = (dir.path() / "encoder.tpkg").string();
  auto compiled = run_tessera({"compile", source_path(model + "/model.onnx"), "-p",
                               pipeline_copy(dir, source_path("configs/pipelines/small.yaml")), "-o", package, "-v"});
  INFO(tail(compiled.err));
  REQUIRE(compiled.exit_code == 0);
  for (const char* kind : {"kind=slice_columns", "kind=split_heads", "kind=merge_heads"})
    CHECK_THAT(compiled.err, Catch::Contains(kind));
  auto r = run_tessera({"run", package, "--lock", (dir.path() / "device.lock").string(), "--input",
                        "x=" + source_path(model + "/test_data_set_0/input_0.pb"), "--expect",
                        "y=" + source_path(model + "/test_data_set_0/output_0.pb")});
  INFO(tail(r.err) << r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("expectTest=PASS") && Catch::Contains("numericalTest=PASS"));
  CHECK_THAT(r.out, Catch::Contains("mismatches=0 elements=512 "));
}

TEST_CASE("tessera run refuses an ONNX model changed since compile, and --weights takes another's weights",
          "[onnx][e2e]") {
  TempDir dir;
  const std::string model = (dir.path() / "model.onnx").string();
  fs::copy_file(source_path(kModel + "/model.onnx"), model);
  const std::string package = compile(dir, model);
  // Change one weight of the model in place, as a re-export would.
  onnx::ModelProto proto;
  {
    std::ifstream in(model, std::ios::binary);
    REQUIRE(proto.ParseFromIstream(&in));
  }
  onnx::TensorProto* weight = proto.mutable_graph()->mutable_initializer(0);
  REQUIRE(weight->has_raw_data());
  std::string raw = weight->raw_data();
  const float changed = 3.0f;
  std::memcpy(raw.data(), &changed, sizeof changed);
  weight->set_raw_data(raw);
  const std::string other = (dir.path() / "retrained.onnx").string();
  std::ofstream(other, std::ios::binary) << proto.SerializeAsString();
  fs::copy_file(other, model, fs::copy_options::overwrite_existing);

  const std::vector<std::string> data = {"--lock",   (dir.path() / "device.lock").string(),
                                         "--input",  "x=" + source_path(kModel + "/test_data_set_0/input_0.pb"),
                                         "--expect", "y=" + source_path(kModel + "/test_data_set_0/output_0.pb")};
  std::vector<std::string> run = {"run", package};
  run.insert(run.end(), data.begin(), data.end());
  auto r = run_tessera(run);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(model + ": the model changed since the package was compiled (sha256 "));
  CHECK(r.out.find("device_cycles=") == std::string::npos);
  // A hostile file in its place is never parsed: its sha256 is checked on the bytes first.
  const std::string original = (dir.path() / "original.onnx").string();
  fs::rename(model, original);
  std::ofstream(model, std::ios::binary) << std::string(4096, '\x08');
  auto swapped = run_tessera(run);
  CHECK(swapped.exit_code == 1);
  CHECK(swapped.signal == 0);
  CHECK_THAT(swapped.err, Catch::Contains(model + ": the model changed") && Catch::Contains("it is not parsed"));
  // A missing model is refused before the device loads the package (its weights are read after).
  fs::remove(model);
  std::vector<std::string> verbose = {"-v"};
  verbose.insert(verbose.end(), run.begin(), run.end());
  auto missing = run_tessera(verbose);
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err,
             Catch::Contains(model + ": the model the package's weights come from is not a readable file"));
  CHECK(missing.err.find("loading application") == std::string::npos);
  fs::rename(original, model);

  // A signed package: its weights come only from the model whose sha256 it records, never --weights.
  const std::string key = (dir.path() / "key").string();
  std::ofstream(key) << std::string(48, 'k');
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
  const std::string signed_package = (dir.path() / "signed.tpkg").string();
  REQUIRE(run_tessera({"compile", model, "-p", pipeline_copy(dir, source_path("configs/pipelines/small.yaml")), "-o",
                       signed_package, "--sign", key})
              .exit_code == 0);
  auto verified = run_tessera(
      {"run", signed_package, "--verify", key, "--weights", other, "--lock", (dir.path() / "device.lock").string()});
  CHECK(verified.exit_code == 1);
  CHECK_THAT(verified.err, Catch::Contains("--weights " + other + ": with --verify, weights come only from the model"));

  // With the changed weights given explicitly the device computes with them: the reference agrees,
  // the expected output (of the original weights) does not.
  run.insert(run.end(), {"--weights", other});
  r = run_tessera(run);
  INFO(tail(r.err));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
  CHECK_THAT(r.out, Catch::Contains("expectTest=FAIL"));
  std::smatch mismatches;
  REQUIRE(std::regex_search(r.out, mismatches, std::regex("mismatches=([0-9]+)")));
  CHECK(std::stoi(mismatches[1]) > 0);
}

TEST_CASE("tessera run refuses an input that is not the model's, and --weights on a YAML package", "[onnx][e2e]") {
  TempDir dir;
  const std::string package = compile(dir, source_path(kModel + "/model.onnx"));
  auto r = run_tessera({"run", package, "--lock", (dir.path() / "device.lock").string(), "--input",
                        "z=" + source_path(kModel + "/test_data_set_0/input_0.pb")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("input 'z' is not one of the model's: x"));
  r = run_tessera({"run", package, "--lock", (dir.path() / "device.lock").string(), "--input", "x"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("give NAME=FILE"));

  TempDir yaml_dir;
  const std::string yaml_package = compile(yaml_dir, source_path("configs/models/mlp-small.yaml"));
  r = run_tessera({"run", yaml_package, "--lock", (yaml_dir.path() / "device.lock").string(), "--weights",
                   source_path(kModel + "/model.onnx")});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("--weights applies to packages compiled from ONNX models"));
}
