// The scan's heatmap (`attnrank scan --svg`): one cell per head, laid out from the
// lengths of its own texts so that nothing is clipped (tests/cli/svg_render.py
// renders it and checks the pixels), with axis titles, a colour legend, and in each
// cell what is proven of its head: "=w", "a..b", "\u2264w" or "\u2265w", coloured by the
// proven lower end, an open bracket's cell with a dashed border, and a legend line
// true of every cell of each kind the figure has.
#include "figures.hpp"
#include "svg.hpp"

#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

namespace attnrank::cli {
namespace {

std::string index_label(const std::vector<std::size_t>& index, std::size_t drop_last) {
  std::string s;
  for (std::size_t k = 0; k + drop_last < index.size(); ++k) {
    if (k) s += ',';  // appended in two steps: GCC 12 misreads "," + string&& as an overflow
    s += std::to_string(index[k]);
  }
  return s.empty() ? "0" : s;
}

/// What a cell shows: its value for the colour, its text, and whether what it shows
/// is open (a width bracket not pinned to one value).
struct Cell {
  double value = 0;
  std::string text, tooltip, kind;  ///< kind: the width bracket's ("exact", "range", "upper", "lower"), or ""
};

Cell cell_of(const HeadScan& h, const ScanQuestion& q) {
  Cell c;
  const std::string where = "head [" + index_label(h.index, 0) + "]";
  if (q.epsilon && h.width_lower) {
    // The colour is the proven lower end: what is known of every head, the same way.
    c.kind = width_known(h);
    c.value = static_cast<double>(*h.width_lower);
    const std::string lo = std::to_string(*h.width_lower);
    const std::string hi = h.width_upper ? std::to_string(*h.width_upper) : "";
    if (c.kind == "exact") {
      c.text = "=" + hi;
      c.tooltip = where + ": minimal width = " + hi + " (proven both ways)";
    } else if (c.kind == "range") {
      c.text = lo + ".." + hi;
      c.tooltip = where + ": " + lo + " <= minimal width <= " + hi + " (every width below " + lo +
                  " proven to miss; a witness within epsilon at " + hi + ")";
    } else if (c.kind == "upper") {
      c.text = "\u2264" + hi;
      c.tooltip = where + ": minimal width <= " + hi + " (a witness within epsilon at " + hi +
                  "; no narrower width proven to miss)";
    } else {
      c.text = "\u2265" + lo;
      c.tooltip = where + ": minimal width >= " + lo + " (every width below " + lo +
                  " proven to miss; no witness within epsilon up to d_k = " + std::to_string(h.max_dk) + ")";
    }
  } else if (q.dk && h.error_upper) {
    c.value = *h.error_upper;
    c.text = format_upper_bound(*h.error_upper, 2);
    c.tooltip = where + ": " + format_lower_bound(*h.error_lower) + " <= E* <= " + format_upper_bound(*h.error_upper);
  } else {
    c.value = static_cast<double>(h.floor_upper);
    c.text = h.zero_entry ? "0!" : std::to_string(h.floor_upper);
    c.tooltip = where + (h.zero_entry ? ": a zero entry no finite scores give"
                                      : ": " + std::to_string(h.floor_lower) + " <= floor <= " + std::to_string(h.floor_upper));
  }
  if (!h.note.empty()) c.tooltip += "; note: " + h.note;
  return c;
}

/// The legend's sentence for each kind of width cell, each true of every cell of that kind.
const char* width_kind_sentence(const std::string& kind) {
  if (kind == "exact") return "=w: the smallest width within epsilon is w, proven both ways";
  if (kind == "range") return "a..b: every width below a proven to miss; a witness within epsilon at b";
  if (kind == "upper") return "\u2264w: a witness within epsilon at w; no narrower width proven to miss";
  return "\u2265w: every width below w proven to miss; no witness within epsilon up to max d_k";
}

std::string number_text(double v, bool integer) {
  if (integer) return std::to_string(std::lround(v));
  return format_upper_bound(v, 2);
}

}  // namespace

std::string scan_figure(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads) {
  // Rows: every leading index but the last (layers); columns: the last (heads).
  std::size_t cols = 1;
  for (const HeadScan& h : heads)
    if (!h.index.empty()) cols = std::max(cols, h.index.back() + 1);
  const std::size_t rows = (heads.size() + cols - 1) / cols;
  std::vector<Cell> cells;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const HeadScan& h : heads) {
    cells.push_back(cell_of(h, q));
    lo = std::min(lo, cells.back().value);
    hi = std::max(hi, cells.back().value);
  }
  const bool widths = q.epsilon.has_value();
  const bool integers = widths || !q.dk;
  const std::string eps = q.epsilon ? shortest_decimal(*q.epsilon) : "";  // as given: 0.01, not 1.01e-02
  const std::string title = "scan of " + stack.name;
  const std::string what = widths ? "smallest head width within epsilon = " + eps
                           : q.dk ? "E* at d_k = " + std::to_string(*q.dk) + " (certified upper bound)"
                                  : "floor of each head (upper bound)";
  std::string setting = "mask " + (q.mask ? q.mask->name() : std::string("none"));
  if (q.dk && widths) setting += ", d_k = " + std::to_string(*q.dk);
  setting += "; every number certified for its own head";
  // The legend's lines: one per kind of cell the figure has, then what colour and border mean.
  std::vector<std::string> marks;
  bool any_open = false;
  for (const char* kind : {"exact", "range", "upper", "lower"})
    for (const Cell& c : cells)
      if (c.kind == kind) {
        marks.push_back(width_kind_sentence(kind));
        any_open = any_open || c.kind != "exact";
        break;
      }
  if (!marks.empty())
    marks.push_back(std::string("colour: the proven lower end of the bracket") +
                    (any_open ? "; dashed border: an open bracket (the width is not pinned)" : ""));

