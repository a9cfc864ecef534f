// The package file: round trip, atomic writes, and a reader that names the first problem.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <filesystem>
#include <fstream>

#include "tessera/diagnostic.hpp"
#include "tessera/package.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::source_path;
using tessera::testing::TempDir;

static Package small_package() {
  Package p;
  p.compiler_version = "0.1.0";
  p.target = load_target(source_path("configs/targets/t16.yaml"));
  p.target_hash = p.target.hash();
  p.graph = load_model(source_path("configs/models/mlp-small.yaml"));
  p.superstep_labels = {"dense0.matmul", "dense0.reduce"};
  p.estimates.estimated_cycles = 1234;
  p.streams.push_back({"x", StreamKind::input, 2, 64, {{3, 1024, 0, 2, 0, 64}}});
  p.tiles.resize(p.target.tiles);
  for (std::uint32_t t = 0; t < p.target.tiles; ++t) {
    TileImage& image = p.tiles[t];
    image.tile = t;
    image.buffers = {{1024, 512, Region::standard}, {262144, 4096, Region::interleaved}};
    image.supersteps.resize(2);
    image.supersteps[0].compute.push_back({Codelet::matmul, {1024, 262144, 2048}, {2, 4, 8, 0}});
    image.supersteps[0].sends.push_back({7, 2048, 16});
    image.supersteps[1].receives.push_back({13, (t + 1) % 16, 1024, 16});
  }
  return p;
}

TEST_CASE("package round trip keeps every field", "[package]") {
  TempDir dir;
  const std::string file = (dir.path() / "out/model.tpkg").string();
  Package written = small_package();
  write_package(written, file);
  Package read = read_package(file);
  CHECK(read.compiler_version == "0.1.0");
  CHECK(read.target.name == "t16");
  CHECK(read.target.hash() == written.target.hash());
  CHECK(read.superstep_labels == written.superstep_labels);
  CHECK(read.estimates.estimated_cycles == 1234);
  CHECK(read.graph.ops.size() == written.graph.ops.size());
  CHECK(read.graph.tensors[read.graph.outputs[0]].name == "y1");
  REQUIRE(read.tiles.size() == 16);
  CHECK(read.tiles[5].supersteps[1].receives[0].sender == 6);
  CHECK(read.tiles[5].supersteps[0].compute[0].params == std::vector<std::uint32_t>{2, 4, 8, 0});
  CHECK(read.streams[0].slices[0].address == 1024);
  // No temporary file is left beside the package.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path() / "out"), {}) == 1);
}

static std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST_CASE("package reader names a flipped byte in every section", "[package]") {
  TempDir dir;
  const std::string file = (dir.path() / "model.tpkg").string();
  write_package(small_package(), file);
  const std::string good = slurp(file);
  // Header (24 bytes) then 19 table entries of 32 bytes: flip one byte inside each payload.
  std::uint32_t sections = 0;
  std::memcpy(&sections, good.data() + 12, 4);
  REQUIRE(sections == 19);
  for (std::uint32_t s = 0; s < sections; ++s) {
    std::uint64_t offset = 0, size = 0;
    std::memcpy(&offset, good.data() + 24 + s * 32 + 8, 8);
    std::memcpy(&size, good.data() + 24 + s * 32 + 16, 8);
    std::string bad = good;
    bad[offset + size / 2] ^= 0x5a;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
    CHECK_THROWS_WITH(read_package(file), Catch::Contains("checksum mismatch"));
  }
  std::string bad = good;
  bad[30] ^= 1;  // inside the section table
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
  CHECK_THROWS_WITH(read_package(file), Catch::Contains("section table checksum mismatch"));
}

TEST_CASE("package reader reports truncation, bad magic and another version", "[package]") {
  TempDir dir;
  const std::string file = (dir.path() / "model.tpkg").string();
  write_package(small_package(), file);
  const std::string good = slurp(file);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << good.substr(0, good.size() - 100);
  CHECK_THROWS_WITH(read_package(file), Catch::Contains("past the end of the file") && Catch::Contains("truncated"));
  std::ofstream(file, std::ios::binary | std::ios::trunc) << good.substr(0, 10);
  CHECK_THROWS_WITH(read_package(file), Catch::Contains("not a Tessera package"));
  std::string other = good;
  other[8] = static_cast<char>(kPackageFormatVersion + 1);  // a version this reader does not know
  std::ofstream(file, std::ios::binary | std::ios::trunc) << other;
  CHECK_THROWS_WITH(read_package(file),
                    Catch::Contains("package format version " + std::to_string(kPackageFormatVersion + 1)));
  CHECK_THROWS_WITH(read_package((dir.path() / "none.tpkg").string()), Catch::Contains("cannot read the package"));
}

TEST_CASE("package writer into a read-only directory fails and leaves nothing", "[package]") {
  if (geteuid() == 0) {
    // root ignores permission bits; use a path under a regular file instead.
    TempDir dir;
    auto blocker = dir.write("file", "x");
    CHECK_THROWS_WITH(write_package(small_package(), blocker + "/model.tpkg"), Catch::Contains("cannot write package"));
    return;
  }
  TempDir dir;
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  CHECK_THROWS_WITH(write_package(small_package(), (dir.path() / "model.tpkg").string()),
                    Catch::Contains("cannot write package"));
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all);
  CHECK(std::filesystem::is_empty(dir.path()));
}
