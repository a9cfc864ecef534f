// The bad-input matrix: every way a user, a plugin or a disk can hand `tessera` bad input,
// each run through the real binary, which must fail cleanly and leave no partial output.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include <xxhash.h>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/codelets.hpp"
#include "tessera/package.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSmallModel = source_path("configs/models/mlp-small.yaml");
const std::string kSmallPipeline = source_path("configs/pipelines/small.yaml");
const std::string kTestPlugins = std::string(TESSERA_BINARY_DIR) + "/test-plugins/";

// Bad-input cases checked, printed when the test executable exits (for the closing figures).
int g_cases = 0;
struct CaseCountPrinter {
  ~CaseCountPrinter() {
    if (g_cases > 0) std::fprintf(stderr, "bad-input cases checked: %d\n", g_cases);
  }
} g_case_count_printer;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// No package and no temporary file of one (".NAME.tmp-PID") anywhere under `dir`.
void check_no_partial_output(const fs::path& dir, const std::string& package) {
  CHECK_FALSE(fs::exists(package));
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_symlink(ec)) it.disable_recursion_pending();
    INFO("left behind: " << it->path());
    CHECK(it->path().filename().string().find(".tmp-") == std::string::npos);
  }
}

// Non-zero exit, no signal, no crash or sanitizer report, and an `error:` line that contains
// every string of `names` (the file and the place, or the plugin).
void check_failed_cleanly(const CommandResult& r, const std::vector<std::string>& names) {
  ++g_cases;
  INFO("stderr:\n" << r.err);
  CHECK(r.exit_code > 0);
  CHECK(r.signal == 0);
  for (const char* crash : {"terminate called", "internal error", "AddressSanitizer", "runtime error:", "Segmentation fault"})
    CHECK_THAT(r.err, !Catch::Contains(crash));
  const auto found = r.err.rfind("\nerror: ");  // the last line that starts with it
  REQUIRE((found != std::string::npos || r.err.rfind("error: ", 0) == 0));
  const auto at = found == std::string::npos ? 0 : found + 1;
  const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
  for (const auto& name : names) CHECK_THAT(line, Catch::Contains(name));
}

// check_failed_cleanly, and nothing left in `dir`.
void check_clean_failure(const CommandResult& r, const std::vector<std::string>& names, const fs::path& dir,
                         const std::string& package) {
  check_failed_cleanly(r, names);
  check_no_partial_output(dir, package);
}

// A copy of the small pipeline in `dir` with `from` replaced by `to` (the shipped paths made absolute).
std::string pipeline_with(const TempDir& dir, const std::string& from, const std::string& to, const std::string& name = "pipeline.yaml") {
  std::string text = read_file(pipeline_copy(dir, kSmallPipeline, "pipeline: small", "pipeline: small"));
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  return dir.write(name, text);
}

// The small pipeline with one more plugin folder in front.
std::string pipeline_with_plugin_dir(const TempDir& dir, const std::string& folder) {
  return pipeline_with(dir, "plugin_paths: [", "plugin_paths: [" + folder + ", ");
}

std::string model_with(const TempDir& dir, const std::string& from, const std::string& to) {
  std::string text = read_file(kSmallModel);
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  return dir.write("model.yaml", text);
}

std::string target_with(const TempDir& dir, const std::string& from, const std::string& to) {
  std::string text = read_file(source_path("configs/targets/t16.yaml"));
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), to);
  return dir.write("target.yaml", text);
}

CommandResult compile(const std::string& model, const std::string& pipeline, const std::string& package,
                      std::vector<std::string> extra = {}) {
  std::vector<std::string> arguments{tessera_binary(), "compile", model, "-p", pipeline, "-o", package};
  arguments.insert(arguments.end(), extra.begin(), extra.end());
  return run_command(arguments);
}

struct Section {
  std::string name;
  std::uint64_t offset = 0, size = 0;
};

std::uint64_t little_endian(const std::string& bytes, std::size_t at, int width) {
  std::uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes.at(at + i));
  return value;
}

