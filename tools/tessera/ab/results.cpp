// Reading and writing A/B results directories (JSON via nlohmann-json), and the work plan.
#include "results.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/package.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace tessera::ab {

namespace {

constexpr const char* kManifestFormat = "tessera-ab-results/1";
constexpr const char* kRecordFormat = "tessera-ab-record/1";

json to_json(const BuildIdentity& build) { return {{"version", build.version}, {"build_hash", build.build_hash}}; }
BuildIdentity build_from(const json& j) {
  return {j.at("version").get<std::string>(), j.at("build_hash").get<std::string>()};
}

json to_json(const ProcessRecord& p) {
  return {{"command", p.command},
          {"exit_code", p.exit_code},
          {"signal", p.signal},
          {"wall_ms", p.wall_ms},
          {"user_ms", p.user_ms},
          {"system_ms", p.system_ms},
          {"peak_rss_kib", p.peak_rss_kib},
          {"log", p.log},
          {"error", p.error}};
}
ProcessRecord process_from(const json& j) {
  ProcessRecord p;
  p.command = j.at("command").get<std::vector<std::string>>();
  p.exit_code = j.at("exit_code").get<int>();
  p.signal = j.at("signal").get<int>();
  p.wall_ms = j.at("wall_ms").get<double>();
  p.user_ms = j.value("user_ms", 0.0);  // absent in records of older builds
  p.system_ms = j.value("system_ms", 0.0);
  p.peak_rss_kib = j.at("peak_rss_kib").get<std::int64_t>();
  p.log = j.at("log").get<std::string>();
  p.error = j.at("error").get<std::string>();
  return p;
}

json to_json(const Record& r) {
  json phases = json::array();
  for (const PhaseRecord& p : r.compile.phases)
    phases.push_back({{"phase", p.phase},
                      {"transfers", p.transfers},
                      {"words", p.words},
                      {"horizon", p.horizon},
                      {"endpoint_lower_bound", p.endpoint_lower_bound},
                      {"lower_bound", p.lower_bound},
                      {"problem_hash", p.problem_hash}});
  const CompileRecord& c = r.compile;
  const RunRecord& run = r.run;
  return {{"format", kRecordFormat},
          {"model", r.model},
          {"arm", r.arm},
          {"repeat", r.repeat},
          {"suite_fingerprint", r.suite_fingerprint},
          {"arm_fingerprint", r.arm_fingerprint},
          {"model_hash", r.model_hash},
          {"target_hash", r.target_hash},
          {"tessera", to_json(r.build)},
          {"finished_at", r.finished_at},
          {"host", r.host},
          {"load_average", r.load_average},
          {"warmup", r.warmup},
          {"compile",
           {{"process", to_json(c.process)},
            {"compile_ms", c.compile_ms},
            {"supersteps", c.supersteps},
            {"estimated_cycles", c.estimated_cycles},
            {"estimated_exchange_cycles", c.estimated_exchange_cycles},
            {"scheduled_exchange_cycles", c.scheduled_exchange_cycles},
            {"exchange_lower_bound", c.exchange_lower_bound},
            {"peak_tile_bytes", c.peak_tile_bytes},
            {"package", c.package},
            {"package_hash", c.package_hash},
            {"phases", phases}}},
          {"run",
           {{"performed", run.performed},
            {"unchanged", run.unchanged},
            {"process", to_json(run.process)},
            {"device_cycles", run.device_cycles},
            {"compute_cycles", run.compute_cycles},
            {"exchange_cycles", run.exchange_cycles},
            {"sync_cycles", run.sync_cycles},
            {"numerical_test", run.numerical_test},
            {"max_abs_error", run.max_abs_error}}}};
}

Record record_from(const json& j) {
  if (j.value("format", "") != kRecordFormat)
    throw std::runtime_error("not a " + std::string(kRecordFormat) + " record");
  Record r;
  r.model = j.at("model").get<std::string>();
  r.arm = j.at("arm").get<std::string>();
  r.repeat = j.at("repeat").get<std::uint32_t>();
  r.suite_fingerprint = j.at("suite_fingerprint").get<std::string>();
  r.arm_fingerprint = j.at("arm_fingerprint").get<std::string>();
  r.model_hash = j.value("model_hash", "");  // absent in records of older builds: they never match
  r.target_hash = j.value("target_hash", "");
  r.build = build_from(j.at("tessera"));
  r.finished_at = j.at("finished_at").get<std::string>();
  r.host = j.value("host", "");
  r.load_average = j.value("load_average", 0.0);
  r.warmup = j.value("warmup", 0u);
  const json& c = j.at("compile");
  r.compile.process = process_from(c.at("process"));
  r.compile.compile_ms = c.at("compile_ms").get<std::int64_t>();
  r.compile.supersteps = c.at("supersteps").get<std::uint64_t>();
  r.compile.estimated_cycles = c.at("estimated_cycles").get<std::uint64_t>();
  r.compile.estimated_exchange_cycles = c.at("estimated_exchange_cycles").get<std::uint64_t>();
  r.compile.scheduled_exchange_cycles = c.at("scheduled_exchange_cycles").get<std::uint64_t>();
  r.compile.exchange_lower_bound = c.at("exchange_lower_bound").get<std::uint64_t>();
  r.compile.peak_tile_bytes = c.at("peak_tile_bytes").get<std::uint64_t>();
  r.compile.package = c.at("package").get<std::string>();
  r.compile.package_hash = c.at("package_hash").get<std::string>();
  for (const json& p : c.at("phases"))
    r.compile.phases.push_back({p.at("phase").get<std::uint32_t>(), p.at("transfers").get<std::uint64_t>(),
                                p.at("words").get<std::uint64_t>(), p.at("horizon").get<std::uint64_t>(),
                                p.at("endpoint_lower_bound").get<std::uint64_t>(),
                                p.at("lower_bound").get<std::uint64_t>(), p.value("problem_hash", "")});
  const json& run = j.at("run");
  r.run.performed = run.at("performed").get<bool>();
  r.run.unchanged = run.at("unchanged").get<bool>();
  r.run.process = process_from(run.at("process"));
  r.run.device_cycles = run.at("device_cycles").get<std::uint64_t>();
  r.run.compute_cycles = run.at("compute_cycles").get<std::uint64_t>();
  r.run.exchange_cycles = run.at("exchange_cycles").get<std::uint64_t>();
  r.run.sync_cycles = run.at("sync_cycles").get<std::uint64_t>();
  r.run.numerical_test = run.at("numerical_test").get<std::string>();
  r.run.max_abs_error = run.at("max_abs_error").get<double>();
  return r;
}

json to_json(const Manifest& m) {
  json entries = json::array();
  for (const SuiteEntry& e : m.entries)
    entries.push_back({{"id", e.id},
                       {"model", e.model},
                       {"target", e.target},
                       {"model_hash", e.model_hash},
                       {"target_hash", e.target_hash}});
  json arms = json::array();
  for (const ArmInfo& a : m.arms) {
    json inputs = json::array();
    for (const ArmInput& input : a.inputs) inputs.push_back({{"path", input.path}, {"hash", input.hash}});
    arms.push_back({{"name", a.name},
                    {"overlay", a.overlay},
                    {"pipeline", a.pipeline},
                    {"fingerprint", a.fingerprint},
                    {"inputs", inputs},
                    {"changes", a.changes},
                    {"twin_of", a.twin_of}});
  }
  return {
      {"format", kManifestFormat},
      {"tessera", to_json(m.build)},
      {"suite",
       {{"name", m.suite_name}, {"file", m.suite_file}, {"fingerprint", m.suite_fingerprint}, {"entries", entries}}},
      {"base_pipeline", m.base_pipeline},
      {"arms", arms},
      {"repeat", m.repeat},
      {"warmup", m.warmup},
      {"threads", m.threads},
      {"shard", {{"index", m.shard_index}, {"count", m.shard_count}}}};
}

Manifest manifest_from(const json& j) {
  if (j.value("format", "") != kManifestFormat)
    throw std::runtime_error("not a " + std::string(kManifestFormat) + " manifest");
  Manifest m;
  m.build = build_from(j.at("tessera"));
  const json& suite = j.at("suite");
  m.suite_name = suite.at("name").get<std::string>();
  m.suite_file = suite.at("file").get<std::string>();
  m.suite_fingerprint = suite.at("fingerprint").get<std::string>();
  if (!is_safe_name(m.suite_name)) throw std::runtime_error("a suite name that is not a safe folder name");
  for (const json& e : suite.at("entries"))
    m.entries.push_back({e.at("id").get<std::string>(), e.at("model").get<std::string>(),
                         e.at("target").get<std::string>(), e.at("model_hash").get<std::string>(),
                         e.at("target_hash").get<std::string>()});
  m.base_pipeline = j.at("base_pipeline").get<std::string>();
  for (const json& a : j.at("arms")) {
    std::vector<ArmInput> inputs;
    for (const json& input : a.value("inputs", json::array()))
      inputs.push_back({input.at("path").get<std::string>(), input.at("hash").get<std::string>()});
    m.arms.push_back({a.at("name").get<std::string>(), a.at("overlay").get<std::string>(),
                      a.at("pipeline").get<std::string>(), a.at("fingerprint").get<std::string>(), inputs,
                      a.at("changes").get<std::vector<std::string>>(), a.at("twin_of").get<std::string>()});
  }
  m.repeat = j.at("repeat").get<std::uint32_t>();
  m.warmup = j.value("warmup", 0u);
  m.threads = j.value("threads", 0u);
  m.shard_index = j.at("shard").at("index").get<std::uint32_t>();
  m.shard_count = j.at("shard").at("count").get<std::uint32_t>();
  if (m.arms.empty() || m.entries.empty()) throw std::runtime_error("a manifest without arms or suite entries");
  // Names become folders of the results directory and words of job scripts.
  for (const SuiteEntry& entry : m.entries)
    if (!is_safe_name(entry.id)) throw std::runtime_error("a suite entry name that is not a safe folder name");
  for (const ArmInfo& arm : m.arms)
    if (!is_safe_name(arm.name)) throw std::runtime_error("an arm name that is not a safe folder name");
  return m;
}

// Manifests list every suite entry and arm input; records are a few kilobytes.
constexpr std::uint64_t kMaxResultsFileBytes = std::uint64_t{16} << 20;

std::string read_text(const std::string& path) {
  return read_bounded_file(path, "the A/B results file", kMaxResultsFileBytes);
}

constexpr const char* kRecordMacField = "hmac";
constexpr std::size_t kRecordKeyBytes = 32;

// The folder of the user's tessera settings, where the key that signs their records lives.
std::string config_folder() {
  const char* config = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  if (config && *config && fs::path(config).is_absolute()) return (fs::path(config) / "tessera").string();
  if (home && *home && fs::path(home).is_absolute()) return (fs::path(home) / ".config/tessera").string();
  throw Error(
      "cannot find the folder for the key that signs A/B records: neither XDG_CONFIG_HOME nor HOME is an absolute "
      "path; set one of them");
}

// Made once, 0600 in a 0700 folder of the user's own, linked into place so two sweeps starting
// at once agree on one key.
PackageKey make_record_key(const std::string& folder_path) {
  const OwnedFolder folder(folder_path, "the tessera config folder", 0700);
  const std::string path = (fs::path(folder.path()) / "ab-records.key").string();
  if (::faccessat(folder.descriptor(), "ab-records.key", F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
    unsigned char secret[kRecordKeyBytes];
    if (::getrandom(secret, sizeof(secret), 0) != static_cast<ssize_t>(sizeof(secret)))
      throw Error(path + ": cannot make the key that signs A/B records: no random bytes from the kernel");
    const std::string temporary = ".ab-records.key.tmp-" + std::to_string(::getpid());
    const int fd = folder.create_file(temporary, "the key that signs A/B records", 0600);
    const bool written =
        ::write(fd, secret, sizeof(secret)) == static_cast<ssize_t>(sizeof(secret)) && ::fsync(fd) == 0;
    ::close(fd);
    OPENSSL_cleanse(secret, sizeof(secret));
    const int linked =
        written ? ::linkat(folder.descriptor(), temporary.c_str(), folder.descriptor(), "ab-records.key", 0) : -1;
    const int error_number = errno;
    ::unlinkat(folder.descriptor(), temporary.c_str(), 0);
    if (!written || (linked != 0 && error_number != EEXIST))
      throw Error(path + ": cannot make the key that signs A/B records: " + std::strerror(error_number));
    logger("tessera.ab")->info("made the key that signs A/B records key={}", path);
  }
  return read_package_key(path);
}

const PackageKey& record_key() {
  static std::once_flag once;
  static PackageKey key;
  std::call_once(once, [] { key = make_record_key(config_folder()); });
  return key;
}

// HMAC-SHA256 of the record's JSON without its own MAC field, in hex.
std::string record_mac(const json& record_without_mac) {
  const PackageKey& key = record_key();
  const std::string text = record_without_mac.dump();
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()),
            reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &length))
    throw Error(key.path + ": OpenSSL could not compute the HMAC of an A/B record");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", mac[i]);
  return hex;
}

