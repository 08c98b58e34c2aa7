#include "svg.hpp"

#include <attnrank/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace attnrank::cli {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

Svg::Svg(double width, double height, const std::string& title) : width_(width), height_(height) {
  body_ += "<title>" + xml_escape(title) + "</title>\n";
  rect(0, 0, width, height, "#ffffff");
}

void Svg::rect(double x, double y, double w, double h, const std::string& fill, const std::string& css_class,
               const std::string& tooltip, const std::string& stroke) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
           "\" fill=\"" + fill + "\"";
  if (!stroke.empty()) body_ += " stroke=\"" + stroke + "\" stroke-width=\"2\"";
  if (!css_class.empty()) body_ += " class=\"" + css_class + "\"";
  body_ += tooltip.empty() ? "/>\n" : "><title>" + xml_escape(tooltip) + "</title></rect>\n";
}

void Svg::text(double x, double y, const std::string& s, double size, const std::string& anchor, bool bold,
               const std::string& fill) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(size) + "\" text-anchor=\"" + anchor +
           "\"" + (bold ? " font-weight=\"bold\"" : "") + (fill.empty() ? "" : " fill=\"" + fill + "\"") + ">" +
           xml_escape(s) + "</text>\n";
}

void Svg::text_vertical(double x, double y, const std::string& s, double size) {
  if (s.empty()) return;
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(size) +
           "\" text-anchor=\"middle\" transform=\"rotate(-90 " + num(x) + " " + num(y) + ")\">" + xml_escape(s) +
           "</text>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width, bool dashed) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
           "\" stroke=\"" + stroke + "\" stroke-width=\"" + num(width) + "\"" +
           (dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
}

double text_width(const std::string& s, double size, bool bold) {
  std::size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xc0) != 0x80;  // UTF-8: count code points
  return static_cast<double>(chars) * size * (bold ? 0.68 : 0.62);
}

void Svg::dashed_outline(double x, double y, double w, double h, const std::string& stroke,
                         const std::string& css_class) {
  body_ += "<rect class=\"" + css_class + "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) +
           "\" height=\"" + num(h) + "\" fill=\"none\" stroke=\"" + stroke +
           "\" stroke-width=\"1.2\" stroke-dasharray=\"3 2\"/>\n";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke) {
  body_ += "<polyline fill=\"none\" stroke=\"" + stroke + "\" stroke-width=\"1.5\" points=\"";
  for (const auto& [x, y] : points) body_ += num(x) + "," + num(y) + " ";
  body_ += "\"/>\n";
}

std::string Svg::str() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width_) +
         "\" height=\"" + num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " + num(height_) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n" + body_ + "</svg>\n";
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string weight_colour(double v) {
  const double t = std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0;
  const auto mix = [t](int from, int to) { return static_cast<int>(std::lround(from + (to - from) * t)); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(0xf7, 0x08), mix(0xfb, 0x30), mix(0xff, 0x6b));
  return buf;
}

double heatmap(Svg& svg, double x, double y, double cell, const Eigen::MatrixXd& values,
               const std::vector<std::vector<std::string>>& labels, const std::vector<std::string>& row_labels,
               const std::vector<std::string>& col_labels, const std::string& title) {
  const double label_w = row_labels.empty() ? 0 : 70, top = 40;
  svg.text(x, y + 14, title, 14, "start", true);
  for (std::size_t j = 0; j < col_labels.size(); ++j)
    svg.text(x + label_w + (static_cast<double>(j) + 0.5) * cell, y + top - 6, col_labels[j], 12, "middle");
  for (Eigen::Index r = 0; r < values.rows(); ++r) {
    const double cy = y + top + static_cast<double>(r) * cell;
    if (static_cast<std::size_t>(r) < row_labels.size())
      svg.text(x + label_w - 8, cy + cell / 2 + 4, row_labels[static_cast<std::size_t>(r)], 12, "end");
    for (Eigen::Index c = 0; c < values.cols(); ++c) {
      const double v = values(r, c), cx = x + label_w + static_cast<double>(c) * cell;
      const std::string text = labels.empty() ? "" : labels[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
      svg.rect(cx, cy, cell, cell, weight_colour(v), "cell", text.empty() ? num(v) : text);
      if (!text.empty() && cell >= 24)
        svg.text(cx + cell / 2, cy + cell / 2 + 4, text, std::min(12.0, cell / 3.5), "middle", false,
                 v > 0.55 ? "#ffffff" : "#111111");
    }
  }
  return top + static_cast<double>(values.rows()) * cell;
}

void spectrum(Svg& svg, double x, double y, double w, double h, const Eigen::VectorXd& values, Eigen::Index cut,
              const std::string& cut_label, const std::string& title) {
  svg.text(x, y + 14, title, 14, "start", true);
  const double top = y + 46, base = y + h, height = base - top;
  const double vmax = values.size() ? std::max(values.maxCoeff(), 1e-300) : 1.0;
  const auto n = static_cast<double>(std::max<Eigen::Index>(values.size(), 1));
  const double step = w / n;
  svg.line(x, base, x + w, base, "#444444");
  svg.text(x - 4, top + 4, num(vmax), 10, "end");
  svg.text(x - 4, base, "0", 10, "end");
  if (values.size() <= 128) {
    for (Eigen::Index i = 0; i < values.size(); ++i) {
      const double bh = height * std::max(values(i), 0.0) / vmax;
      svg.rect(x + static_cast<double>(i) * step + step * 0.15, base - bh, step * 0.7, bh,
               i < cut ? "#08306b" : "#9ecae1", "bar", "sigma_" + std::to_string(i + 1) + " = " + num(values(i)));
      if (values.size() <= 32) svg.text(x + (static_cast<double>(i) + 0.5) * step, base + 12, std::to_string(i + 1), 10, "middle");
    }
  } else {
    std::vector<std::pair<double, double>> pts;
    for (Eigen::Index i = 0; i < values.size(); ++i)
      pts.emplace_back(x + (static_cast<double>(i) + 0.5) * step, base - height * std::max(values(i), 0.0) / vmax);
    svg.polyline(pts, "#08306b");
  }
  const double cx = x + static_cast<double>(cut) * step;
  svg.line(cx, top - 6, cx, base, "#cb181d", 2, true);
  svg.text(cx + 4, top - 8, cut_label, 11, "start", true, "#cb181d");
  svg.text(x + w / 2, base + 26, "index i of the singular value sigma_i (largest first)", 11, "middle");
}

void write_text_file(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << content) || !f.flush()) throw input_error(path + ": cannot write the file");
}

}  // namespace attnrank::cli
