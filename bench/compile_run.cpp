// Benchmark: wall time and peak memory of `tessera compile` and `tessera run` for one model,
// side by side for each exchange scheduler, with the simulated and estimated cycles.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Measured {
  int exit_code = -1;
  double wall_ms = 0;
  double peak_rss_mib = 0;
  std::string out;
};

// Runs a command, capturing stdout; measures its wall time and its own peak RSS (wait4).
Measured measure(const std::vector<std::string>& arguments) {
  const std::string out_file = (fs::temp_directory_path() / ("tessera-bench-" + std::to_string(getpid()))).string();
  const auto start = std::chrono::steady_clock::now();
  std::fflush(stdout);  // or the child would write our buffered output again
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out_file.c_str(), "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  Measured m;
  m.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.peak_rss_mib = usage.ru_maxrss / 1024.0;
  std::ifstream in(out_file);
  std::stringstream text;
  text << in.rdbuf();
  m.out = text.str();
  fs::remove(out_file);
  return m;
}

std::string field(const std::string& text, const std::string& key) {
  std::smatch match;
  if (std::regex_search(text, match, std::regex("(?:^|\\s)" + key + "=(\\S+)"))) return match[1];
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path build = fs::canonical("/proc/self/exe").parent_path().parent_path();
  const fs::path source = TESSERA_SOURCE_DIR;
  const std::string model = argc > 1 ? argv[1] : (source / "configs/models/mlp-b2-n3.yaml").string();
  const std::string target = argc > 2 ? argv[2] : (source / "configs/targets/t1472.yaml").string();
  const std::string tessera = (build / "tools/tessera").string();
  const fs::path work = build / "artifacts/bench";
  fs::create_directories(work);

  std::printf("# tessera compile + run, model=%s target=%s (one process each, peak RSS from wait4)\n",
              fs::path(model).stem().c_str(), fs::path(target).stem().c_str());
  int failures = 0;
  for (const std::string scheduler : {"in-order", "greedy"}) {
    // A pipeline identical to the default but for the scheduler.
    std::ifstream in(source / "configs/pipelines/default.yaml");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    text.replace(text.find("../targets/"), 11, (source / "configs/targets/").string());
    text.replace(text.find("../../build/plugins"), 19, (build / "plugins").string());
    text.replace(text.find("plugin: greedy"), 14, "plugin: " + scheduler);
    const fs::path pipeline = work / ("pipeline-" + scheduler + ".yaml");
    std::ofstream(pipeline) << text;
    const std::string package = (work / ("model-" + scheduler + ".tpkg")).string();

    Measured compile = measure({tessera, "compile", model, "-p", pipeline.string(), "-t", target, "-o", package});
    Measured run = measure({tessera, "run", package, "--lock", (work / "device.lock").string()});
    failures += compile.exit_code != 0 || run.exit_code != 0;
    std::printf("scheduler=%-8s compile_wall_ms=%.0f compile_peak_rss_mib=%.1f run_wall_ms=%.0f run_peak_rss_mib=%.1f "
                "estimated_cycles=%s simulated_cycles=%s exchange_cycles=%s scheduled_exchange_cycles=%s "
                "exchange_lower_bound=%s numericalTest=%s\n",
                scheduler.c_str(), compile.wall_ms, compile.peak_rss_mib, run.wall_ms, run.peak_rss_mib,
                field(compile.out, "estimated_cycles").c_str(), field(run.out, "simulated_cycles").c_str(),
                field(run.out, "exchange_cycles").c_str(), field(compile.out, "scheduled_exchange_cycles").c_str(),
                field(compile.out, "exchange_lower_bound").c_str(), field(run.out, "numericalTest").c_str());
  }
  // The production compiler's log (shared/reference) for the same model: ~456 s from the first
  // finalist to the written package, refined_cycles=975171, final_cycles=946626.
  std::printf("baseline=reference-log compile_wall_ms=456000 final_cycles=946626 (production IPU compiler, mlp-b2-n3)\n");
  return failures ? 1 : 0;
}
