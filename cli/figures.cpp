#include "figures.hpp"

#include "svg.hpp"

#include <attnrank/error.hpp>

#include <cstdio>
#include <filesystem>

namespace attnrank::cli {
namespace {

const std::vector<std::string> tokens = {"I", "love", "LLMs"};

std::string two_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::vector<std::vector<std::string>> cell_labels(const Eigen::MatrixXd& m) {
  std::vector<std::vector<std::string>> out(static_cast<std::size_t>(m.rows()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out[static_cast<std::size_t>(i)].push_back(two_decimals(m(i, j)));
  return out;
}

std::string figure8(const AppendixFigureData& d) {
  const double cell = 52, h = 40 + cell * static_cast<double>(d.sweep.rows()) + 90;
  Svg svg(560, h, "Figure 8: the d_k = 1 head with keys (2, 0, 1)");
  std::vector<std::string> rows;
  for (const std::string& q : d.sweep_q) rows.push_back("q = " + q);
  const double used = heatmap(svg, 20, 10, cell, d.sweep, cell_labels(d.sweep), rows, tokens,
                              "Figure 8: softmax(q (2, 0, 1)), one row per q");
  svg.text(20, 10 + used + 24, "Large q > 0 favours I (largest key), q < 0 favours love (smallest key).", 11);
  svg.text(20, 10 + used + 40, "LLMs (the middle key) never takes the top weight: at most 1/3, at q = 0.", 11);
  return svg.str();
}

std::string figure9(const AppendixFigureData& d) {
  const double x0 = 150, unit = 90, row = 44, top = 70;
  const auto n = static_cast<double>(d.n);
  Svg svg(std::max(x0 + unit * n + 120, 760.0), top + row * n + 90, "Figure 9: ceiling per d_k against the floor");
  svg.text(20, 24, "Figure 9: the rank a head can build (ceiling d_k) against the rank A demands (floor)", 14, "start", true);
  for (Eigen::Index k = 0; k <= d.n; ++k) {
    const double x = x0 + unit * static_cast<double>(k);
    svg.line(x, top - 10, x, top + row * n, "#dddddd");
    svg.text(x, top + row * n + 18, std::to_string(k), 12, "middle");
  }
  svg.text(x0 + unit * n / 2, top + row * n + 36, "rank", 12, "middle");
  for (Eigen::Index dk = 1; dk <= d.n; ++dk) {
    const double y = top + row * static_cast<double>(dk - 1);
    const bool reaches = dk >= d.floor;
    svg.text(x0 - 10, y + row / 2 + 4, "d_k = " + std::to_string(dk), 12, "end");
    svg.rect(x0, y + 8, unit * static_cast<double>(dk), row - 16, reaches ? "#41ab5d" : "#ef3b2c", "bar",
             "ceiling rank(Q K^T) <= " + std::to_string(dk) + (reaches ? ": reachable" : ": unreachable"));
    svg.text(x0 + unit * static_cast<double>(dk) + 6, y + row / 2 + 4, reaches ? "reachable" : "unreachable", 11);
  }
  const double fx = x0 + unit * static_cast<double>(d.floor);
  svg.line(fx, top - 20, fx, top + row * n, "#08306b", 2.5, true);
  svg.text(fx, top - 26, "floor rank(log(A) C) = " + std::to_string(d.floor), 12, "middle", true);
  svg.text(20, top + row * n + 60,
           "Bars: the ceiling rank(Q_i K_i^T) <= d_k (Equation 2-6). Dashed: the floor every S with softmax(S) = A needs.", 11);
  svg.text(20, top + row * n + 76, "A head reaches A exactly when its bar crosses the line (n = " + std::to_string(d.n) + ").", 11);
  return svg.str();
}

std::string spectrum_figure(const AppendixFigureData& d) {
  Svg svg(560, 340, "Singular values of log(A) C");
  spectrum(svg, 60, 10, 420, 280, d.singular_values, 1, "d_k = 1 keeps one",
           "Singular values of log(A) C (diagonal target, n = " + std::to_string(d.n) + "; numeric)");
  svg.text(20, 330, std::to_string(d.floor) + " non-zero values: the floor. A head of width d_k keeps the first d_k.", 11);
  return svg.str();
}

std::string heads_figure(const AppendixFigureData& d) {
  const double cell = 60, w = 70 + cell * 3 + 40;
  Svg svg(w * static_cast<double>(d.heads.size()) + 20, 40 + cell * 3 + 60, "Section 2.2: the two heads' attention");
  for (std::size_t h = 0; h < d.heads.size(); ++h)
    heatmap(svg, 10 + w * static_cast<double>(h), 10, cell, d.heads[h], cell_labels(d.heads[h]), tokens, tokens,
            "A_" + std::to_string(h + 1) + " (head " + std::to_string(h + 1) + ")");
  svg.text(10, 40 + cell * 3 + 40, "Rows: the attending token; columns: the token attended to.", 11);
  svg.text(10, 40 + cell * 3 + 56, "Head 2's first row is flat: its query slice is zero (the abstaining head).", 11);
  return svg.str();
}

}  // namespace

std::vector<std::string> write_appendix_figures(const AppendixFigureData& data, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw input_error(dir + ": cannot create the directory for the figures");
  std::vector<std::string> written;
  const auto put = [&](const std::string& name, const std::string& svg) {
    const std::string path = (fs::path(dir) / name).string();
    write_text_file(path, svg);
    written.push_back(path);
  };
  put("figure8_sweep.svg", figure8(data));
  put("figure9_rank_axis.svg", figure9(data));
  put("log_A_C_spectrum.svg", spectrum_figure(data));
  put("section2_2_heads.svg", heads_figure(data));
  return written;
}

std::string reach_figure(const Eigen::MatrixXd& target, const Eigen::MatrixXd* approximation,
                         const Eigen::VectorXd& spectrum_values, Eigen::Index dk, const std::string& caption,
                         const std::string& spectrum_title) {
  const Eigen::Index n = target.rows();
  constexpr Eigen::Index max_heatmap = 64;
  const double cell = n <= 8 ? 48 : std::max(4.0, 384.0 / static_cast<double>(n));
  const double side = n <= max_heatmap ? 40 + cell * static_cast<double>(n) : 80;
  const double panel = std::max(side + 90, 300.0);
  Svg svg(panel * 2 + 520, std::max(side, 300.0) + 90, "attnrank reach: " + caption);
  svg.text(10, 18, caption, 13, "start", true);
  const bool labels = n <= 8;
  std::vector<std::string> names;
  for (Eigen::Index i = 0; i < n && labels; ++i) names.push_back(std::to_string(i + 1));
  const auto draw = [&](double x, const Eigen::MatrixXd& m, const std::string& title) {
    if (n > max_heatmap) {
      svg.text(x, 50, title, 14, "start", true);
      svg.text(x, 74, "n = " + std::to_string(n) + ": heatmaps are drawn up to n = " + std::to_string(max_heatmap), 11);
      return;
    }
    heatmap(svg, x, 28, cell, m, labels ? cell_labels(m) : std::vector<std::vector<std::string>>{},
            labels ? names : std::vector<std::string>{}, names, title);
  };
  draw(10, target, "target A");
  if (approximation) draw(10 + panel, *approximation, "best width-" + std::to_string(dk) + " head");
  else svg.text(10 + panel, 50, "no width-" + std::to_string(dk) + " witness (zero entry in A)", 12);
  spectrum(svg, 2 * panel + 60, 28, 420, std::max(side, 300.0) - 20, spectrum_values, dk,
           "d_k = " + std::to_string(dk), spectrum_title);
  return svg.str();
}

}  // namespace attnrank::cli
