// The scan's heatmap (`attnrank scan --svg`): one cell per head, laid out from the
// lengths of its own texts so that nothing is clipped (tests/cli/svg_render.py
// renders it and checks the pixels), with axis titles, a colour legend, and a
// mark on every cell whose width is known from one side only.
#include "figures.hpp"
#include "svg.hpp"

#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace attnrank::cli {
namespace {

/// A generous estimate of a text's width in DejaVu Sans (the widest common
/// sans-serif): 0.62 em a character, 0.68 bold.
double text_width(const std::string& s, double size, bool bold = false) {
  std::size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xc0) != 0x80;  // UTF-8: count code points
  return static_cast<double>(chars) * size * (bold ? 0.68 : 0.62);
}

std::string index_label(const std::vector<std::size_t>& index, std::size_t drop_last) {
  std::string s;
  for (std::size_t k = 0; k + drop_last < index.size(); ++k) {
    if (k) s += ',';  // appended in two steps: GCC 12 misreads "," + string&& as an overflow
    s += std::to_string(index[k]);
  }
  return s.empty() ? "0" : s;
}

/// What a cell shows: its value for the colour and its text.
struct Cell {
  double value = 0;
  std::string text, tooltip;
};

Cell cell_of(const HeadScan& h, const ScanQuestion& q) {
  Cell c;
  const std::string where = "head [" + index_label(h.index, 0) + "]";
  if (q.epsilon && h.width_lower) {
    const std::string known = width_known(h);
    if (known == "exact") {
      c.value = static_cast<double>(*h.width_upper);
      c.text = std::to_string(*h.width_upper);
      c.tooltip = where + ": minimal width = " + c.text + " (proven both ways)";
    } else if (known == "upper" || known == "range") {
      c.value = static_cast<double>(*h.width_upper);
      c.text = "\u2264" + std::to_string(*h.width_upper);
      c.tooltip = where + ": " + std::to_string(*h.width_lower) + " <= minimal width <= " +
                  std::to_string(*h.width_upper) + " (a witness at the upper end" +
                  (known == "upper" ? "; no narrower width proven to miss)" : ")");
    } else {
      c.value = static_cast<double>(*h.width_lower);
      c.text = "\u2265" + std::to_string(*h.width_lower);
      c.tooltip = where + ": minimal width >= " + std::to_string(*h.width_lower) +
                  " (no witness within epsilon up to d_k = " +
                  std::to_string(h.max_dk) + ")";
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
  std::ostringstream eps;
  if (q.epsilon) eps << *q.epsilon;
  const std::string title = "scan of " + stack.name;
  const std::string what = widths ? "smallest head width within epsilon = " + eps.str()
                           : q.dk ? "E* at d_k = " + std::to_string(*q.dk) + " (certified upper bound)"
                                  : "floor of each head (upper bound)";
  std::string setting = "mask " + (q.mask ? q.mask->name() : std::string("none"));
  if (q.dk && widths) setting += ", d_k = " + std::to_string(*q.dk);
  setting += "; every number certified for its own head";
  const std::string marks = widths ? "\u2264w: a witness within epsilon at w, no proof that narrower misses; "
                                     "\u2265w: none up to max d_k"
                                   : "";
  bool any_mark = false;
  for (const Cell& c : cells) any_mark = any_mark || c.text.rfind("\u2264", 0) == 0 || c.text.rfind("\u2265", 0) == 0;

  const double margin = 14, cell = cols > 32 ? 16 : 34;
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
  y = setting_y + (any_mark ? 17 : 0) + 14;
  const double col_label_y = y + 10, grid_y = col_label_y + 8;
  const double grid_w = cell * static_cast<double>(cols), grid_h = cell * static_cast<double>(rows);
  const double x_title_y = grid_y + grid_h + 20;
  // The legend: a colour bar right of the grid, its ends labelled.
  const double legend_x = grid_x + grid_w + 24, bar_w = 14;
  const double bar_h = std::max(grid_h, 90.0);
  const std::string legend_title = widths ? "width" : q.dk ? "E*" : "floor";
  const double legend_w =
      std::max({text_width(legend_title, 11, true), bar_w + 6 + text_width(number_text(hi, integers), 11),
                bar_w + 6 + text_width(number_text(lo, integers), 11)});
  double width = std::max({legend_x + legend_w, grid_x + text_width("head (last index)", 12)}) + margin;
  width = std::max({width, margin + text_width(title, 15, true) + margin, margin + text_width(what, 13) + margin,
                    margin + text_width(setting, 11) + margin, any_mark ? margin + text_width(marks, 11) + margin : 0.0});
  const double height = std::ceil(std::max(x_title_y, grid_y + 16 + bar_h + 16) + margin);
  width = std::ceil(width);  // whole pixels: no half-covered column at the edge

  Svg svg(width, height, title + ": " + what);
  svg.text(margin, title_y, title, 15, "start", true);
  svg.text(margin, what_y, what, 13);
  svg.text(margin, setting_y, setting, 11, "start", false, "#444444");
  if (any_mark) svg.text(margin, setting_y + 17, marks, 11, "start", false, "#444444");
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

}  // namespace attnrank::cli