  const double margin = 14;
  double widest_text = 0;
  for (const Cell& c : cells) widest_text = std::max(widest_text, text_width(c.text, 10));
  // Cells wide enough for their text ("10..16" too), unless there are too many columns to show any.
  const double cell = cols > 32 ? 16 : std::max(34.0, std::ceil(widest_text + 8));
  const double axis_title = 18;  // the rotated y-axis title's column
  double row_label_w = text_width("layer", 12);
  std::vector<std::string> row_labels;
  for (std::size_t r = 0; r < rows; ++r) {
    row_labels.push_back(index_label(heads[r * cols].index, 1));
    row_label_w = std::max(row_label_w, text_width(row_labels.back(), 12));
  }
  const double grid_x = margin + axis_title + row_label_w + 8;
  double y = margin;
  const double title_y = y + 14, what_y = title_y + 20, setting_y = what_y + 17;
  y = setting_y + 17 * static_cast<double>(marks.size()) + 14;
  const double col_label_y = y + 10, grid_y = col_label_y + 8;
  const double grid_w = cell * static_cast<double>(cols), grid_h = cell * static_cast<double>(rows);
  const double x_title_y = grid_y + grid_h + 20;
  // The legend: a colour bar right of the grid, its ends labelled.
  const double legend_x = grid_x + grid_w + 24, bar_w = 14;
  const double bar_h = std::max(grid_h, 90.0);
  const std::string legend_title = widths ? "proven width \u2265" : q.dk ? "E*" : "floor";
  const double legend_w =
      std::max({text_width(legend_title, 11, true), bar_w + 6 + text_width(number_text(hi, integers), 11),
                bar_w + 6 + text_width(number_text(lo, integers), 11)});
  double width = std::max({legend_x + legend_w, grid_x + text_width("head (last index)", 12)}) + margin;
  width = std::max({width, margin + text_width(title, 15, true) + margin, margin + text_width(what, 13) + margin,
                    margin + text_width(setting, 11) + margin});
  for (const std::string& m : marks) width = std::max(width, margin + text_width(m, 11) + margin);
  const double height = std::ceil(std::max(x_title_y, grid_y + 16 + bar_h + 16) + margin);
  width = std::ceil(width);  // whole pixels: no half-covered column at the edge

