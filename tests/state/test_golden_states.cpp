// Golden states: each pass of the small pipeline, run alone on the saved state before it, must
// give exactly the saved state after it. After an intended change to a pass, regenerate them:
//   TESSERA_UPDATE_GOLDEN=1 build/tests/state/test_golden_states
// and read the diff (git diff tests/state/golden) as the change's review.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "temp_dir.hpp"
#include "tessera/graph.hpp"
#include "tessera/output_file.hpp"
#include "tessera/session.hpp"
#include "tessera/state_file.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using namespace tessera::testing;

namespace {

const std::string kSource = std::string(TESSERA_SOURCE_DIR) + "/";

// Paths inside the source tree are written relative to it, so the files hold on any checkout.
std::string portable(std::string text) {
  for (std::size_t at = text.find(kSource); at != std::string::npos; at = text.find(kSource, at))
    text.erase(at, kSource.size());
  return text;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void check_or_update(const fs::path& golden, const CompilationState& state) {
  const std::string text = portable(deterministic_state_text(state));
  if (std::getenv("TESSERA_UPDATE_GOLDEN")) {
    fs::create_directories(golden.parent_path());
    write_file_atomically(golden.string(), text, "a golden state");
    WARN("wrote " << golden.string());
    return;
  }
  REQUIRE(fs::exists(golden));
  // On a mismatch, the new state is left in the build tree for a diff.
  const bool same = text == read_text(golden);
  const fs::path actual =
      fs::path(TESSERA_BINARY_DIR) / "golden-actual" / golden.parent_path().filename() / golden.filename();
  if (!same) {
    fs::create_directories(actual.parent_path());
    write_file_atomically(actual.string(), text, "the state");
  }
  INFO("diff " << golden.string() << " " << actual.string());
  CHECK(same);
}

void check_model(const std::string& model) {
  TempDir dir;
  SessionOptions options;
  options.pipeline = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"));
  options.passes.threads = 1;
  Session session(options);
  const fs::path folder = source_path("tests/state/golden/" + model + "-t16");
  CompilationState initial = session.initial_state(load_model(source_path("configs/models/" + model + ".yaml")));
  check_or_update(folder / "initial.tstate", initial);

  fs::path input = folder / "initial.tstate";
  for (const PluginUse& use : session.spec().passes) {
    INFO("pass " << use.plugin);
    CompilationState state = std::getenv("TESSERA_UPDATE_GOLDEN") ? std::move(initial) : read_state(input.string());
    const Status status = session.run_passes(state, {use});
    INFO(status.message);
    REQUIRE(status.ok);
    const fs::path output = folder / (phase_name(use.plugin) + ".tstate");
    check_or_update(output, state);
    initial = std::move(state);  // the chain, when updating
    input = output;
  }
}

}  // namespace

TEST_CASE("each pass turns its golden input state into its golden output: mlp-small", "[state][golden]") {
  check_model("mlp-small");
}

TEST_CASE("each pass turns its golden input state into its golden output: mlp-small-f16", "[state][golden]") {
  check_model("mlp-small-f16");
}

TEST_CASE("the long passes say how far they are, in order, to the progress line", "[state][progress]") {
  TempDir dir;
  SessionOptions options;
  options.pipeline = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"));
  options.passes.threads = 2;  // progress may come from the planner's worker threads
  std::mutex mutex;
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>> said;  // unit -> (done, total)
  options.passes.on_pass_progress = [&](std::uint64_t done, std::uint64_t total, std::string_view unit) {
    std::lock_guard lock(mutex);
    said[std::string(unit)].emplace_back(done, total);
  };
  Session session(options);
  CompilationState state = session.initial_state(load_model(source_path("configs/models/mlp-small.yaml")));
  REQUIRE(session.run(state).ok);
  for (const char* unit : {"ops", "tiles", "supersteps"}) {
    INFO(unit);
    const auto& steps = said[unit];
    REQUIRE(!steps.empty());
    const std::uint64_t total = steps.front().second;
    CHECK(total > 0);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      CHECK(steps[i].second == total);
      CHECK(steps[i].first <= total);
      if (i > 0) CHECK(steps[i].first > steps[i - 1].first);
    }
  }
  CHECK(said["ops"].size() == state.graph.ops.size());
  CHECK(said["tiles"].back() == std::pair<std::uint64_t, std::uint64_t>{16, 16});
  CHECK(said["supersteps"].front().second == state.program.supersteps.size());
}
