// Writes the report page: summary tables in HTML, charts drawn by the inline script from JSON.
#include "html_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>

#include "report_page_assets.hpp"
#include "tessera/codelets.hpp"
#include "tessera/html.hpp"

namespace tessera::report {

namespace {

/// 638976 -> "638,976".
std::string grouped(std::uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? "-" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

std::uint64_t max_of(const std::vector<std::uint64_t>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

/// A table built row by row; cells are escaped text, numbers right-aligned by the style.
class Table {
public:
  Table(std::string id, std::vector<std::string> headers, bool sortable = false)
      : id_(std::move(id)), headers_(std::move(headers)), sortable_(sortable) {}
  void row(std::vector<std::string> cells, bool selected = false) { rows_.push_back({std::move(cells), selected}); }
  /// Columns whose cells are words, left-aligned.
  void text_columns(std::vector<std::size_t> columns) { text_columns_ = std::move(columns); }

  std::string html() const {
    std::string out = fmt::format("<table id=\"{}\"{}>\n<thead><tr>", id_, sortable_ ? " class=\"sortable\"" : "");
    for (std::size_t c = 0; c < headers_.size(); ++c)
      out += fmt::format("<th{}>{}</th>", cell_class(c), html_escape(headers_[c]));
    out += "</tr></thead>\n<tbody>\n";
    for (const auto& [cells, selected] : rows_) {
      out += selected ? "<tr class=\"selected\">" : "<tr>";
      for (std::size_t c = 0; c < cells.size(); ++c)
        out += fmt::format("<td{}>{}</td>", cell_class(c), html_escape(cells[c]));
      out += "</tr>\n";
    }
    return out + "</tbody>\n</table>\n";
  }

private:
  std::string cell_class(std::size_t column) const {
    return std::find(text_columns_.begin(), text_columns_.end(), column) != text_columns_.end() ? " class=\"text\""
                                                                                                : "";
  }
  std::string id_;
  std::vector<std::string> headers_;
  bool sortable_;
  std::vector<std::size_t> text_columns_;
  std::vector<std::pair<std::vector<std::string>, bool>> rows_;
};

std::uint64_t slowest_tile_cycles(const ProgramFigures& f, std::size_t step) {
  return step < f.cycles.per_superstep.size() ? max_of(f.cycles.per_superstep[step]) : 0;
}

std::string package_summary(const ProgramFigures& f) {
  const Package& p = *f.package;
  const Target& t = p.target;
  std::uint64_t device_compute = 0, horizons = 0, bounds = 0;
  std::size_t phases = 0;
  for (std::size_t step = 0; step < f.cycles.per_superstep.size(); ++step)
    device_compute += slowest_tile_cycles(f, step);
  for (const PhaseFigures& phase : f.phases) {
    horizons += phase.horizon;
    bounds += phase.lower_bound;
    phases += !phase.empty();
  }
  Table table("package-summary", {"figure", "value"});
  table.text_columns({0, 1});
  table.row({"package", f.package_path});
  table.row({"model", fmt::format("{} ({})", p.graph.name, p.graph.source_file)});
  table.row(
      {"target", fmt::format("{}: {} tiles, {} per column, {:.4g} GHz, exchange latency {} + {} per column, "
                             "switch cost {}, multicast {}",
                             t.name, grouped(t.tiles), t.tiles_per_column, t.clock_hz / 1e9, t.exchange_base_latency,
                             t.exchange_latency_per_column, t.switch_cost, t.multicast ? "yes" : "no")});
  table.row({"tile memory", fmt::format("{} bytes; interleaved region from byte {}", grouped(t.memory_bytes),
                                        grouped(t.interleaved_start))});
  table.row({"compiler", fmt::format("tessera {}, codelet set {}", p.compiler_version, p.codelet_set_version)});
  table.row({"supersteps", fmt::format("{} ({} with an exchange phase)", f.phases.size(), phases)});
  table.row(
      {"peak tile memory",
       fmt::format("{} bytes on tile {} ({} of capacity; compile estimate {})", grouped(f.peak_tile_bytes), f.peak_tile,
                   percent(f.peak_tile_bytes, t.memory_bytes), grouped(p.estimates.peak_tile_bytes))});
  table.row({"compute", fmt::format("{} cycles: the slowest tile of each superstep, summed ({})",
                                    grouped(device_compute), f.cycles.source)});
  table.row(
      {"exchange",
       fmt::format(
           "{} cycles of horizons against lower bounds summing to {} ({}); compile: {} against {}", grouped(horizons),
           grouped(bounds),
           bounds == 0 ? "-" : fmt::format("{:.3f}x", static_cast<double>(horizons) / static_cast<double>(bounds)),
           grouped(p.estimates.scheduled_exchange_cycles), grouped(p.estimates.exchange_lower_bound))});
  table.row({"estimated total", fmt::format("{} cycles (compile estimate)", grouped(p.estimates.estimated_cycles))});
  if (f.cycles.simulated_total_cycles)
    table.row({"simulated total", fmt::format("{} cycles (the profile: compute, {} barriers of {}, exchange phases "
                                              "with {} cycles of overhead each)",
                                              grouped(*f.cycles.simulated_total_cycles), f.phases.size(), t.sync_cycles,
                                              t.exchange_phase_overhead)});
  return table.html();
}

std::string superstep_summary(const ProgramFigures& f) {
  Table table("superstep-summary", {"superstep", "label", "slowest tile cycles", "slowest tile", "exchange horizon",
                                    "lower bound", "endpoint bound", "horizon / bound", "words sent", "words received",
                                    "unreceived", "transfers", "active tiles"});
  table.text_columns({1});
  for (const PhaseFigures& phase : f.phases) {
    const auto& cycles = f.cycles.per_superstep[phase.index];
    const auto slowest = std::max_element(cycles.begin(), cycles.end());
    table.row({std::to_string(phase.index), phase.label, grouped(slowest_tile_cycles(f, phase.index)),
               slowest == cycles.end() ? "-" : std::to_string(slowest - cycles.begin()), grouped(phase.horizon),
               grouped(phase.lower_bound), grouped(phase.endpoint_lower_bound),
               phase.empty() ? "-" : fmt::format("{:.3f}", phase.ratio_to_bound()), grouped(phase.words_sent),
               grouped(phase.words_received), grouped(phase.words_unreceived), grouped(phase.transfers),
               grouped(phase.active_tiles)},
              f.selected_phase && *f.selected_phase == phase.index);
  }
  return table.html();
}

std::string phase_summary(const ProgramFigures& f) {
  Table table("phase-summary", {"rank", "tile", "words sent", "words received", "senders heard", "first cycle",
                                "last cycle + 1", "busier port / lower bound"});
  const std::uint64_t bound = f.selected_phase ? f.phases[*f.selected_phase].lower_bound : 0;
  for (std::size_t rank = 0; rank < f.timeline.size(); ++rank) {
    const TileTraffic& t = f.timeline[rank];
    table.row({std::to_string(rank + 1), std::to_string(t.tile), grouped(t.words_sent), grouped(t.words_received),
               std::to_string(t.senders), grouped(t.first_cycle), grouped(t.end_cycle),
               percent(t.busiest_port_words(), bound)});
  }
  return table.html();
}

std::string tile_summary(const ProgramFigures& f) {
  const std::uint64_t capacity = f.package->target.memory_bytes;
  Table table("tile-summary",
              {"tile", "standard bytes", "interleaved bytes", "total bytes", "of capacity", "buffers", "compute cycles",
               "words sent", "words received"},
              /*sortable=*/true);
  for (std::size_t tile = 0; tile < f.memory.size(); ++tile) {
    const TileMemory& m = f.memory[tile];
    std::uint64_t cycles = 0;
    for (const auto& step : f.cycles.per_superstep) cycles += step[tile];
    table.row({std::to_string(tile), grouped(m.standard_extent), grouped(m.interleaved_extent),
               grouped(m.total_extent()), percent(m.total_extent(), capacity), grouped(m.buffers), grouped(cycles),
               grouped(f.tile_words_sent[tile]), grouped(f.tile_words_received[tile])});
  }
  return table.html();
}

}  // namespace

std::string report_data_json(const ProgramFigures& f) {
  const Package& p = *f.package;
  nlohmann::json memory_standard = nlohmann::json::array(), memory_interleaved = nlohmann::json::array();
  for (const TileMemory& m : f.memory) {
    memory_standard.push_back(m.standard_extent);
    memory_interleaved.push_back(m.interleaved_extent);
  }
  nlohmann::json labels = nlohmann::json::array();
  for (const PhaseFigures& phase : f.phases) labels.push_back(phase.label);

  nlohmann::json phase = nullptr;
  if (f.selected_phase) {
    const PhaseFigures& selected = f.phases[*f.selected_phase];
    nlohmann::json rows = nlohmann::json::array();
    for (const TileTraffic& t : f.timeline) {
      const TileSuperstep& step = p.tiles[t.tile].supersteps[selected.index];
      nlohmann::json sends = nlohmann::json::array(), receives = nlohmann::json::array();
      for (const TileSend& s : step.sends)
        if (s.words > 0) sends.push_back({s.cycle, s.words});
      for (const TileReceive& r : step.receives)
        if (r.words > 0) receives.push_back({r.arrival, r.words, r.sender});
      rows.push_back({{"tile", t.tile}, {"sends", std::move(sends)}, {"receives", std::move(receives)}});
    }
    phase = {{"index", selected.index},
             {"label", selected.label},
             {"horizon", selected.horizon},
             {"lower_bound", selected.lower_bound},
             {"endpoint_lower_bound", selected.endpoint_lower_bound},
             {"tiles", std::move(rows)}};
  }
  const nlohmann::json data = {
      {"model", p.graph.name},
      {"target", p.target.name},
      {"tiles", p.tiles.size()},
      {"capacity", p.target.memory_bytes},
      {"interleaved_start", p.target.interleaved_start},
      {"supersteps", std::move(labels)},
      {"memory", {{"standard", std::move(memory_standard)}, {"interleaved", std::move(memory_interleaved)}}},
      {"cycles", {{"source", f.cycles.source}, {"per_superstep", f.cycles.per_superstep}}},
      {"phase", std::move(phase)},
  };
  // A package's names need not be UTF-8 (a forged or older package): replace, never throw.
  return data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string render_html_report(const ProgramFigures& f) {
  const Package& p = *f.package;
  // Inside <script>, "</script>" or "<!--" in a label would end or confuse the element;
  // JSON may write '<' as \u003c anywhere it appears (only inside strings).
  std::string data;
  for (char c : report_data_json(f)) data += c == '<' ? std::string("\\u003c") : std::string(1, c);

  std::string cycles_options = "<option value=\"all\">all supersteps, stacked</option>";
  for (const PhaseFigures& phase : f.phases)
    cycles_options += fmt::format("<option value=\"{}\">superstep {}: {}</option>", phase.index, phase.index,
                                  html_escape(phase.label));

  std::string phase_heading, phase_note;
  if (f.selected_phase) {
    const PhaseFigures& phase = f.phases[*f.selected_phase];
    phase_heading = fmt::format("Exchange phase {} ({}): the {} busiest tiles", phase.index, html_escape(phase.label),
                                f.timeline.size());
    phase_note = fmt::format(
        "Horizon {} cycles against a lower bound of {} ({:.3f}x; endpoint bound {}), {} words sent in {} "
        "transfers between {} active tiles. The bound is tessera::lower_bound of the phase rebuilt from the tile "
        "images' sends and receives. Tiles are ranked by the words through their busier port; the tile whose "
        "last word sets the horizon is always shown.",
        grouped(phase.horizon), grouped(phase.lower_bound), phase.ratio_to_bound(), grouped(phase.endpoint_lower_bound),
        grouped(phase.words_sent), grouped(phase.transfers), grouped(phase.active_tiles));
  } else {
    phase_heading = "Exchange phase";
    phase_note = "No superstep of this package exchanges any word.";
  }

  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page +=
      fmt::format("<title>Tessera report: {} on {}</title>\n", html_escape(p.graph.name), html_escape(p.target.name));
  page += fmt::format("<style>{}</style>\n<script>{}</script>\n</head>\n", kReportStyle, kErrorCatcherScript);
  page += "<body data-render=\"pending\">\n";
  page += fmt::format("<h1>{} on {}</h1>\n<p class=\"note\">Package {}; compute cycles from {}.</p>\n",
                      html_escape(p.graph.name), html_escape(p.target.name), html_escape(f.package_path),
                      html_escape(f.cycles.source));
  page += "<ul id=\"render-errors\"></ul>\n";
  page += "<h2>Summary</h2>\n" + package_summary(f);

  page += "<h2>Memory per tile, by region</h2>\n";
  page += fmt::format(
      "<p class=\"note\">Each column is one tile's {}-byte memory, address 0 at the bottom. Blue: the standard region "
      "used, from 0; orange: the interleaved region used, from byte {} (dashed line). Buffers that are never live at "
      "the same time share addresses, so a bar's height is what the tile needs, not the sum of its buffers. The second "
      "view stacks the two regions' bytes and zooms to the fullest tile.</p>\n",
      grouped(p.target.memory_bytes), grouped(p.target.interleaved_start));
  page +=
      "<label>Show <select id=\"memory-view\"><option value=\"addresses\">addresses, against the capacity</option>"
      "<option value=\"used\">bytes used per region, stacked (zoomed to the fullest tile)</option></select></label>\n";
  page += "<svg id=\"memory-chart\" class=\"chart\" role=\"img\" aria-label=\"memory per tile by region\"></svg>\n";
  page += "<p class=\"hover\" id=\"memory-hover\"></p>\n";

  page += "<h2>Compute cycles per tile</h2>\n";
  page += fmt::format(
      "<p class=\"note\">Codelet cycles of each tile per superstep ({}). Every superstep ends at a barrier, "
      "so the device waits for its slowest tile (dashed line); the gap above a bar is that tile's idle "
      "time.</p>\n",
      html_escape(f.cycles.source));
  page += fmt::format("<label>Show <select id=\"cycles-superstep\">{}</select></label>\n", cycles_options);
  page += "<div class=\"legend\" id=\"cycles-legend\"></div>\n";
  page += "<svg id=\"cycles-chart\" class=\"chart\" role=\"img\" aria-label=\"compute cycles per tile\"></svg>\n";
  page += "<p class=\"hover\" id=\"cycles-hover\"></p>\n";

  page += fmt::format("<h2>{}</h2>\n<p class=\"note\">{}</p>\n", phase_heading, phase_note);
  page += "<svg id=\"exchange-chart\" class=\"chart\" role=\"img\" aria-label=\"exchange timeline\"></svg>\n";
  page += "<div class=\"wide\">" + phase_summary(f) + "</div>\n";

  page += "<h2>Supersteps</h2>\n<div class=\"wide\">" + superstep_summary(f) + "</div>\n";
  page += "<h2>Tiles</h2>\n<p class=\"note\">Click a column heading to sort.</p>\n<div class=\"scroll\">" +
          tile_summary(f) + "</div>\n";

  page += "<script type=\"application/json\" id=\"report-data\">" + data + "</script>\n";
  page += fmt::format("<script>{}</script>\n</body>\n</html>\n", kReportScript);
  return page;
}

}  // namespace tessera::report
