// Package authentication: `compile --sign KEY` and `run --verify KEY` (HMAC-SHA256). An unsigned
// reader still runs a signed package; a verifying reader refuses unsigned, changed and
// otherwise-signed packages; key files must be private to their owner.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "bad_input_checks.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

constexpr fs::perms kPrivate = fs::perms::owner_read | fs::perms::owner_write;

std::string key_file(const TempDir& dir, const std::string& name, const std::string& bytes, fs::perms mode = kPrivate) {
  const std::string path = (dir.path() / name).string();
  write_file(path, bytes);
  fs::permissions(path, mode);
  return path;
}

CommandResult run(const std::string& package, std::vector<std::string> extra = {}) {
  std::vector<std::string> arguments{tessera_binary(), "run", package};
  arguments.insert(arguments.end(), extra.begin(), extra.end());
  return run_command(arguments);
}

void check_passes(const CommandResult& r) {
  INFO(r.err << r.out);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
}

// A signed package of mlp-small, compiled once for the whole file.
struct Signed {
  TempDir dir;
  std::string key, package;
  Signed() {
    key = key_file(dir, "key", std::string("0123456789abcdef0123456789abcdef-tessera"));
    package = (dir.path() / "signed.tpkg").string();
    const CommandResult r = compile(kSmallModel, kSmallPipeline, package, {"--sign", key});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
};
const Signed& signed_package() {
  static const Signed made;
  return made;
}

}  // namespace

TEST_CASE("a signed package runs with and without --verify", "[robustness][signing]") {
  const Signed& s = signed_package();
  check_passes(run(s.package));
  check_passes(run(s.package, {"--verify", s.key}));
}

TEST_CASE("--verify refuses an unsigned package, naming the key and the fix", "[robustness][signing]") {
  TempDir dir;
  const std::string package = (dir.path() / "unsigned.tpkg").string();
  REQUIRE(compile(kSmallModel, kSmallPipeline, package).exit_code == 0);
  check_passes(run(package));
  const std::string key = signed_package().key;
  check_clean_error(run(package, {"--verify", key}),
                    {package + ": package is not signed, but the key " + key, "tessera compile ... --sign " + key});
  // The same once a signed package's trailer is cut off.
  const std::string bytes = read_file(signed_package().package);
  const std::string stripped = (dir.path() / "stripped.tpkg").string();
  write_file(stripped, bytes.substr(0, bytes.size() - 40));
  check_passes(run(stripped));
  check_clean_error(run(stripped, {"--verify", key}), {stripped + ": package is not signed"});
}

TEST_CASE("--verify refuses a changed package and a package signed with another key", "[robustness][signing]") {
  const Signed& s = signed_package();
  TempDir dir;
  const std::string bytes = read_file(s.package);
  const std::string mismatch = ": package signature does not match the key " + s.key;
  // One bit flipped: in the header, in the middle of a section, in the signature itself.
  for (std::size_t at : {std::size_t{9}, bytes.size() / 2, bytes.size() - 1}) {
    std::string forged = bytes;
    forged[at] ^= 0x10;
    const std::string path = (dir.path() / ("forged-" + std::to_string(at) + ".tpkg")).string();
    write_file(path, forged);
    check_clean_error(run(path, {"--verify", s.key}), {path + mismatch});
  }
  const std::string other = key_file(dir, "other-key", std::string(48, 'k'));
  check_clean_error(run(s.package, {"--verify", other}),
                    {s.package + ": package signature does not match the key " + other});
}

TEST_CASE("bytes after the last section that are not a signature are refused", "[robustness][signing]") {
  TempDir dir;
  const std::string path = (dir.path() / "appended.tpkg").string();
  write_file(path, read_file(signed_package().package) + "x");
  check_clean_error(run(path), {path + ": 41 bytes after the last section"});
}

TEST_CASE("key files must be private to their owner, long enough and not links", "[robustness][signing]") {
  TempDir dir;
  const std::string package = (dir.path() / "p.tpkg").string();
  const std::string good(32, 'g');
  const std::string readable = key_file(dir, "readable", good, kPrivate | fs::perms::group_read);
  check_clean_failure(compile(kSmallModel, kSmallPipeline, package, {"--sign", readable}),
                      {readable + ": key file is accessible to group or others (mode 0640)", "chmod 600 " + readable},
                      dir.path(), "p.tpkg");
  const std::string short_key = key_file(dir, "short", std::string(31, 's'));
  check_clean_failure(
      compile(kSmallModel, kSmallPipeline, package, {"--sign", short_key}),
      {short_key + ": key file has 31 bytes, a key needs 32 to 4096 random bytes", "head -c 32 /dev/urandom"},
      dir.path(), "p.tpkg");
  const std::string link = (dir.path() / "link").string();
  fs::create_symlink(key_file(dir, "target", good), link);
  check_clean_error(run(signed_package().package, {"--verify", link}), {link + ": key file is a symbolic link"});
  const std::string folder = (dir.path() / "folder").string();
  fs::create_directory(folder);
  check_clean_error(run(signed_package().package, {"--verify", folder}), {folder + ": key file is not a regular file"});
  // The key is an input: -o onto it is refused, and the key survives.
  const std::string key = key_file(dir, "key", good);
  check_clean_error(compile(kSmallModel, kSmallPipeline, key, {"--sign", key}), {key, "the signing key (--sign)"});
  CHECK(read_file(key) == good);
  if (const auto user = other_user()) {
    const std::string theirs = key_file(dir, "theirs", good);
    REQUIRE(::chown(theirs.c_str(), user->uid, user->gid) == 0);
    check_clean_failure(compile(kSmallModel, kSmallPipeline, package, {"--sign", theirs}),
                        {theirs + ": key file is owned by uid " + std::to_string(user->uid) + ", not by you"},
                        dir.path(), "p.tpkg");
  }
}