// The section table of a package: a 24-byte header, then 32-byte entries
// {u32 tag, u32 index, u64 offset, u64 size, u64 checksum} (see core/src/package.cpp).
std::vector<Section> package_sections(const std::string& bytes) {
  std::vector<Section> sections;
  const auto count = little_endian(bytes, 12, 4);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::size_t entry = 24 + 32 * i;
    const auto tag = little_endian(bytes, entry, 4);
    std::string name(reinterpret_cast<const char*>(&tag), 4);
    name += "[" + std::to_string(little_endian(bytes, entry + 4, 4)) + "]";
    sections.push_back({name, little_endian(bytes, entry + 8, 8), little_endian(bytes, entry + 16, 8)});
  }
  return sections;
}

template <typename T> void put_little_endian(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

TEST_CASE("bad inputs YAML syntax errors name the file, line and column", "[robustness]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  const auto pipeline = pipeline_with(dir, "passes:", "passes: [oops");
  check_clean_failure(compile(kSmallModel, pipeline, package), {pipeline + ":", "YAML syntax error"}, dir.path(), package);

  const auto model = dir.write("model.yaml", "model: m\ntensors: [{name: x\n");
  check_clean_failure(compile(model, pipeline_with(dir, "passes:", "passes:"), package), {model + ":", "YAML syntax error"},
                      dir.path(), package);

  const auto target = dir.write("target.yaml", "name: t\ntiles: [16\n");
  check_clean_failure(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package, {"-t", target}),
                      {target + ":", "YAML syntax error"}, dir.path(), package);
}

TEST_CASE("bad inputs unknown keys and wrong types name the key's place", "[robustness]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  const auto pipeline = pipeline_with(dir, "passes:", "passses:");
  check_clean_failure(compile(kSmallModel, pipeline, package), {pipeline + ":7:1"}, dir.path(), package);

  const auto wrong_option = pipeline_with(dir, "finalists: 2", "finalists: two");
  check_clean_failure(compile(kSmallModel, wrong_option, package), {wrong_option + ":9:", "finalists"}, dir.path(), package);

  const auto good_pipeline = pipeline_with(dir, "passes:", "passes:", "good.yaml");
  auto model = model_with(dir, "kind: input, scale", "kind: input, colour: red, scale");
  check_clean_failure(compile(model, good_pipeline, package), {model + ":5:", "unknown key 'colour'"}, dir.path(), package);

  // A key that is a list (found by fuzz_model: it escaped as YAML::BadConversion).
  model = model_with(dir, "{op: relu, inputs: [a1]", "{op: relu, [inputs]: [a1]");
  check_clean_failure(compile(model, good_pipeline, package), {model + ":16:", "a key must be a plain name"}, dir.path(), package);

  model = model_with(dir, "shape: [2, 64]", "shape: [two, 64]");
  check_clean_failure(compile(model, good_pipeline, package), {model + ":5:", "shape"}, dir.path(), package);

  const auto target = target_with(dir, "tiles: 16", "tiles: sixteen");
  check_clean_failure(compile(kSmallModel, good_pipeline, package, {"-t", target}), {target + ":3:", "tiles"}, dir.path(), package);

  const auto unknown_target_key = target_with(dir, "sync_cycles: 90", "sync_cycle: 90");
  check_clean_failure(compile(kSmallModel, good_pipeline, package, {"-t", unknown_target_key}),
                      {unknown_target_key + ":", "sync_cycle"}, dir.path(), package);
}

TEST_CASE("bad inputs missing and circular paths are named", "[robustness]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  const auto pipeline = pipeline_with(dir, "passes:", "passes:");
  const std::string missing = (dir.path() / "no-such-model.yaml").string();
  check_clean_failure(compile(missing, pipeline, package), {missing}, dir.path(), package);
  check_clean_failure(compile(kSmallModel, missing, package), {missing}, dir.path(), package);

  const auto no_target = pipeline_with(dir, "configs/targets/t16.yaml", "configs/targets/t99.yaml", "p2.yaml");
  check_clean_failure(compile(kSmallModel, no_target, package), {no_target + ":3:", "t99.yaml"}, dir.path(), package);

  // A target path that is a directory.
  fs::create_directories(dir.path() / "targets.d");
  const auto target_dir = pipeline_with(dir, source_path("configs/targets/t16.yaml"), (dir.path() / "targets.d").string(), "p3.yaml");
  check_clean_failure(compile(kSmallModel, target_dir, package), {target_dir + ":3:", "is a directory"}, dir.path(), package);

  // A plugin path that is a symlink loop: loop-a -> loop-b -> loop-a.
  fs::create_symlink(dir.path() / "loop-b", dir.path() / "loop-a");
  fs::create_symlink(dir.path() / "loop-a", dir.path() / "loop-b");
  const auto looped = pipeline_with_plugin_dir(dir, (dir.path() / "loop-a").string());
  check_clean_failure(compile(kSmallModel, looped, package), {looped + ":4:", "loop-a"}, dir.path(), package);
}

TEST_CASE("bad inputs plugin faults are named with the plugin or its file", "[robustness]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();

  auto pipeline = pipeline_with(dir, "plugin: greedy", "plugin: gready");
  check_clean_failure(compile(kSmallModel, pipeline, package), {pipeline + ":6:", "did you mean 'greedy'?"}, dir.path(), package);

  fs::create_directories(dir.path() / "not-a-library");
  const auto fake = dir.write("not-a-library/fake.so", "this is text, not ELF\n");
  pipeline = pipeline_with_plugin_dir(dir, (dir.path() / "not-a-library").string());
  check_clean_failure(compile(kSmallModel, pipeline, package), {fake, "cannot load plugin library"}, dir.path(), package);

  pipeline = pipeline_with_plugin_dir(dir, kTestPlugins + "no-entry");
  check_clean_failure(compile(kSmallModel, pipeline, package), {"no-entry.so", "does not export"}, dir.path(), package);

  pipeline = pipeline_with_plugin_dir(dir, kTestPlugins + "abi-major");
  check_clean_failure(compile(kSmallModel, pipeline, package), {"test-abi-major.so", "major version"}, dir.path(), package);

  pipeline = pipeline_with_plugin_dir(dir, kTestPlugins + "duplicate-greedy");
  check_clean_failure(compile(kSmallModel, pipeline, package), {"duplicate plugin name 'greedy'", "test-duplicate-greedy.so", "greedy.so"},
                      dir.path(), package);

  std::string text = read_file(pipeline_with_plugin_dir(dir, kTestPlugins + "throwing-pass"));
  text.replace(text.find("  - {plugin: lower-mid}"), 0, "  - {plugin: throwing-pass}\n");
  pipeline = dir.write("pipeline.yaml", text);
  check_clean_failure(compile(kSmallModel, pipeline, package), {"throwing-pass", "deliberate failure inside the plugin"}, dir.path(), package);

  text = read_file(pipeline_with_plugin_dir(dir, kTestPlugins + "invalid-scheduler"));
  text.replace(text.find("plugin: greedy"), 14, "plugin: all-at-once");
  pipeline = dir.write("pipeline.yaml", text);
  check_clean_failure(compile(kSmallModel, pipeline, package), {kSmallModel, "all-at-once", "invalid schedule"}, dir.path(), package);
}

TEST_CASE("bad inputs models that are empty, huge, too big or mismatched are refused", "[robustness]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  const auto pipeline = pipeline_with(dir, "passes:", "passes:");

  auto model = dir.write("empty.yaml", "");
  check_clean_failure(compile(model, pipeline, package), {model, "empty"}, dir.path(), package);
  model = dir.write("no-ops.yaml", "model: e\ntensors: []\nops: []\noutputs: []\n");
  check_clean_failure(compile(model, pipeline, package), {model + ":2:", "tensors"}, dir.path(), package);

  // Sizes whose products overflow 32 and 64 bits must be refused, not wrapped.
  model = dir.write("huge.yaml", "model: huge\ntensors:\n  - {name: x, shape: [16777216, 16777216], kind: input}\n"
                                 "  - {name: w, shape: [16777216, 16777216], kind: weight}\n"
                                 "ops: [{op: matmul, inputs: [x, w], output: y}]\noutputs: [y]\n");
  check_clean_failure(compile(model, pipeline, package), {model}, dir.path(), package);
  model = dir.write("too-big-dim.yaml", "model: huge\ntensors:\n  - {name: x, shape: [2, 99999999999999999999], kind: input}\n"
                                        "ops: [{op: relu, inputs: [x], output: y}]\noutputs: [y]\n");
  check_clean_failure(compile(model, pipeline, package), {model + ":3:"}, dir.path(), package);

  model = dir.write("big.yaml", "model: big\ntensors:\n  - {name: x, shape: [2, 4096], kind: input}\n"
                                "  - {name: w, shape: [4096, 4096], kind: weight}\n"
                                "ops: [{op: matmul, inputs: [x, w], output: y}]\noutputs: [y]\n");
  check_clean_failure(compile(model, pipeline, package), {model, "model does not fit"}, dir.path(), package);

  model = model_with(dir, "shape: [64, 96]", "shape: [65, 96]");
  check_clean_failure(compile(model, pipeline, package), {model + ":11:", "inner dimensions differ"}, dir.path(), package);
  model = model_with(dir, "inputs: [h0, b0]", "inputs: [h0, b1]");
  check_clean_failure(compile(model, pipeline, package), {model + ":12:"}, dir.path(), package);
  model = model_with(dir, "inputs: [a0]", "inputs: [nothing]");
  check_clean_failure(compile(model, pipeline, package), {model + ":13:", "nothing"}, dir.path(), package);
}

TEST_CASE("bad inputs an unwritable or full output directory leaves nothing behind", "[robustness]") {
  TempDir dir;
  const auto pipeline = pipeline_with(dir, "passes:", "passes:");
  // As root permission bits are ignored: a parent that is a regular file cannot be written to.
  dir.write("regular-file", "x");
  const std::string under_file = (dir.path() / "regular-file" / "x.tpkg").string();
  check_clean_failure(compile(kSmallModel, pipeline, under_file), {under_file, "cannot write package"}, dir.path(), under_file);

  // A full disk, simulated with RLIMIT_FSIZE in the child: 4 KiB (dash counts 512-byte
  // blocks), less than the 10 KiB package. The limit applies to the stderr file too: keep it quiet.
  const std::string package = (dir.path() / "x.tpkg").string();
  auto r = run_command({"/bin/sh", "-c", "ulimit -f 8 && exec \"$0\" --log-level error compile \"$1\" -p \"$2\" -o \"$3\"", tessera_binary(),
                        kSmallModel, pipeline, package});
  check_clean_failure(r, {package, "cannot write package", "File too large"}, dir.path(), package);
}

TEST_CASE("bad inputs truncated and corrupt packages are refused naming the section", "[robustness]") {
  TempDir dir;
  const std::string package = (dir.path() / "good.tpkg").string();
  const auto t16 = source_path("configs/targets/t16.yaml");
  REQUIRE(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package).exit_code == 0);
  const std::string good = read_file(package);
  const std::string broken = (dir.path() / "broken.tpkg").string();
  auto run = [&] {
    return run_command({tessera_binary(), "run", broken, "--lock", (dir.path() / "lock").string(), "-t", t16});
  };
  // Truncations: inside the header, the table, the first and the last sections, and empty.
  for (std::size_t length : {std::size_t(0), std::size_t(10), std::size_t(40), good.size() / 2, good.size() - 1}) {
    INFO("truncated to " << length << " of " << good.size() << " bytes");
    write_file(broken, good.substr(0, length));
    auto r = run();
    ++g_cases;
    CHECK(r.exit_code == 1);
    CHECK(r.signal == 0);
    CHECK_THAT(r.err, Catch::Contains("error: " + broken + ": "));
    CHECK_THAT(r.err, !Catch::Contains("numericalTest"));
  }
  // One flipped byte in the header, the table and each section, first, middle and last byte.
  const auto sections = package_sections(good);
  REQUIRE(sections.size() == 3 + 16);
  for (std::size_t at : {std::size_t(9), std::size_t(13), std::size_t(20), std::size_t(24 + 8)}) {
    std::string bytes = good;
    bytes[at] ^= 0x01;
    write_file(broken, bytes);
    auto r = run();
    ++g_cases;
    INFO("flipped header/table byte " << at << "\n" << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("error: " + broken + ": "));
  }
  for (const auto& section : sections) {
    for (std::uint64_t at : {section.offset, section.offset + section.size / 2, section.offset + section.size - 1}) {
      std::string bytes = good;
      bytes[at] ^= 0x20;
      write_file(broken, bytes);
      auto r = run();
      ++g_cases;
      INFO("flipped byte " << at << " in " << section.name << "\n" << r.err);
      CHECK(r.exit_code == 1);
      CHECK(r.signal == 0);
      CHECK_THAT(r.err, Catch::Contains("error: " + broken + ": section " + section.name + " checksum mismatch"));
    }
  }
}