// Whether `document` carries the MAC our key gives it (compared in constant time).
bool record_signed_by_us(json document) {
  const auto found = document.find(kRecordMacField);
  if (found == document.end() || !found->is_string()) return false;
  const std::string given = found->get<std::string>();
  document.erase(kRecordMacField);
  const std::string expected = record_mac(document);
  return given.size() == expected.size() && CRYPTO_memcmp(given.data(), expected.data(), given.size()) == 0;
}

std::string arm_list(const Manifest& m) {
  std::string list;
  for (const ArmInfo& a : m.arms) list += (list.empty() ? "" : ", ") + a.name + "@" + a.fingerprint.substr(0, 8);
  return list;
}

}  // namespace

bool Record::failed() const {
  if (!compile.process.succeeded()) return true;
  return run.performed && run.device_cycles == 0;
}

const ArmInfo* Manifest::find_arm(const std::string& name) const {
  for (const ArmInfo& arm : arms)
    if (arm.name == name) return &arm;
  return nullptr;
}

const SuiteEntry* Manifest::find_entry(const std::string& id) const {
  for (const SuiteEntry& entry : entries)
    if (entry.id == id) return &entry;
  return nullptr;
}

bool same_arm_names(const Manifest& a, const Manifest& b) {
  bool same = a.arms.size() == b.arms.size();
  for (std::size_t i = 0; same && i < a.arms.size(); ++i) same = a.arms[i].name == b.arms[i].name;
  return same;
}

