// Determinism: the same model, pipeline and target give a bit-identical package on every run
// and with 1 or 2 compile threads.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Compiles `model` with a copy of `pipeline` (this build's plugins) into `name` with `threads`.
std::string compile(const TempDir& dir, const std::string& model, const std::string& pipeline_copy_path,
                    const std::string& name, unsigned threads) {
  const std::string package = (dir.path() / name).string();
  const CommandResult r = run_command({tessera_binary(), "compile", source_path(model), "-p", pipeline_copy_path, "-o",
                                       package, "--threads", std::to_string(threads)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return read_bytes(package);
}

// Packages differ only if some byte does: report the first, so a failure says where to look.
void check_identical(const std::string& a, const std::string& b) {
  REQUIRE(!a.empty());
  CHECK(a.size() == b.size());
  const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  INFO("first differing byte at offset " << (mismatch.first - a.begin()));
  CHECK(a == b);
}

}  // namespace

// select-finalist plans on --threads workers (candidates and finalists side by side); the
// package must not depend on how many.
TEST_CASE("compile gives bit-identical packages across runs and thread counts", "[trust][determinism]") {
  TempDir dir;
  SECTION("mlp-small on t16") {
    const std::string pipeline =
        pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "finalists: 2", "finalists: 2");
    const std::string first = compile(dir, "configs/models/mlp-small.yaml", pipeline, "a.tpkg", 1);
    check_identical(first, compile(dir, "configs/models/mlp-small.yaml", pipeline, "b.tpkg", 1));
    check_identical(first, compile(dir, "configs/models/mlp-small.yaml", pipeline, "c.tpkg", 2));
  }
  SECTION("mlp-b2-n3 on t1472") {
    const std::string pipeline =
        pipeline_copy(dir, source_path("configs/pipelines/default.yaml"), "finalists: 2", "finalists: 2");
    const std::string first = compile(dir, "configs/models/mlp-b2-n3.yaml", pipeline, "a.tpkg", 1);
    check_identical(first, compile(dir, "configs/models/mlp-b2-n3.yaml", pipeline, "b.tpkg", 1));
    check_identical(first, compile(dir, "configs/models/mlp-b2-n3.yaml", pipeline, "c.tpkg", 2));
  }
}

TEST_CASE("compile rejects a thread count of zero", "[trust][determinism]") {
  const CommandResult r =
      run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p",
                   source_path("configs/pipelines/small.yaml"), "-o", "/nonexistent/x.tpkg", "--threads", "0"});
  CHECK(r.exit_code != 0);
  CHECK(r.signal == 0);
  CHECK_THAT(r.err, Catch::Contains("--threads"));
}
