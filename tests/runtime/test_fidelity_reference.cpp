// bench-fidelity's poplibs yardstick must be its own transcription: no Tessera header, and no
// function shared (by name) with the simulator's charges or the cost models it is held against.
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace {

namespace fs = std::filesystem;

// A source file without its `//` comments (prose would read as declarations).
std::string read_source(const fs::path& relative) {
  std::ifstream in(fs::path(TESSERA_SOURCE_DIR) / relative);
  REQUIRE(in.good());
  std::string text, line;
  while (std::getline(in, line)) text += line.substr(0, line.find("//")) + "\n";
  return text;
}

// Names of the functions a C++ source defines or declares: `TYPE name(PARAMS)` followed by a body,
// `;` or a qualifier. A call follows an operator, `::`, `.` or a keyword, never a type, so it is left out.
std::set<std::string> function_names(const std::string& text) {
  static const std::set<std::string> kNotTypes = {"return", "else",   "throw",  "case",
                                                  "new",    "delete", "sizeof", "operator"};
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  std::set<std::string> names;
  for (std::size_t open = text.find('('); open != std::string::npos; open = text.find('(', open + 1)) {
    std::size_t end = open;
    while (end > 0 && is_space(text[end - 1])) --end;
    std::size_t begin = end;
    while (begin > 0 && is_word(text[begin - 1])) --begin;
    if (begin == end || std::isdigit(static_cast<unsigned char>(text[begin]))) continue;
    std::size_t before = begin;
    while (before > 0 && is_space(text[before - 1])) --before;
    if (before == 0) continue;
    const char last = text[before - 1];
    // A return type ends in a word, a template's `>`, or a `*` / `&` attached to it.
    const bool attached = (last == '*' || last == '&') && before > 1 && !is_space(text[before - 2]);
    if (!is_word(last) && last != '>' && !attached) continue;
    std::size_t word_end = before;
    while (word_end > 0 && !is_word(text[word_end - 1])) --word_end;
    std::size_t word_begin = word_end;
    while (word_begin > 0 && is_word(text[word_begin - 1])) --word_begin;
    if (kNotTypes.contains(text.substr(word_begin, word_end - word_begin))) continue;
    int depth = 0;
    std::size_t close = open;
    for (; close < text.size(); ++close) {
      if (text[close] == '(') ++depth;
      if (text[close] == ')' && --depth == 0) break;
    }
    std::size_t next = close + 1;
    while (next < text.size() && is_space(text[next])) ++next;
    const std::string rest = text.substr(next, 8);
    if (rest.starts_with("{") || rest.starts_with(";") || rest.starts_with("const") || rest.starts_with("noexcept"))
      names.insert(text.substr(begin, end - begin));
  }
  return names;
}

const char* const kReferenceFiles[] = {"bench/fidelity/poplibs_reference.hpp", "bench/fidelity/poplibs_reference.cpp"};
// The files measured, each with the fewest functions the parser must see in it.
const std::pair<const char*, std::size_t> kMeasuredFiles[] = {{"core/src/codelets.cpp", 6},
                                                              {"core/include/tessera/codelets.hpp", 6},
                                                              {"core/src/window_calls.cpp", 3},
                                                              {"core/include/tessera/window_calls.hpp", 3},
                                                              {"plugins/analytic/analytic.cpp", 6},
                                                              {"plugins/calibrated/calibration.cpp", 6},
                                                              {"plugins/calibrated/calibrated.cpp", 6}};

}  // namespace

TEST_CASE("poplibs reference includes no Tessera header", "[fidelity]") {
  for (const char* file : kReferenceFiles) {
    const std::string text = read_source(file);
    INFO(file);
    CHECK(text.find("#include \"tessera/") == std::string::npos);
    CHECK(text.find("#include <tessera/") == std::string::npos);
    CHECK(text.find("namespace tessera") == std::string::npos);
  }
}

TEST_CASE("poplibs reference shares no function name with the charges or the cost models", "[fidelity]") {
  std::set<std::string> reference;
  for (const char* file : kReferenceFiles) reference.merge(function_names(read_source(file)));
  // The parser sees the transcription's own estimators, so an empty intersection means something.
  CHECK(reference.contains("ampVertex"));
  CHECK(reference.contains("hmacBest"));
  CHECK(reference.contains("matMul"));
  CHECK(reference.contains("convolution"));
  CHECK(reference.contains("pooling"));
  for (const auto& [file, fewest] : kMeasuredFiles) {
    const std::set<std::string> measured = function_names(read_source(file));
    INFO(file);
    CHECK(measured.size() >= fewest);  // the parser sees that file's functions too
    for (const std::string& name : reference) {
      INFO(name);
      CHECK_FALSE(measured.contains(name));
    }
  }
}