std::vector<std::string> manifest_changes(const Manifest& before, const Manifest& now) {
  std::vector<std::string> changes;
  auto changed = [&](const std::string& what, const std::string& path, const std::string& was, const std::string& is) {
    if (was != is) changes.push_back(fmt::format("{} {} differs (hash {} then, {} now)", what, path, was, is));
  };
  for (const SuiteEntry& entry : now.entries)
    if (const SuiteEntry* old = before.find_entry(entry.id)) {
      changed("model " + entry.id + ": file", entry.model, old->model_hash, entry.model_hash);
      changed("model " + entry.id + ": target file", entry.target, old->target_hash, entry.target_hash);
    }
  for (const ArmInfo& arm : now.arms) {
    const ArmInfo* old = before.find_arm(arm.name);
    if (!old || old->fingerprint == arm.fingerprint || !arm.twin_of.empty()) continue;
    const std::size_t found = changes.size();
    for (const ArmInput& input : arm.inputs) {
      std::string was = "absent";
      for (const ArmInput& earlier : old->inputs)
        if (earlier.path == input.path) was = earlier.hash;
      changed("arm " + arm.name + ": file", input.path, was, input.hash);
    }
    if (changes.size() == found)
      changes.push_back("arm " + arm.name + ": its plugins or options differ (" + old->fingerprint + " then, " +
                        arm.fingerprint + " now)");
  }
  if (!(before.build == now.build))
    changes.push_back("the tessera build differs (" + before.build.build_hash + " then, " + now.build.build_hash +
                      " now)");
  return changes;
}

