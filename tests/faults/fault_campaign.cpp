// fault-campaign (`make test-faults`): a seeded random mix of compiles and runs of the real
// `tessera` under injected faults: plugins that crash, hang, allocate, lie or fail while loading;
// processes killed at random points (SIGKILL included); a full disk (RLIMIT_FSIZE); forged
// packages (bit flips, truncations, section forgeries with recomputed checksums); hostile inputs
// (a FIFO as the model, a device as the pipeline, a phase folder others can write). After each run
// it checks for a host crash (a signal other than the injected one), a hang (deadline), partial
// or corrupt output left behind, wrong numbers accepted and internal errors, and ends with a
// table of those counts. Exit status 1 if any count is not zero.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tessera/package.hpp"
#include "tessera/process.hpp"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kSource = TESSERA_SOURCE_DIR;
const std::string kBuild = TESSERA_BINARY_DIR;
const std::string kTessera = kBuild + "/tools/tessera";
constexpr int kDeadlineMs = 120000;  // a run still going after this is a hang

using Result = tessera::ProcessResult;

struct Spawn {
  std::vector<std::string> argv;
  tessera::ProcessOptions options;  // environment, file size limit and injected signal per run
};

Spawn command(std::vector<std::string> argv) {
  Spawn spawn;
  spawn.argv = std::move(argv);
  return spawn;
}

// Runs a command in a process group of its own, capturing what it prints, delivering the
// injected signal on time and killing the group at the deadline.
Result run(const Spawn& spawn) {
  tessera::ProcessOptions options = spawn.options;
  options.stdout_file = options.stderr_file = "";
  options.capture_limit = 256u << 10;
  options.timeout_ms = kDeadlineMs;
  options.own_process_group = true;
  return tessera::run_process(spawn.argv, options);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The small pipeline with `extra` as a plugin folder and one line replaced.
std::string pipeline(const fs::path& dir, const std::string& name, const std::string& from, const std::string& to,
                     const std::string& extra_folder = "") {
  std::string text = read_file(kSource + "/configs/pipelines/small.yaml");
  auto replace = [&](const std::string& a, const std::string& b) {
    const auto at = text.find(a);
    if (at == std::string::npos) throw std::runtime_error("small.yaml lacks '" + a + "'");
    text.replace(at, a.size(), b);
  };
  replace("plugin_paths: []", "plugin_paths: [" + extra_folder + "]");
  if (!from.empty()) replace(from, to);
  const std::string path = (dir / (name + ".yaml")).string();
  write_file(path, text);
  return path;
}

// Temporaries of the atomic writer (".NAME.tmp-PID-XXXXXX") anywhere under `dir`.
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->path().filename().string().find(".tmp-") != std::string::npos) found.push_back(it->path().string());
  return found;
}

bool valid_package(const std::string& path, std::string& why) {
  try {
    tessera::read_package(path);
    return true;
  } catch (const std::exception& e) {
    why = e.what();
    return false;
  }
}

// ---- Package forgeries ----------------------------------------------------------------------

constexpr std::size_t kHeaderBytes = 24, kEntryBytes = 32;

