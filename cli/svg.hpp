#pragma once
// Plain SVG, written by hand: no fonts, scripts or images from outside the file,
// so a figure opens anywhere. Every heatmap cell carries class="cell" and every
// spectrum bar class="bar" (the tests count them).

#include <Eigen/Core>

#include <string>
#include <utility>
#include <vector>

namespace attnrank::cli {

class Svg {
 public:
  Svg(double width, double height, const std::string& title);

  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& css_class = "",
            const std::string& tooltip = "", const std::string& stroke = "");
  void text(double x, double y, const std::string& s, double size = 12, const std::string& anchor = "start",
            bool bold = false, const std::string& fill = "");
  /// Text turned a quarter to the left (an axis title), centred on (x, y).
  void text_vertical(double x, double y, const std::string& s, double size = 12);
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            bool dashed = false);
  /// A dashed rectangle outline (no fill), of class `css_class`.
  void dashed_outline(double x, double y, double w, double h, const std::string& stroke, const std::string& css_class);
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke);

  /// The finished document.
  std::string str() const;

 private:
  double width_, height_;
  std::string body_;
};

/// A generous estimate of a text's width in DejaVu Sans (the widest common
/// sans-serif): 0.62 em a character, 0.68 bold. Figures size themselves from it, so
/// that nothing they write is clipped.
double text_width(const std::string& s, double size, bool bold = false);

/// Escapes &, <, >, " and ' for XML text and attribute values.
std::string xml_escape(const std::string& s);

/// A white-to-blue colour for a value in [0, 1] (clamped).
std::string weight_colour(double v);

/// A labelled heatmap of values in [0, 1] with its top-left corner at (x, y):
/// one cell per entry (text of `labels` in the cell when given), row and
/// column labels, and a title above. Returns the height used.
double heatmap(Svg& svg, double x, double y, double cell, const Eigen::MatrixXd& values,
               const std::vector<std::vector<std::string>>& labels, const std::vector<std::string>& row_labels,
               const std::vector<std::string>& col_labels, const std::string& title);

/// Bars of the values (non-negative) with a vertical marker after the first
/// `cut` of them, labelled `cut_label`; polyline instead of bars past 128 values.
void spectrum(Svg& svg, double x, double y, double w, double h, const Eigen::VectorXd& values, Eigen::Index cut,
              const std::string& cut_label, const std::string& title);

/// Writes `content` to `path`; throws input_error naming the path on failure.
void write_text_file(const std::string& path, const std::string& content);

}  // namespace attnrank::cli