std::vector<std::string> changed_inputs(const Manifest& manifest) {
  std::vector<std::string> changed;
  auto check = [&](const std::string& path, const std::string& recorded) {
    std::error_code ec;
    const std::string now = fs::exists(path, ec) ? hash_file(path) : "absent";
    if (now != recorded) changed.push_back(path + " (was " + recorded + ", now " + now + ")");
  };
  for (const SuiteEntry& entry : manifest.entries) {
    check(entry.model, entry.model_hash);
    check(entry.target, entry.target_hash);
  }
  for (const ArmInfo& arm : manifest.arms)
    if (arm.twin_of.empty())
      for (const ArmInput& input : arm.inputs) check(input.path, input.hash);
  return changed;
}

std::string manifest_mismatch(const Manifest& mine, const Manifest& other, bool same_repeat) {
  // Name the file that differs when the layout is the same and contents are not.
  const bool comparable = mine.suite_name == other.suite_name && same_arm_names(mine, other);
  if (mine.suite_fingerprint != other.suite_fingerprint) {
    if (comparable)
      for (const std::string& change : manifest_changes(mine, other))
        if (change.rfind("model ", 0) == 0) return "another suite: " + change;
    return "another suite ('" + other.suite_name + "' " + other.suite_fingerprint + " from " + other.suite_file +
           ", not '" + mine.suite_name + "' " + mine.suite_fingerprint + ")";
  }
  bool same_arms = same_arm_names(mine, other);
  for (std::size_t i = 0; same_arms && i < mine.arms.size(); ++i)
    same_arms = mine.arms[i].fingerprint == other.arms[i].fingerprint;
  if (!same_arms && comparable)
    for (const std::string& change : manifest_changes(mine, other))
      if (change.rfind("arm ", 0) == 0) return "another version of an arm: " + change;
  if (!same_arms) return "other arms (" + arm_list(other) + ", not " + arm_list(mine) + ")";
  if (!(mine.build == other.build))
    return "another tessera build (" + other.build.version + " " + other.build.build_hash + ", not " +
           mine.build.version + " " + mine.build.build_hash + ")";
  if (same_repeat && mine.repeat != other.repeat)
    return "another --repeat (" + std::to_string(other.repeat) + ", not " + std::to_string(mine.repeat) + ")";
  return "";
}