template <typename T>
T get(const std::string& bytes, std::size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}
template <typename T>
void put(std::string& bytes, std::size_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

// Rewrites values inside one section and recomputes its checksum and the table's, so only the
// decoder's and the simulator's own checks stand between the forgery and a run.
std::string forge_section(std::string bytes, std::mt19937_64& random) {
  const auto count = get<std::uint32_t>(bytes, 12);
  const std::size_t entry = kHeaderBytes + kEntryBytes * (random() % count);
  const auto offset = get<std::uint64_t>(bytes, entry + 8), size = get<std::uint64_t>(bytes, entry + 16);
  if (size < 4) return bytes;
  static const std::uint32_t kInteresting[] = {0,          1,          2,        0x7fffffff, 0x80000000,
                                               0xffffffff, 0xfffffffe, 1u << 16, 1u << 24,   624u << 10};
  const int edits = 1 + int(random() % 4);
  for (int i = 0; i < edits; ++i) {
    const std::size_t at = offset + (random() % (size - 3));
    const std::uint32_t value =
        random() % 2 ? kInteresting[random() % std::size(kInteresting)] : std::uint32_t(random());
    put(bytes, at, value);
  }
  put(bytes, entry + 24, std::uint64_t(XXH64(bytes.data() + offset, size, 0)));
  put(bytes, 16, std::uint64_t(XXH64(bytes.data() + kHeaderBytes, std::size_t(count) * kEntryBytes, 0)));
  return bytes;
}

// ---- The campaign ---------------------------------------------------------------------------

enum Problem { host_crash, hang, partial_output, wrong_accepted, internal_error, kProblems };
const char* const kProblemNames[] = {"host_crashes", "hangs", "partial_outputs", "wrong_accepted", "internal_errors"};

struct Tally {
  int runs = 0;
  std::array<int, kProblems> problems{};
};

class Campaign {
public:
  Campaign(fs::path work, std::uint64_t seed) : work_(std::move(work)), random_(seed) {}

  void prepare() {
    fs::create_directories(work_);
    const fs::path setup = work_ / "setup";
    fs::create_directories(setup);
    model_ = kSource + "/configs/models/mlp-small.yaml";
    key_ = (setup / "key").string();
    write_file(key_, "fault-campaign key: 32 bytes or more of secret");
    fs::permissions(key_, fs::perms::owner_read | fs::perms::owner_write);
    good_pipeline_ = pipeline(setup, "good", "", "");
    package_ = (setup / "good.tpkg").string();
    signed_ = (setup / "signed.tpkg").string();
    const Result a = run(command({kTessera, "compile", model_, "-p", good_pipeline_, "-o", package_}));
    const Result b = run(command({kTessera, "compile", model_, "-p", good_pipeline_, "-o", signed_, "--sign", key_}));
    if (a.exit_code != 0 || b.exit_code != 0)
      throw std::runtime_error("the reference compile failed:\n" + a.err + b.err);
    compile_ms_ = static_cast<long long>(std::max(a.wall_ms, b.wall_ms));
    const Result r = run(command({kTessera, "run", signed_, "--verify", key_}));
    if (r.exit_code != 0) throw std::runtime_error("the reference run failed:\n" + r.err);
    run_ms_ = static_cast<long long>(r.wall_ms);
    const std::string faulty = kBuild + "/test-plugins/faulty-scheduler";
    for (const char* fault :
         {"segfault", "hang", "allocate", "invalid-schedule", "protocol-junk", "grandchild", "stdout"})
      for (const bool fallback : {false, true}) {
        const std::string entry = std::string("exchange_scheduler: {plugin: faulty-scheduler, options: {fault: ") +
                                  fault + "}, isolate: process, time_limit_ms: 2000, memory_limit_mb: 256" +
                                  (fallback ? ", fallback: greedy}" : "}");
        plugin_pipelines_.push_back(pipeline(setup, std::string("isolated-") + fault + (fallback ? "-fallback" : ""),
                                             "exchange_scheduler: {plugin: greedy}", entry, faulty));
      }
    plugin_pipelines_.push_back(pipeline(setup, "lying-scheduler", "{plugin: greedy}", "{plugin: invalid-scheduler}",
                                         kBuild + "/test-plugins/invalid-scheduler"));
    plugin_pipelines_.push_back(pipeline(setup, "throwing-pass", "  - {plugin: place-storage}",
                                         "  - {plugin: place-storage}\n  - {plugin: throwing-pass}",
                                         kBuild + "/test-plugins/throwing-pass"));
    for (const char* fault : {"crash", "hang", "exit", "allocate"})
      load_pipelines_.push_back(pipeline(setup, std::string("load-") + fault, "{plugin: greedy}",
                                         std::string("{plugin: load-fault-") + fault + "}",
                                         kBuild + "/test-plugins/load-fault-" + fault));
    std::printf("fault-campaign: work=%s reference compile_ms=%lld run_ms=%lld\n", work_.c_str(), compile_ms_, run_ms_);
  }

  void run_one(int index) {
    const fs::path dir = work_ / ("run-" + std::to_string(index));
    fs::create_directories(dir);
    const std::string output = (dir / "out.tpkg").string();
    const int pick = int(random_() % 100);
    std::string kind;
    Result r;
    Spawn retry;  // after a SIGKILL: the same command again, whose write must remove the leftovers
    int injected = 0;
    bool killed_hard = false;
    std::vector<std::pair<Problem, std::string>> found;
    auto problem = [&](Problem p, const std::string& what) { found.emplace_back(p, what); };
    auto compile = [&](const std::string& pipeline_file, std::vector<std::string> extra = {}) {
      Spawn spawn = command({kTessera, "compile", model_, "-p", pipeline_file, "-o", output});
      spawn.argv.insert(spawn.argv.end(), extra.begin(), extra.end());
      return spawn;
    };

    if (pick < 20) {  // a plugin that crashes, hangs, allocates, lies or throws at run time
      kind = "plugin-fault";
      r = run(compile(plugin_pipelines_[random_() % plugin_pipelines_.size()]));
    } else if (pick < 30) {  // a plugin that fails while loading
      kind = "load-fault";
      Spawn spawn = compile(load_pipelines_[random_() % load_pipelines_.size()]);
      spawn.options.environment.push_back("TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS=2000");
      r = run(spawn);
      if (r.exit_code == 0) problem(wrong_accepted, "a compile naming a library that fails while loading succeeded");
    } else if (pick < 50) {  // a compile killed at a random point
      kind = "killed-compile";
      static const int kSignals[] = {SIGKILL, SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGALRM, SIGQUIT};
      injected = kSignals[random_() % std::size(kSignals)];
      killed_hard = injected == SIGKILL;
      Spawn spawn =
          compile(good_pipeline_, random_() % 2 ? std::vector<std::string>{"--emit-phases", (dir / "phases").string()}
                                                : std::vector<std::string>{});
      retry = spawn;
      spawn.options.signal = injected;
      spawn.options.signal_after_ms = std::int64_t(random_() % std::uint64_t(compile_ms_ * 12 / 10 + 1));
      r = run(spawn);
    } else if (pick < 60) {  // a run killed at a random point
      kind = "killed-run";
      static const int kSignals[] = {SIGKILL, SIGTERM, SIGINT, SIGHUP};
      injected = kSignals[random_() % std::size(kSignals)];
      killed_hard = injected == SIGKILL;
      Spawn spawn = command({kTessera, "run", package_, "--profile", (dir / "profile.json").string()});
      retry = spawn;
      spawn.options.signal = injected;
      spawn.options.signal_after_ms = std::int64_t(random_() % std::uint64_t(run_ms_ * 12 / 10 + 1));
      r = run(spawn);
    } else if (pick < 72) {  // a full disk: writes past a random size fail with EFBIG
      kind = "full-disk";
      const auto package_bytes = fs::file_size(package_);
      Spawn spawn = compile(
          good_pipeline_,
          random_() % 2 ? std::vector<std::string>{"--emit-phases", (dir / "phases").string()}
                        : std::vector<std::string>{"--dump-after", "all", "--dump-dir", (dir / "dumps").string()});
      spawn.options.file_size_limit = std::uint64_t(random_() % (package_bytes + package_bytes / 4));
      r = run(spawn);
    } else if (pick < 80) {  // hostile files and folders: FIFOs, devices, folders others can write (issue 31)
      kind = "hostile-input";
      const int how = int(random_() % 3);
      if (how == 0) {
        const std::string fifo = (dir / "model.yaml").string();
        ::mkfifo(fifo.c_str(), 0600);  // a reader that opened it would block until the deadline
        r = run(command({kTessera, "compile", fifo, "-p", good_pipeline_, "-o", output}));
      } else if (how == 1) {
        r = run(command({kTessera, "compile", model_, "-p", "/dev/zero", "-o", output}));
      } else {
        const fs::path shared = dir / "phases";
        fs::create_directories(shared);
        fs::permissions(shared, fs::perms::all);  // another user could plant links in it
        r = run(compile(good_pipeline_, {"--emit-phases", shared.string()}));
        if (!fs::is_empty(shared)) problem(wrong_accepted, "wrote phase files into a folder others can write");
      }
      if (r.exit_code == 0) problem(wrong_accepted, "a compile of a hostile input succeeded");
    } else {  // a forged package, run with or without --verify
      kind = "forged-package";
      const bool from_signed = random_() % 2;
      const std::string original = read_file(from_signed ? signed_ : package_);
      std::string forged = original;
      const int how = int(random_() % 3);
      if (how == 0) {
        const int flips = 1 + int(random_() % 8);
        for (int i = 0; i < flips; ++i) forged[random_() % forged.size()] ^= char(1u << (random_() % 8));
      } else if (how == 1) {
        forged.resize(random_() % forged.size());
      } else {
        forged = forge_section(forged, random_);
      }
      const std::string path = (dir / "forged.tpkg").string();
      write_file(path, forged);
      const bool verify = from_signed && random_() % 2;
      std::vector<std::string> argv{kTessera, "run", path};
      if (verify) argv.insert(argv.end(), {"--verify", key_});
      r = run(command(argv));
      const bool passed = r.out.find("numericalTest=PASS") != std::string::npos;
      const std::size_t body = original.size() - (from_signed ? 40 : 0);
      // What must be refused: anything changed under --verify; without it, changed bytes the
      // checksums cover (a flip in the signature's MAC alone is invisible to an unsigned reader).
      bool covered = forged != original;
      if (!verify && how == 0) {
        covered = false;
        for (std::size_t i = 0; i < body + (from_signed ? 8 : 0); ++i) covered |= forged[i] != original[i];
      }
      if (!verify && how == 1 && forged.size() == body)
        covered = false;                         // the trailer cut off exactly: a valid unsigned package
      if (!verify && how == 2) covered = false;  // checksums recomputed: only the decoder's checks apply
      if (passed && covered && forged != original) problem(wrong_accepted, "a forged package ran and said PASS");
      if (!verify && how == 2 && passed) ++forged_section_passes_;
    }

    if (r.timed_out) problem(hang, "still running after " + std::to_string(kDeadlineMs) + " ms");
    if (r.signal != 0 && r.signal != injected)
      problem(host_crash, std::string("killed by signal ") + strsignal(r.signal));
    if (r.err.find("internal error") != std::string::npos) problem(internal_error, "printed an internal error");
    if (r.signal == 0 && !r.timed_out && r.exit_code != 0 && r.exit_code != 1)
      problem(internal_error, "exit status " + std::to_string(r.exit_code));
    if (r.exit_code == 1 && r.err.find("error: ") == std::string::npos &&
        r.out.find("numericalTest=FAIL") == std::string::npos)
      problem(internal_error, "failed without an error line");
    // Outputs: a package that exists must be whole; temporaries only after SIGKILL, and then the
    // next write into the folder must remove them.
    std::string why;
    if (fs::exists(output) && !valid_package(output, why)) problem(partial_output, "left an invalid package: " + why);
    if (const auto left = temporaries(dir); !left.empty()) {
      if (!killed_hard) problem(partial_output, "left a temporary: " + left.front());
      else {
        const Result again = run(retry);
        if (again.exit_code != 0 || !temporaries(dir).empty())
          problem(partial_output, "a SIGKILL leftover survived the next write: " + left.front());
      }
    }

    Tally& tally = tallies_[kind];
    ++tally.runs;
    for (const auto& [p, what] : found) {
      ++tally.problems[p];
      std::printf("problem run=%d kind=%s %s: %s (kept in %s)\n  stderr tail: %s\n", index, kind.c_str(),
                  kProblemNames[p], what.c_str(), dir.c_str(),
                  r.err.substr(r.err.size() > 400 ? r.err.size() - 400 : 0).c_str());
    }
    if (found.empty()) fs::remove_all(dir);
  }

  int report(int runs, std::uint64_t seed, double wall_s) const {
    std::printf("\n%-16s %6s", "kind", "runs");
    for (const char* name : kProblemNames) std::printf(" %16s", name);
    std::printf("\n");
    Tally total;
    for (const auto& [kind, tally] : tallies_) {
      std::printf("%-16s %6d", kind.c_str(), tally.runs);
      for (int p = 0; p < kProblems; ++p) std::printf(" %16d", tally.problems[p]);
      std::printf("\n");
      total.runs += tally.runs;
      for (int p = 0; p < kProblems; ++p) total.problems[p] += tally.problems[p];
    }
    std::printf("%-16s %6d", "total", total.runs);
    int problems = 0;
    for (int p = 0; p < kProblems; ++p) std::printf(" %16d", total.problems[p]), problems += total.problems[p];
    std::printf("\nfault-campaign runs=%d seed=%llu wall_s=%.1f problems=%d forged_sections_passing_unverified=%d\n",
                runs, static_cast<unsigned long long>(seed), wall_s, problems, forged_section_passes_);
    return problems == 0 ? 0 : 1;
  }

private:
  fs::path work_;
  std::mt19937_64 random_;
  std::string model_, key_, good_pipeline_, package_, signed_;
  std::vector<std::string> plugin_pipelines_, load_pipelines_;
  long long compile_ms_ = 0, run_ms_ = 0;
  std::map<std::string, Tally> tallies_;
  int forged_section_passes_ = 0;  // PASS is right when the forgery changed nothing the run uses
};

}  // namespace

int main(int argc, char** argv) {
  int runs = 1000;
  std::uint64_t seed = 1;
  std::string work;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    else if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--work") work = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: fault-campaign [--runs N] [--seed S] [--work DIR]\n");
      return 2;
    }
  }
  if (work.empty()) {
    std::string pattern = (fs::temp_directory_path() / "tessera-faults-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) return 2;
    work = pattern;
  }
  ::signal(SIGPIPE, SIG_IGN);
  const auto started = Clock::now();
  try {
    Campaign campaign(work, seed);
    campaign.prepare();
    for (int i = 0; i < runs; ++i) {
      campaign.run_one(i);
      if ((i + 1) % 100 == 0) std::printf("fault-campaign: %d of %d runs\n", i + 1, runs), std::fflush(stdout);
    }
    const int status = campaign.report(runs, seed, std::chrono::duration<double>(Clock::now() - started).count());
    if (status == 0) fs::remove_all(work);
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault-campaign: %s\n", e.what());
    return 2;
  }
}