TEST_CASE("bad inputs run refuses a package compiled for another target naming both", "[robustness]") {
  TempDir dir;
  const std::string package = (dir.path() / "small.tpkg").string();
  REQUIRE(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package).exit_code == 0);
  const auto t1472 = source_path("configs/targets/t1472.yaml");
  auto r = run_command({tessera_binary(), "run", package, "-t", t1472, "--lock", (dir.path() / "lock").string()});
  ++g_cases;
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("error: " + package + ": package was compiled for target 't16'") &&
                        Catch::Contains("not for 't1472' from " + t1472));
  CHECK_THAT(r.out, !Catch::Contains("device_cycles"));
  // A target with the same name but another figure is another machine too.
  const auto edited = target_with(dir, "sync_cycles: 90", "sync_cycles: 91");
  r = run_command({tessera_binary(), "run", package, "-t", edited, "--lock", (dir.path() / "lock").string()});
  ++g_cases;
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("not for 't16' from " + edited));
  // The right target passes the check and runs.
  r = run_command({tessera_binary(), "run", package, "-t", source_path("configs/targets/t16.yaml"), "--lock", (dir.path() / "lock").string()});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
}

namespace {

// Starts `tessera compile` on mlp-b2-n3, waits until `ready` says so, sends SIGINT and returns
// the wait status; `ready` is polled every millisecond with the child's stderr file.
int interrupt_compile(const TempDir& dir, const std::string& package, const std::function<bool(const std::string&)>& ready,
                      bool& sent_while_ready) {
  const std::string err_file = (dir.path() / "stderr").string();
  const std::string pipeline = pipeline_copy(dir, source_path("configs/pipelines/default.yaml"), "pipeline: default", "pipeline: default");
  const std::string model = source_path("configs/models/mlp-b2-n3.yaml");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child == 0) {
    int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    int null = ::open("/dev/null", O_WRONLY);
    dup2(null, 1);
    const std::string binary = tessera_binary();
    execl(binary.c_str(), binary.c_str(), "compile", model.c_str(), "-p", pipeline.c_str(), "-o", package.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  sent_while_ready = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline || ready(read_file(err_file))) {
      sent_while_ready = std::chrono::steady_clock::now() <= deadline;
      kill(child, SIGINT);
      waitpid(child, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return status;
}

bool temporary_exists(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("bad inputs SIGINT during a compile leaves no package and no temporary file", "[robustness]") {
  SECTION("while the passes run") {
    TempDir dir;
    const std::string package = (dir.path() / "out" / "model.tpkg").string();
    bool sent = false;
    const int status = interrupt_compile(
        dir, package, [](const std::string& err) { return err.find("phase=\"select_finalist\"") != std::string::npos; }, sent);
    ++g_cases;
    CHECK(sent);
    CHECK(((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) || (WIFEXITED(status) && WEXITSTATUS(status) != 0)));
    check_no_partial_output(dir.path(), package);
  }
  SECTION("while the package is being written") {
    // Interrupt as soon as the temporary file exists: the handler must remove it. A fast
    // machine may finish the write between two polls; then the run proves nothing and is retried.
    bool caught_in_write = false;
    for (int attempt = 0; attempt < 3 && !caught_in_write; ++attempt) {
      TempDir dir;
      const std::string package = (dir.path() / "out" / "model.tpkg").string();
      bool sent = false;
      const int status = interrupt_compile(
          dir, package, [&](const std::string&) { return temporary_exists(dir.path() / "out"); }, sent);
      if (!sent || !WIFSIGNALED(status)) continue;  // finished before the temporary file was seen
      caught_in_write = true;
      ++g_cases;
      CHECK(WTERMSIG(status) == SIGINT);
      check_no_partial_output(dir.path(), package);
    }
    if (!caught_in_write) WARN("the package write was never caught in progress; SIGINT-during-write unchecked");
  }
}

namespace {

// A package of the small model compiled into `dir`, decoded, for forging.
tessera::Package small_package(const TempDir& dir) {
  const std::string package = (dir.path() / "good.tpkg").string();
  REQUIRE(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package).exit_code == 0);
  return tessera::read_package(package);
}

CommandResult run_package_file(const TempDir& dir, const std::string& package) {
  return run_command({tessera_binary(), "run", package, "--lock", (dir.path() / "lock").string()});
}

}  // namespace

TEST_CASE("bad inputs forged sizes that wrap around 64 bits are refused by the reader", "[robustness]") {
  TempDir dir;
  tessera::Package package = small_package(dir);
  // An in-place softmax of 2^31 x 2^31 on a real buffer: 2^62 words, whose 2^64 bytes wrap to 0.
  const std::uint32_t buffer = package.tiles[0].buffers.at(0).offset;
  auto& compute = package.tiles[0].supersteps.at(0).compute;
  compute.push_back({tessera::Codelet::softmax, {buffer, buffer}, {1u << 31, 1u << 31, tessera::float_param(1.0f)}});
  const std::string forged = (dir.path() / "softmax.tpkg").string();
  tessera::write_package(package, forged);
  check_failed_cleanly(run_package_file(dir, forged),
                       {forged + ": section TILE[0]: superstep 0 call " + std::to_string(compute.size() - 1) +
                            " (softmax) operand 0 of 4611686018427387904 words",
                        "outside the tile's 638976 bytes"});
}

TEST_CASE("bad inputs a forged weight larger than the device is refused before it is allocated", "[robustness]") {
  TempDir dir;
  tessera::Package package = small_package(dir);
  // 2^32 elements nothing uses: the host would allocate 16 GiB for its initial values.
  tessera::Tensor unused;
  unused.name = "unused";
  unused.shape = {65536, 65536};
  unused.kind = tessera::TensorKind::weight;
  package.graph.tensors.push_back(unused);
  const std::string forged = (dir.path() / "huge-weight.tpkg").string();
  tessera::write_package(package, forged);
  check_failed_cleanly(run_package_file(dir, forged),
                       {forged + ": section GRPH[0]: tensor 'unused' of 65536 x 65536 elements is larger than the "
                                 "10223616 bytes of target 't16'"});
}

TEST_CASE("bad inputs a section table pointing many entries at one blob is refused before hashing it", "[robustness]") {
  TempDir dir;
  const std::string good_path = (dir.path() / "good.tpkg").string();
  REQUIRE(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), good_path).exit_code == 0);
  const std::string good = read_file(good_path);
  const auto sections = package_sections(good);
  // The real META, GRPH and STRM, then 200,000 TILE entries all naming one 1 MiB blob: checksumming
  // each entry would read 200 GB.
  constexpr std::uint32_t kEntries = 200'000;
  const std::string blob(1 << 20, 'x');
  const std::uint64_t blob_checksum = XXH64(blob.data(), blob.size(), 0);
  std::string payloads, table;
  const std::uint64_t first_payload = 24 + 32ull * kEntries;
  for (std::uint32_t i = 0; i < kEntries; ++i) {
    const bool real = i < 3;
    const std::string tag = real ? sections[i].name.substr(0, 4) : "TILE";
    put_little_endian(table, static_cast<std::uint32_t>(little_endian(tag, 0, 4)));
    put_little_endian(table, std::uint32_t(real ? 0 : i - 3));
    if (real) {
      const std::string payload = good.substr(sections[i].offset, sections[i].size);
      put_little_endian(table, first_payload + payloads.size());
      put_little_endian(table, std::uint64_t(payload.size()));
      put_little_endian(table, std::uint64_t(XXH64(payload.data(), payload.size(), 0)));
      payloads += payload;
      if (i == 2) payloads += blob;
    } else {
      put_little_endian(table, first_payload + payloads.size() - blob.size());
      put_little_endian(table, std::uint64_t(blob.size()));
      put_little_endian(table, blob_checksum);
    }
  }
  std::string bytes = good.substr(0, 12);  // magic and format version
  put_little_endian(bytes, kEntries);
  put_little_endian(bytes, std::uint64_t(XXH64(table.data(), table.size(), 0)));
  const std::string forged = (dir.path() / "repeated-blob.tpkg").string();
  write_file(forged, bytes + table + payloads);
  check_failed_cleanly(run_package_file(dir, forged), {forged + ": section table entry 4 (TILE[1])", "overlapping"});
}