std::vector<WorkItem> plan_work(const Manifest& manifest) {
  std::vector<WorkItem> items;
  const std::size_t arms = manifest.arms.size();
  for (std::uint32_t repeat = 0; repeat < manifest.repeat; ++repeat)
    for (std::size_t entry = 0; entry < manifest.entries.size(); ++entry)
      for (std::size_t k = 0; k < arms; ++k) items.push_back({entry, (k + repeat) % arms, repeat});
  return items;
}

std::vector<WorkItem> shard_items(const std::vector<WorkItem>& items, std::uint32_t index, std::uint32_t count) {
  std::vector<WorkItem> shard;
  for (std::size_t k = index - 1; k < items.size(); k += count) shard.push_back(items[k]);
  return shard;
}

ResultsDir::ResultsDir(std::string root) : root_(fs::absolute(root).lexically_normal().string()) {
  check_owned_folder_if_present(root_, "the results folder");
}

OwnedFolder ResultsDir::folder(const std::string& relative) const {
  return OwnedFolder(root_, "the results folder").folder(relative);
}

bool ResultsDir::has_manifest() const { return fs::exists(fs::path(root_) / "manifest.json"); }

Manifest ResultsDir::read_manifest() const {
  const std::string path = (fs::path(root_) / "manifest.json").string();
  try {
    return manifest_from(json::parse(read_text(path)));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": not a tessera ab results manifest (" + e.what() + "); is " + root_ + " a results directory?");
  }
}

void ResultsDir::write_manifest(const Manifest& manifest) const {
  folder("").write_file("manifest.json", to_json(manifest).dump(2) + "\n", "A/B manifest");
}

std::string ResultsDir::record_path(const std::string& model, const std::string& arm, std::uint32_t repeat) const {
  return (fs::path(root_) / "records" / model / arm / ("repeat-" + std::to_string(repeat) + ".json")).string();
}

std::optional<Record> ResultsDir::read_record(const std::string& model, const std::string& arm, std::uint32_t repeat,
                                              bool* unsigned_record) const {
  const std::string path = record_path(model, arm, repeat);
  if (unsigned_record) *unsigned_record = false;
  if (!fs::exists(path)) return std::nullopt;
  try {
    const json document = json::parse(read_text(path));
    if (!record_signed_by_us(document)) {
      if (unsigned_record) *unsigned_record = true;
      return std::nullopt;
    }
    return record_from(document);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": corrupt A/B record (" + e.what() + "); delete it and run again to redo that item");
  }
}

void ResultsDir::write_record(const Record& record) const {
  json document = to_json(record);
  document[kRecordMacField] = record_mac(document);
  folder("records/" + record.model + "/" + record.arm)
      .write_file("repeat-" + std::to_string(record.repeat) + ".json", document.dump(2) + "\n", "A/B record");
}

std::vector<Record> ResultsDir::read_all_records() const {
  std::vector<std::string> paths;
  const fs::path records = fs::path(root_) / "records";
  if (fs::is_directory(records))
    for (const auto& file : fs::recursive_directory_iterator(records))
      if (file.is_regular_file() && file.path().extension() == ".json") paths.push_back(file.path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<Record> all;
  for (const std::string& path : paths) {
    try {
      const json document = json::parse(read_text(path));
      if (!record_signed_by_us(document)) {
        logger("tessera.ab")
            ->warn(
                "leaving out a record that does not carry your signature (edited, or written by another user) "
                "path={}; `tessera ab` with the same arguments redoes it",
                path);
        continue;
      }
      all.push_back(record_from(document));
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(path + ": corrupt A/B record (" + e.what() + "); delete it and run again to redo that item");
    }
  }
  return all;
}

std::string ResultsDir::absolute(const std::string& relative) const { return (fs::path(root_) / relative).string(); }

std::string ResultsDir::relative(const std::string& absolute) const {
  return fs::path(absolute).lexically_relative(root_).string();
}

}  // namespace tessera::ab
