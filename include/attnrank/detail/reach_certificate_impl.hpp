#pragma once
// Bodies for attnrank/reach_certificate.hpp.

#include <attnrank/parse.hpp>

#include <cstdint>
#include <cstdio>
#include <set>

namespace attnrank {
namespace detail {

using nlohmann::json;

inline json one_based(const std::vector<Eigen::Index>& v) {
  json a = json::array();
  for (Eigen::Index x : v) a.push_back(x + 1);
  return a;
}

inline json matrix_json(const Eigen::MatrixXd& M) {
  json rows = json::array();
  for (Eigen::Index i = 0; i < M.rows(); ++i) {
    json row = json::array();
    for (Eigen::Index j = 0; j < M.cols(); ++j) row.push_back(M(i, j));
    rows.push_back(row);
  }
  return rows;
}

inline json rational_matrix_json(const Matrix<Rational>& M) {
  json rows = json::array();
  for (Eigen::Index i = 0; i < M.rows(); ++i) {
    json row = json::array();
    for (Eigen::Index j = 0; j < M.cols(); ++j) row.push_back(M(i, j).str());
    rows.push_back(row);
  }
  return rows;
}

inline Matrix<Rational> rational_matrix_from_json(const json& rows, Eigen::Index n_rows, Eigen::Index cols) {
  if (!rows.is_array() || static_cast<Eigen::Index>(rows.size()) != n_rows) throw std::invalid_argument("wrong row count");
  Matrix<Rational> M(n_rows, cols);
  for (Eigen::Index i = 0; i < n_rows; ++i) {
    const json& row = rows[static_cast<std::size_t>(i)];
    if (!row.is_array() || static_cast<Eigen::Index>(row.size()) != cols) throw std::invalid_argument("wrong column count");
    for (Eigen::Index j = 0; j < cols; ++j) M(i, j) = parse_rational(row[static_cast<std::size_t>(j)].get<std::string>());
  }
  return M;
}

/// A JSON array of rows of numbers as a double matrix with `cols` columns.
inline Eigen::MatrixXd matrix_from_json(const json& rows, Eigen::Index n_rows, Eigen::Index cols) {
  if (!rows.is_array() || static_cast<Eigen::Index>(rows.size()) != n_rows) throw std::invalid_argument("wrong row count");
  Eigen::MatrixXd M(n_rows, cols);
  for (Eigen::Index i = 0; i < n_rows; ++i) {
    const json& row = rows[static_cast<std::size_t>(i)];
    if (!row.is_array() || static_cast<Eigen::Index>(row.size()) != cols) throw std::invalid_argument("wrong column count");
    for (Eigen::Index j = 0; j < cols; ++j) M(i, j) = row[static_cast<std::size_t>(j)].get<double>();
  }
  return M;
}

inline std::string digest_of(json cert) {
  cert.erase("digest");
  return fnv1a_hex(cert.dump());
}

/// An integer field of a certificate. nlohmann's get<long> of a non-integer
/// number casts it (2.3e125 to long is undefined behaviour: fuzz_certificate), so
/// anything but a JSON integer is rejected here first.
inline std::int64_t json_integer(const json& v) {
  if (!v.is_number_integer()) throw std::invalid_argument("expected an integer, got " + v.dump());
  return v.get<std::int64_t>();
}

/// A precision field of a certificate (absent: `fallback`), within the toolkit's range.
inline unsigned json_bits(const json& parent, unsigned fallback) {
  if (!parent.contains("bits")) return fallback;
  const std::int64_t bits = json_integer(parent.at("bits"));
  if (bits < std::int64_t{min_precision_bits} || bits > std::int64_t{max_precision_bits})
    throw std::invalid_argument("a precision is out of range");
  return static_cast<unsigned>(bits);
}

inline std::vector<Eigen::Index> zero_based(const json& a, Eigen::Index n) {
  std::vector<Eigen::Index> v;
  std::set<Eigen::Index> seen;
  for (const json& x : a) {
    const auto one_based = json_integer(x);  // checked before - 1: it may be INT64_MIN
    if (one_based < 1 || one_based > n) throw std::invalid_argument("bad index");
    const Eigen::Index i = one_based - 1;
    if (!seen.insert(i).second) throw std::invalid_argument("bad index");
    v.push_back(i);
  }
  return v;
}

}  // namespace detail

inline std::string fnv1a_hex(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

inline std::string target_fingerprint(const Matrix<Rational>& A) {
  std::string s = std::to_string(A.rows()) + "x" + std::to_string(A.cols()) + ":";
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) s += A(i, j).str() + ",";
  return fnv1a_hex(s);
}

inline nlohmann::json make_reach_certificate(const Matrix<Rational>& A, const ReachResult& r) {
  using detail::json;
  json c{{"format", reach_certificate_format},
         {"target_fingerprint", target_fingerprint(A)},
         {"n", r.n},
         {"dk", r.dk},
         {"verdict", to_string(r.verdict)}};
  if (r.has_zero_entry) {
    c["zero_entry"] = {r.zeros[0].first + 1, r.zeros[0].second + 1};
  } else {
    c["floor_lower"] = r.floor.lower;
    c["floor_upper"] = r.floor.upper;
    c["lower_proof"] = {{"minor_rows", detail::one_based(r.floor.minor_rows)},
                        {"minor_cols", detail::one_based(r.floor.minor_cols)},
                        {"bits", r.floor.lower_bits}};
    json up{{"reason", r.floor.upper_reason}};
    if (r.floor.upper < std::max<Eigen::Index>(r.n - 1, 0)) {
      json bases = json::array();
      for (const Integer& b : r.floor.bases) bases.push_back(b.str());
      json kernel = json::array();
      for (Eigen::Index j = 0; j < r.floor.kernel.cols(); ++j) {
        json col = json::array();
        for (Eigen::Index i = 0; i < r.floor.kernel.rows(); ++i) col.push_back(r.floor.kernel(i, j).str());
        kernel.push_back(col);
      }
      up["bases"] = bases;
      up["kernel"] = kernel;
    }
    c["upper_proof"] = up;
  }
  if (r.witness) {
    const Witness& w = *r.witness;
    if (w.Q_exact.size() > 0)  // an MPFR witness: its exact values, as "p/q" strings
      c["witness"] = {{"Q", detail::rational_matrix_json(w.Q_exact)},
                      {"K", detail::rational_matrix_json(w.K_exact)},
                      {"bits", w.bits},
                      {"max_abs_error", w.max_abs_error}};
    else
      c["witness"] = {{"Q", detail::matrix_json(w.Q)}, {"K", detail::matrix_json(w.K)}, {"max_abs_error", w.max_abs_error}};
  }
  c["digest"] = detail::digest_of(c);
  return c;
}

inline CertificateCheck check_reach_certificate(const Matrix<Rational>& A, const nlohmann::json& c) {
  using detail::json;
  using Eigen::Index;
  const auto reject = [](std::string why) { return CertificateCheck{false, std::move(why)}; };
  try {
    if (!c.is_object() || c.value("format", "") != reach_certificate_format) return reject("not an attnrank reach certificate");
    if (c.value("question", "free") == "embeddings")
      return reject("this certificate is for fixed embeddings: check it with the same X (--x)");
    if (c.value("digest", "") != detail::digest_of(c)) return reject("the digest does not match: the certificate was changed");
    if (c.at("target_fingerprint").get<std::string>() != target_fingerprint(A))
      return reject("the certificate is for a different target");
    validate_target(A, "target");
    const Index n = A.rows();
    const Index dk = detail::json_integer(c.at("dk"));
    const std::string verdict = c.at("verdict").get<std::string>();
    if (detail::json_integer(c.at("n")) != n || dk < 1 || dk > n) return reject("n or d_k do not fit the target");

    if (c.contains("zero_entry")) {
      const json& z = c.at("zero_entry");
      if (!z.is_array() || z.size() != 2) return reject("zero_entry must be [row, column]");
      const Index row = detail::json_integer(z.at(0)), column = detail::json_integer(z.at(1));
      if (row < 1 || column < 1 || row > n || column > n || A(row - 1, column - 1) != 0)
        return reject("the claimed zero entry is not zero");
      if (verdict != "unreachable") return reject("a zero entry makes the target unreachable");
    } else {
      const Index lower = detail::json_integer(c.at("floor_lower")), upper = detail::json_integer(c.at("floor_upper"));
      if (lower < 0 || upper > std::max<Index>(n - 1, 0) || lower > upper) return reject("floor bounds out of order");
      // floor >= lower: the minor, re-proven in MPFI from the target (or, for big
      // minors, in double balls).
      const json& lp = c.at("lower_proof");
      const std::vector<Index> rows = detail::zero_based(lp.at("minor_rows"), n), cols = detail::zero_based(lp.at("minor_cols"), n);
      if (static_cast<Index>(rows.size()) != lower || static_cast<Index>(cols.size()) != lower)
        return reject("the minor's size is not floor_lower");
      if (lower > 0) {
        bool proven = false;
        if (lower <= 200) {
          const PrecisionScope scope(std::max(64u, detail::json_bits(lp, 53u)));
          proven = certify_nonsingular_minor(centered_log(A), rows, cols).has_value();
        } else {
          std::vector<Index> all = detail::iota_indices(n);
          Matrix<Rational> sub(static_cast<Index>(rows.size()), n);
          for (std::size_t t = 0; t < rows.size(); ++t) sub.row(static_cast<Index>(t)) = A.row(rows[t]);
          std::vector<Index> local = detail::iota_indices(lower);
          proven = certify_nonsingular_minor(centered_log_ball(sub), local, cols).has_value();
        }
        if (!proven) return reject("the minor behind floor_lower could not be proven nonsingular");
      }
      // floor <= upper: exact kernel over the bases.
      if (upper < std::max<Index>(n - 1, 0)) {
        const json& up = c.at("upper_proof");
        std::vector<Integer> bases;
        for (const json& b : up.at("bases")) bases.emplace_back(b.get<std::string>());
        for (std::size_t s = 0; s < bases.size(); ++s) {
          if (bases[s] <= 1) return reject("a base is not > 1");
          for (std::size_t t = s + 1; t < bases.size(); ++t)
            if (gcd(bases[s], bases[t]) != 1) return reject("the bases are not pairwise coprime");
        }
        LogDecomposition d{bases, std::vector<Matrix<Integer>>(bases.size(), Matrix<Integer>::Zero(n, n))};
        for (Index i = 0; i < n; ++i)
          for (Index j = 0; j < n; ++j) {
            const auto e_up = exponents_over(numerator(A(i, j)), bases), e_down = exponents_over(denominator(A(i, j)), bases);
            if (!e_up || !e_down) return reject("an entry of the target does not factor over the bases");
            for (std::size_t t = 0; t < bases.size(); ++t) d.exponents[t](i, j) = (*e_up)[t] - (*e_down)[t];
          }
        const json& kj = up.at("kernel");
        const Index k = static_cast<Index>(kj.size());
        Matrix<Integer> K(n, k);
        for (Index j = 0; j < k; ++j) {
          if (static_cast<Index>(kj[static_cast<std::size_t>(j)].size()) != n) return reject("a kernel vector has the wrong length");
          for (Index i = 0; i < n; ++i) K(i, j) = Integer(kj[static_cast<std::size_t>(j)][static_cast<std::size_t>(i)].get<std::string>());
        }
        if (n - k != upper) return reject("floor_upper is not n minus the number of kernel vectors");
        const Matrix<Integer> S = stacked_centered_exponents(d);
        const Matrix<Integer> SK = S * K;
        for (Index i = 0; i < SK.rows(); ++i)
          for (Index j = 0; j < SK.cols(); ++j)
            if (SK(i, j) != 0) return reject("a kernel vector is not annihilated by every E_t C");
        if (bareiss_rank(K.unaryExpr([](const Integer& z) { return Rational(z); })).rank != k)
          return reject("the kernel vectors are not independent");
      }
      if (verdict == "unreachable" && !(dk < lower)) return reject("unreachable needs d_k < floor_lower");
      if (verdict == "reachable" && !(upper <= dk)) return reject("reachable needs floor_upper <= d_k");
      if (verdict == "undecided" && !(lower <= dk && dk < upper)) return reject("undecided, yet the bounds decide");
      if (verdict != "unreachable" && verdict != "reachable" && verdict != "undecided") return reject("unknown verdict");
    }
    if (c.contains("witness")) {
      const json& w = c["witness"];
      const Index wk = w.at("Q").empty() ? 0 : static_cast<Index>(w.at("Q")[0].size());
      if (wk != dk) return reject("the witness width is not d_k");
      const double stated = w.at("max_abs_error").get<double>();
      double recomputed = INFINITY;
      if (w.contains("bits")) {
        const Matrix<Rational> Q = detail::rational_matrix_from_json(w.at("Q"), n, wk), K = detail::rational_matrix_from_json(w.at("K"), n, wk);
        recomputed = certified_witness_error(A, Q, K, detail::json_bits(w, 53u));
      } else {
        const Eigen::MatrixXd Q = detail::matrix_from_json(w.at("Q"), n, wk), K = detail::matrix_from_json(w.at("K"), n, wk);
        recomputed = certified_witness_error(A, Q, K, 64);
      }
      if (!(recomputed <= stated)) return reject("the witness misses its stated error bound");
    }
  } catch (const std::exception& e) {
    return reject(std::string("malformed certificate: ") + e.what());
  }
  return CertificateCheck{true, "verified: floor bounds, verdict and witness error re-proven from the target"};
}

}  // namespace attnrank
