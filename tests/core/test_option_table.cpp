// Typed option declarations: one declaration gives the manifest entry, the limits and the member.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>

#include "tessera/option_table.hpp"

using namespace tessera;

namespace {

enum class Colour { red, green };

struct Settings {
  bool flag = false;
  std::uint32_t count = 0;
  std::int64_t offset = 0;
  double share = 0;
  std::string name;
  std::string file;
  Colour colour = Colour::red;
  std::map<std::string, std::string> table;
};

Status parse_table(const MapOption& given, std::map<std::string, std::string>& table) {
  if (given.yaml == "{}") return Status::success();
  table["seen"] = given.yaml;
  return refuse_option("table", "is not empty (at " + given.place(0, 0) + ")");
}

const OptionTable<Settings>& table() {
  static const OptionTable<Settings> options{
      option("flag", &Settings::flag, true, "a bool"),
      option("count", &Settings::count, 4, "an unsigned count").range(1, 10),
      option("offset", &Settings::offset, -2, "any int64"),
      option("share", &Settings::share, 0.25, "a fraction").above(0.0).at_most(1.0),
      option("name", &Settings::name, "plain", "free text"),
      path_option("file", &Settings::file, "", "a file"),
      option("colour", &Settings::colour, Colour::green, {{"red", Colour::red}, {"green", Colour::green}}, "a colour"),
      map_option("table", &Settings::table, parse_table, "a mapping"),
  };
  return options;
}

}  // namespace

TEST_CASE("option table writes each declaration's manifest entry and limits", "[options]") {
  REQUIRE(table().size() == 8);
  const TesseraOptionSpec* specs = table().specs();
  const TesseraOptionLimits* limits = table().limits();
  auto texts = [&](int i) { return std::string(specs[i].type) + " " + specs[i].default_value; };
  CHECK(texts(0) == "bool true");
  CHECK(texts(1) == "int 4");
  CHECK(texts(2) == "int -2");
  CHECK(texts(3) == "float 0.25");
  CHECK(texts(4) == "string plain");
  CHECK(texts(5) == "path ");
  CHECK(texts(6) == "enum green");
  CHECK(texts(7) == "map {}");
  CHECK(std::string(limits[1].minimum) == "1");
  CHECK(std::string(limits[1].maximum) == "10");
  CHECK(limits[1].flags == 0);
  CHECK(limits[2].minimum == nullptr);  // an int64 member adds no bound of its own
  CHECK(limits[2].maximum == nullptr);
  CHECK(std::string(limits[3].minimum) == "0");
  CHECK(limits[3].flags == TESSERA_OPTION_MINIMUM_EXCLUDED);
  CHECK(std::string(limits[6].choices) == "red|green");
  CHECK(limits[0].choices == nullptr);

  const TesseraPluginManifest manifest = make_manifest(TESSERA_PLUGIN_PASS, "x", "0", "s", table(), "", "", nullptr);
  CHECK(manifest.options == specs);
  CHECK(manifest.option_count == 8);
  CHECK(manifest.option_limits == limits);
  CHECK(manifest.api_minor == kPluginApiMinor);
}

TEST_CASE("option table sets every member from validated options", "[options]") {
  Options options;
  options.values = {{"flag", false},
                    {"count", std::int64_t{7}},
                    {"offset", std::int64_t{-9}},
                    {"share", 0.5},
                    {"name", std::string("n")},
                    {"file", std::string("/f")},
                    {"colour", std::string("red")},
                    {"table", MapOption{}}};
  Settings settings;
  REQUIRE(table().assign(options, settings).ok);
  CHECK_FALSE(settings.flag);
  CHECK(settings.count == 7);
  CHECK(settings.offset == -9);
  CHECK(settings.share == 0.5);
  CHECK(settings.name == "n");
  CHECK(settings.file == "/f");
  CHECK(settings.colour == Colour::red);
  CHECK(settings.table.empty());
  // A map option's parser refuses in the words the host places: "option 'NAME' ...".
  options.values["table"] = MapOption{"{a: 1}", "p.yaml", 4};
  const Status refused = table().assign(options, settings);
  CHECK_FALSE(refused.ok);
  CHECK(refused.message == "option 'table' is not empty (at p.yaml:5:1)");
  // A caller that skipped the loader's checks gets a logic error, never a truncated member.
  options.values["table"] = MapOption{};
  options.values["count"] = std::int64_t{1} << 40;
  CHECK_THROWS_AS(table().assign(options, settings), std::logic_error);
}