  Svg svg(width, height, title + ": " + what);
  svg.text(margin, title_y, title, 15, "start", true);
  svg.text(margin, what_y, what, 13);
  svg.text(margin, setting_y, setting, 11, "start", false, "#444444");
  for (std::size_t k = 0; k < marks.size(); ++k)
    svg.text(margin, setting_y + 17 * static_cast<double>(k + 1), marks[k], 11, "start", false, "#444444");
  for (std::size_t c = 0; c < cols; ++c)
    if (cols <= 32 || c % 4 == 0)
      svg.text(grid_x + (static_cast<double>(c) + 0.5) * cell, col_label_y, std::to_string(c), 11, "middle");
  for (std::size_t r = 0; r < rows; ++r)
    svg.text(grid_x - 6, grid_y + (static_cast<double>(r) + 0.5) * cell + 4, row_labels[r], 11, "end");
  svg.text_vertical(margin + 12, grid_y + grid_h / 2, rows > 1 || heads.front().index.size() > 1 ? "layer" : "", 12);
  svg.text(grid_x + grid_w / 2, x_title_y, "head (last index)", 12, "middle");
  const auto shade = [&](double v) { return hi > lo ? (v - lo) / (hi - lo) : 0.5; };
  for (std::size_t t = 0; t < cells.size(); ++t) {
    const double cx = grid_x + static_cast<double>(t % cols) * cell, cy = grid_y + static_cast<double>(t / cols) * cell;
    const double s = shade(cells[t].value);
    svg.rect(cx, cy, cell, cell, weight_colour(s), "cell", cells[t].tooltip, "#ffffff");
    if (!cells[t].kind.empty() && cells[t].kind != "exact")  // an open bracket: a dashed border inside the cell
      svg.dashed_outline(cx + 2, cy + 2, cell - 4, cell - 4, s > 0.55 ? "#ffffff" : "#333333", "open");
    if (cell >= 30 && text_width(cells[t].text, 10) <= cell - 4)
      svg.text(cx + cell / 2, cy + cell / 2 + 4, cells[t].text, 10, "middle", false, s > 0.55 ? "#ffffff" : "#111111");
  }
  svg.text(legend_x, grid_y - 4, legend_title, 11, "start", true);
  constexpr int steps = 24;
  for (int k = 0; k < steps; ++k)  // high values at the top
    svg.rect(legend_x, grid_y + bar_h * k / steps, bar_w, bar_h / steps + 0.5,
             weight_colour(1.0 - (k + 0.5) / steps), "legend");
  svg.text(legend_x + bar_w + 6, grid_y + 10, number_text(hi, integers), 11);
  if (hi > lo) svg.text(legend_x + bar_w + 6, grid_y + bar_h, number_text(lo, integers), 11);
  return svg.str();
}

std::string scan_brackets_figure(const HeadStack& stack, const ScanQuestion& q, const std::vector<HeadScan>& heads) {
  if (!q.epsilon) throw input_error("--brackets-svg draws the width brackets of a scan with --epsilon");
  const std::string title = "scan of " + stack.name + ": width brackets";
  const std::string what = "smallest head width within epsilon = " + shortest_decimal(*q.epsilon) + ", mask " +
                           (q.mask ? q.mask->name() : std::string("none")) + "; each bracket certified both ways";
  const std::string key = "dot: the width, proven; bar: from the proven lower end to a witness; arrow: every width "
                          "below its foot proven to miss, no witness up to max d_k";
  Eigen::Index top_width = 1;
  std::vector<std::string> labels;
  double label_w = 0;
  for (const HeadScan& h : heads) {
    // Up to the widest witness, or to max d_k where a head has none (its arrow ends there).
    top_width = std::max<Eigen::Index>({top_width, h.width_upper ? *h.width_upper : h.max_dk, h.width_lower.value_or(0)});
    std::string label;
    for (std::size_t k = 0; k < h.index.size(); ++k) {
      if (k) label += '.';  // in two steps: GCC 12 misreads "." + std::string&& as an overflow
      label += std::to_string(h.index[k]);
    }
    labels.push_back(label.empty() ? "0" : label);
    label_w = std::max(label_w, text_width(labels.back(), 10));
  }
  const bool turned = heads.size() > 16;  // labels written upwards when they would crowd
  const double margin = 14, left = margin + 18 + text_width(std::to_string(top_width), 10) + 8, top = 86;
  const double step = std::max(turned ? 14.0 : label_w + 8, 12.0), plot_w = step * static_cast<double>(heads.size());
  const double plot_h = std::clamp(22.0 * static_cast<double>(top_width), 120.0, 360.0);
  const double labels_h = turned ? label_w + 8 : 18;
  double width = left + plot_w + margin;
  for (const auto& [t, size, bold] : {std::tuple{title, 15.0, true}, {what, 12.0, false}, {key, 11.0, false}})
    width = std::max(width, margin + text_width(t, size, bold) + margin);
  width = std::ceil(width);
  const double height = std::ceil(top + plot_h + 8 + labels_h + 22 + margin);
  const auto y_of = [&](double w) { return top + plot_h - (w - 0.5) / (static_cast<double>(top_width) + 1) * plot_h; };
  Svg svg(width, height, title);
  svg.text(margin, 24, title, 15, "start", true);
  svg.text(margin, 44, what, 12);
  svg.text(margin, 62, key, 11, "start", false, "#444444");
  svg.line(left, top, left, top + plot_h, "#333");
  svg.line(left, top + plot_h, left + plot_w, top + plot_h, "#333");
  const Eigen::Index tick_every = std::max<Eigen::Index>(1, top_width / 12);
  for (Eigen::Index w = 1; w <= top_width; w += tick_every) {
    svg.line(left, y_of(static_cast<double>(w)), left + plot_w, y_of(static_cast<double>(w)), "#e5e5e5");
    svg.text(left - 6, y_of(static_cast<double>(w)) + 4, std::to_string(w), 10, "end");
  }
  svg.text_vertical(margin + 8, top + plot_h / 2, "width", 12);
  for (std::size_t t = 0; t < heads.size(); ++t) {
    const HeadScan& h = heads[t];
    const double x = left + step * (static_cast<double>(t) + 0.5);
    const std::string where = "head [" + index_label(h.index, 0) + "]: ";
    if (!h.width_lower) continue;
    const double lo = static_cast<double>(*h.width_lower);
    if (h.width_upper && *h.width_upper == *h.width_lower) {
      svg.rect(x - 4.5, y_of(lo) - 4.5, 9, 9, "#08519c", "bracket", where + "width = " + std::to_string(*h.width_upper));
    } else if (h.width_upper) {
      const double hi = static_cast<double>(*h.width_upper);
      svg.rect(x - 4, y_of(hi), 8, std::max(y_of(lo) - y_of(hi), 2.0), "#6baed6", "bracket",
               where + std::to_string(*h.width_lower) + " <= width <= " + std::to_string(*h.width_upper));
    } else {
      const double end = y_of(static_cast<double>(h.max_dk) + 0.5);
      svg.line(x, y_of(lo), x, end + 6, "#e6550d", 2);
      svg.polyline({{x - 4, end + 7}, {x, end}, {x + 4, end + 7}}, "#e6550d");
      svg.rect(x - 2, y_of(lo) - 2, 4, 4, "#e6550d", "bracket",
               where + "width >= " + std::to_string(*h.width_lower) + " (no witness up to d_k = " +
                   std::to_string(h.max_dk) + ")");
    }
    if (turned) svg.text_vertical(x + 4, top + plot_h + 8 + label_w / 2, labels[t], 10);
    else svg.text(x, top + plot_h + 16, labels[t], 10, "middle");
  }
  svg.text(left + plot_w / 2, top + plot_h + 8 + labels_h + 14, "head (leading indices)", 12, "middle");
  return svg.str();
}

}  // namespace attnrank::cli
