// Writing and checking free-scores certificates (attnrank/reach/certificate.hpp).
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/detail/approximate_certificate.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>

#include <attnrank/io/detail/json_fields.hpp>
#include <attnrank/io/json.hpp>
#include <attnrank/io/parse.hpp>

#include <cstdint>
#include <cstdio>
#include <set>

namespace attnrank {
namespace detail {

using nlohmann::json;

json one_based(const std::vector<Eigen::Index>& v) {
  json a = json::array();
  for (Eigen::Index x : v) a.push_back(x + 1);
  return a;
}

Matrix<Rational> rational_matrix_from_json(const json& rows, Eigen::Index n_rows, Eigen::Index cols) {
  if (!rows.is_array() || static_cast<Eigen::Index>(rows.size()) != n_rows) throw std::invalid_argument("wrong row count");
  Matrix<Rational> M(n_rows, cols);
  for (Eigen::Index i = 0; i < n_rows; ++i) {
    const json& row = rows[static_cast<std::size_t>(i)];
    if (!row.is_array() || static_cast<Eigen::Index>(row.size()) != cols) throw std::invalid_argument("wrong column count");
    for (Eigen::Index j = 0; j < cols; ++j) M(i, j) = parse_rational(json_string(row[static_cast<std::size_t>(j)], "a matrix entry"));
  }
  return M;
}

/// A JSON array of rows of numbers as a double matrix with `cols` columns.
Eigen::MatrixXd matrix_from_json(const json& rows, Eigen::Index n_rows, Eigen::Index cols) {
  if (!rows.is_array() || static_cast<Eigen::Index>(rows.size()) != n_rows) throw std::invalid_argument("wrong row count");
  Eigen::MatrixXd M(n_rows, cols);
  for (Eigen::Index i = 0; i < n_rows; ++i) {
    const json& row = rows[static_cast<std::size_t>(i)];
    if (!row.is_array() || static_cast<Eigen::Index>(row.size()) != cols) throw std::invalid_argument("wrong column count");
    for (Eigen::Index j = 0; j < cols; ++j) {
      const json& x = row[static_cast<std::size_t>(j)];
      if (!x.is_number()) throw std::invalid_argument("a matrix entry is not a number: " + x.dump());
      M(i, j) = x.get<double>();
    }
  }
  return M;
}

std::string digest_of(json cert) {
  cert.erase("digest");
  return fnv1a_hex(cert.dump());
}

/// A precision field of a certificate, within the toolkit's range.
unsigned json_precision(const json& v) {
  const std::int64_t bits = json_integer(v);
  if (bits < std::int64_t{min_precision_bits} || bits > std::int64_t{max_precision_bits})
    throw std::invalid_argument("a precision is out of range");
  return static_cast<unsigned>(bits);
}

/// The "bits" field of `parent` (absent: `fallback`).
unsigned json_bits(const json& parent, unsigned fallback) {
  return parent.contains("bits") ? json_precision(parent.at("bits")) : fallback;
}

std::vector<Eigen::Index> zero_based(const json& a, Eigen::Index n) {
  if (!a.is_array()) throw std::invalid_argument("a list of indices is not an array");
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

nlohmann::json parse_certificate(const std::string& text, const std::string& source) {
  using nlohmann::json;
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t track = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    else if (event == json::parse_event_t::object_end) open_objects.pop_back();
    else if (event == json::parse_event_t::key && !open_objects.empty() &&
             !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json c;
  try {
    c = json::parse(text, track);
  } catch (const json::parse_error& e) {
    throw input_error(source + ": not valid JSON (" + std::string(e.what()) + ")");
  } catch (const json::exception& e) {  // out_of_range.406: a number that overflows a double
    throw input_error(source + ": not a certificate: " + std::string(e.what()));
  }
  if (!duplicate.empty())
    throw input_error(source + ": not a certificate: the key \"" + duplicate +
                      "\" appears twice in one object (which value counts would be a guess)");
  return c;
}

std::string fnv1a_hex(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string target_fingerprint(const Matrix<Rational>& A) {
  std::string s = std::to_string(A.rows()) + "x" + std::to_string(A.cols()) + ":";
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) s += A(i, j).str() + ",";
  return fnv1a_hex(s);
}

namespace detail {

/// The columns of an integer matrix (kernel vectors), each as a list of strings.
json columns_json(const Matrix<Integer>& K) {
  json columns = json::array();
  for (Eigen::Index j = 0; j < K.cols(); ++j) {
    json col = json::array();
    for (Eigen::Index i = 0; i < K.rows(); ++i) col.push_back(K(i, j).str());
    columns.push_back(col);
  }
  return columns;
}

/// The witness as certificate data: its entries (doubles, or the exact rationals
/// of an MPFR witness) and the bound computed for exactly those entries, with the
/// precision it was computed at so that a checker can recompute the same bound.
json witness_json(const Witness& w) {
  const bool exact = w.Q_exact.size() > 0;
  return json{{"entries", exact ? "rational" : "double"},
              {"Q", exact ? rational_matrix_json(w.Q_exact) : matrix_json(w.Q)},
              {"K", exact ? rational_matrix_json(w.K_exact) : matrix_json(w.K)},
              {"error_bits", w.error_bits},
              {"max_abs_error", w.max_abs_error}};
}

/// The verdict, n, d_k, floor and witness fields of a free certificate.
void add_free_claims(json& c, const ReachResult& r) {
  c["n"] = r.n;
  c["dk"] = r.dk;
  c["verdict"] = to_string(r.verdict);
  if (r.has_zero_entry) {
    c["zero_entry"] = {r.zeros[0].first + 1, r.zeros[0].second + 1};
  } else {
    c["floor_lower"] = r.floor.lower;
    c["floor_upper"] = r.floor.upper;
    c["lower_proof"] = {{"minor_rows", one_based(r.floor.minor_rows)},
                        {"minor_cols", one_based(r.floor.minor_cols)},
                        {"bits", r.floor.lower_bits}};
    json up = json::object();
    if (r.floor.upper < std::max<Eigen::Index>(r.n - 1, 0)) {
      json bases = json::array();
      for (const Integer& b : r.floor.bases) bases.push_back(b.str());
      up["bases"] = bases;
      up["kernel"] = columns_json(r.floor.kernel);
    }
    c["upper_proof"] = up;
  }
  // A witness whose error could not be bounded proves nothing: it is left out.
  if (r.witness && std::isfinite(r.witness->max_abs_error)) c["witness"] = witness_json(*r.witness);
}

/// The fields a free certificate has (the embeddings certificate of a full-row-
/// rank X adds its own to these).
const std::vector<const char*> free_required_fields = {"format", "question", "target_fingerprint", "n", "dk", "verdict", "digest"};
const std::vector<const char*> free_optional_fields = {"zero_entry", "floor_lower", "floor_upper", "lower_proof", "upper_proof", "witness", "approximate"};

/// The format string, checked before anything else: an older format gets a
/// message that says so rather than a list of fields it lacks.
void check_format(const json& c) {
  if (!c.is_object() || !c.contains("format")) throw std::invalid_argument("not an attnrank reach certificate");
  const std::string format = json_string(c.at("format"), "format");
  if (format == "attnrank-reach-certificate/2") {  // /3 without the approximate bounds
    if (c.contains("approximate")) throw std::invalid_argument("a certificate of format /2 has no \"approximate\" field");
    return;
  }
  if (format != reach_certificate_format)
    throw std::invalid_argument("format \"" + format + "\" is not " + reach_certificate_format +
                                (format == "attnrank-reach-certificate/1" ? " (written by an earlier attnrank: ask reach for the certificate again)" : ""));
}

/// The digest, then the target: the checks before any mathematics (after
/// check_format and the field list).
void check_header(const json& c, const Matrix<Rational>& A) {
  if (json_string(c.at("digest"), "digest") != digest_of(c))
    throw std::invalid_argument("the digest does not match: the certificate was changed");
  if (json_string(c.at("target_fingerprint"), "target_fingerprint") != target_fingerprint(A))
    throw std::invalid_argument("the certificate is for a different target");
  validate_target(A, "target");
  if (json_integer(c.at("n")) != A.rows())
    throw std::invalid_argument("n = " + c.at("n").dump() + " is not the target's size " + std::to_string(A.rows()));
}

/// Re-proves rank(log(B) C) >= rows.size(): the minor of B's centered log
/// (centred over all of B's columns) on `rows` x `cols` is nonsingular, in MPFI
/// at max(64, bits) up to size mpfi_limit, in double balls beyond. `what` names the claim.
void check_minor_proof(const Matrix<Rational>& B, const std::vector<Eigen::Index>& rows,
                       const std::vector<Eigen::Index>& cols, unsigned bits, const std::string& what,
                       Eigen::Index mpfi_limit) {
  using Eigen::Index;
  const Index size = static_cast<Index>(rows.size());
  if (static_cast<Index>(cols.size()) != size) throw std::invalid_argument("the minor behind " + what + " is not square");
  if (size == 0) return;
  Matrix<Rational> sub(size, B.cols());  // log(B) C row by row: the minor's rows suffice
  for (Index t = 0; t < size; ++t) sub.row(t) = B.row(rows[static_cast<std::size_t>(t)]);
  bool proven = false;
  if (size <= mpfi_limit) {
    const PrecisionScope scope(std::max(64u, bits));
    proven = certify_nonsingular_minor(centered_log(sub), iota_indices(size), cols).has_value();
  } else {
    proven = certify_nonsingular_minor(certified_centered_log_ball(sub), iota_indices(size), cols).has_value();
  }
  if (!proven) throw std::invalid_argument("the minor behind " + what + " could not be proven nonsingular");
}

void check_ones_row_minor_proof(const Matrix<Rational>& B, unsigned bits, const std::string& what,
                                Eigen::Index mpfi_limit) {
  using Eigen::Index;
  const Index size = B.rows() + 1;
  if (B.cols() != size) throw std::invalid_argument("the minor behind " + what + " does not have one more column than rows");
  const std::vector<Index> all = iota_indices(size);
  bool proven = false;
  if (size <= mpfi_limit) {
    const PrecisionScope scope(std::max(64u, bits));
    Matrix<Interval> M(size, size);
    for (Index j = 0; j < size; ++j) {
      M(0, j) = 1;
      for (Index i = 1; i < size; ++i) M(i, j) = log(scalar_traits<Interval>::from_rational(B(i - 1, j)));
    }
    proven = certify_nonsingular_minor(M, all, all).has_value();
  } else {
    const BoundsMatrix logs = certified_log_bounds(B);
    BoundsMatrix with_ones{Eigen::MatrixXd::Ones(size, size), Eigen::MatrixXd::Ones(size, size)};
    with_ones.lo.bottomRows(size - 1) = logs.lo;
    with_ones.hi.bottomRows(size - 1) = logs.hi;
    proven = certify_nonsingular_minor(to_ball(with_ones), all, all).has_value();
  }
  if (!proven) throw std::invalid_argument("the minor behind " + what + " could not be proven nonsingular");
}

/// Re-proves rank(log(B) C) <= upper from an exact-kernel proof {bases, kernel}:
/// pairwise coprime bases > 1 over which every entry of B factors, and
/// B.cols() - upper independent integer vectors annihilated by every E_t C.
void check_kernel_proof(const Matrix<Rational>& B, const json& up, Eigen::Index upper, const std::string& what) {
  using Eigen::Index;
  const Index m = B.cols();
  require_fields(up, {"bases", "kernel"}, {}, what + " proof");
  if (!up.at("bases").is_array() || !up.at("kernel").is_array())
    throw std::invalid_argument(what + " proof: bases and kernel must be arrays");
  std::vector<Integer> bases;
  for (const json& b : up.at("bases")) bases.emplace_back(json_string(b, "a base"));
  for (std::size_t s = 0; s < bases.size(); ++s) {
    if (bases[s] <= 1) throw std::invalid_argument("a base is not > 1");
    for (std::size_t t = s + 1; t < bases.size(); ++t)
      if (gcd(bases[s], bases[t]) != 1) throw std::invalid_argument("the bases are not pairwise coprime");
  }
  LogDecomposition d{bases, std::vector<Matrix<Integer>>(bases.size(), Matrix<Integer>::Zero(B.rows(), m))};
  for (Index i = 0; i < B.rows(); ++i)
    for (Index j = 0; j < m; ++j) {
      const auto e_up = exponents_over(numerator(B(i, j)), bases), e_down = exponents_over(denominator(B(i, j)), bases);
      if (!e_up || !e_down) throw std::invalid_argument("an entry of the target does not factor over the bases");
      for (std::size_t t = 0; t < bases.size(); ++t) d.exponents[t](i, j) = (*e_up)[t] - (*e_down)[t];
    }
  const json& kj = up.at("kernel");
  const Index k = static_cast<Index>(kj.size());
  if (m - k != upper) throw std::invalid_argument(what + " is not the column count minus the number of kernel vectors");
  Matrix<Integer> K(m, k);
  for (Index j = 0; j < k; ++j) {
    const json& col = kj[static_cast<std::size_t>(j)];
    if (!col.is_array() || static_cast<Index>(col.size()) != m) throw std::invalid_argument("a kernel vector has the wrong length");
    for (Index i = 0; i < m; ++i) K(i, j) = Integer(json_string(col[static_cast<std::size_t>(i)], "a kernel entry"));
  }
  if (!bases.empty()) {  // with no bases every entry is 1 and log(B) = 0 annihilates every vector
    const Matrix<Integer> SK = stacked_centered_exponents(d) * K;
    for (Index i = 0; i < SK.rows(); ++i)
      for (Index j = 0; j < SK.cols(); ++j)
        if (SK(i, j) != 0) throw std::invalid_argument("a kernel vector is not annihilated by every E_t C");
  }
  if (exact_rank_by_elimination(K.unaryExpr([](const Integer& z) { return Rational(z); })).rank != k)
    throw std::invalid_argument("the kernel vectors are not independent");
}

/// Re-proves every claim of a free certificate (after check_header): d_k in
/// [1, max_dk], the verdict, the zero entry or the floor bounds with their proofs,
/// and the witness's error. Throws std::invalid_argument naming what fails.
void check_free_claims(const Matrix<Rational>& A, const json& c, Eigen::Index max_dk) {
  using Eigen::Index;
  const Index n = A.rows();
  const Index dk = json_integer(c.at("dk"));
  if (dk < 1 || dk > max_dk)
    throw std::invalid_argument("d_k = " + std::to_string(dk) + " is outside [1, " + std::to_string(max_dk) + "]");
  const std::string verdict = json_choice(c.at("verdict"), {"reachable", "unreachable", "undecided"}, "verdict");
  if (c.contains("zero_entry")) {
    for (const char* k : {"floor_lower", "floor_upper", "lower_proof", "upper_proof"})
      if (c.contains(k)) throw std::invalid_argument(std::string("a zero-entry certificate has no field \"") + k + "\"");
    const json& z = c.at("zero_entry");
    if (!z.is_array() || z.size() != 2) throw std::invalid_argument("zero_entry must be [row, column]");
    const Index row = json_integer(z.at(0)), column = json_integer(z.at(1));
    if (row < 1 || column < 1 || row > n || column > n || A(row - 1, column - 1) != 0)
      throw std::invalid_argument("the claimed zero entry is not zero");
    if (verdict != "unreachable") throw std::invalid_argument("a zero entry makes the target unreachable");
  } else {
    for (const char* k : {"floor_lower", "floor_upper", "lower_proof", "upper_proof"})
      if (!c.contains(k)) throw std::invalid_argument(std::string("the certificate has no field \"") + k + "\"");
    const Index lower = json_integer(c.at("floor_lower")), upper = json_integer(c.at("floor_upper"));
    const Index most = std::max<Index>(n - 1, 0);
    if (lower < 0 || upper > most || lower > upper) throw std::invalid_argument("floor bounds out of order");
    // floor >= lower: the minor, re-proven in MPFI from the target (or, for big
    // minors, in double balls).
    const json& lp = c.at("lower_proof");
    require_fields(lp, {"minor_rows", "minor_cols", "bits"}, {}, "lower_proof");
    const std::vector<Index> rows = zero_based(lp.at("minor_rows"), n), cols = zero_based(lp.at("minor_cols"), n);
    if (static_cast<Index>(rows.size()) != lower || static_cast<Index>(cols.size()) != lower)
      throw std::invalid_argument("the minor's size is not floor_lower");
    check_minor_proof(A, rows, cols, json_bits(lp, 53u), "floor_lower");
    // floor <= upper: exact kernel over the bases (nothing to prove at n - 1).
    const json& up = c.at("upper_proof");
    if (upper == most) {
      require_fields(up, {}, {}, "upper_proof (floor_upper = n - 1 needs no proof)");
    } else {
      check_kernel_proof(A, up, upper, "floor_upper");
    }
    if (verdict == "unreachable" && !(dk < lower)) throw std::invalid_argument("unreachable needs d_k < floor_lower");
    if (verdict == "reachable" && !(upper <= dk)) throw std::invalid_argument("reachable needs floor_upper <= d_k");
    if (verdict == "undecided" && !(lower <= dk && dk < upper)) throw std::invalid_argument("undecided, yet the bounds decide");
  }
  if (c.contains("witness")) {
    const json& w = c.at("witness");
    require_fields(w, {"entries", "Q", "K", "error_bits", "max_abs_error"}, {}, "witness");
    const bool exact = json_choice(w.at("entries"), {"double", "rational"}, "witness entries") == "rational";
    const unsigned bits = json_precision(w.at("error_bits"));
    const double stated = json_bound(w.at("max_abs_error"), "witness max_abs_error");
    if (exact) {
      const double recomputed =
          certified_witness_error(A, rational_matrix_from_json(w.at("Q"), n, dk), rational_matrix_from_json(w.at("K"), n, dk), bits);
      if (!(recomputed <= stated))
        throw std::invalid_argument("the witness misses its stated error bound (recomputed " + std::to_string(recomputed) + ")");
    } else {
      const Eigen::MatrixXd Q = matrix_from_json(w.at("Q"), n, dk), K = matrix_from_json(w.at("K"), n, dk);
      if (!witness_error_within(A, Q, K, bits, stated))
        throw std::invalid_argument("the witness misses its stated error bound (recomputed " +
                                    std::to_string(certified_witness_error(A, Q, K, std::max(bits, 64u))) + ")");
    }
  }
}

}  // namespace detail

nlohmann::json make_reach_certificate(const Matrix<Rational>& A, const ReachResult& r, const ApproxBounds* approx,
                                      std::optional<double> epsilon) {
  detail::json c{{"format", reach_certificate_format}, {"question", "free"}, {"target_fingerprint", target_fingerprint(A)}};
  detail::add_free_claims(c, r);
  if (approx) {
    if (approx->dk != r.dk) throw std::invalid_argument("make_reach_certificate: the approximate bounds are for another d_k");
    c["approximate"] = detail::approximate_claims(*approx, epsilon);
  }
  c["digest"] = detail::digest_of(c);
  return c;
}

CertificateCheck check_reach_certificate(const Matrix<Rational>& A, const nlohmann::json& c) {
  const auto reject = [](std::string why) { return CertificateCheck{false, std::move(why)}; };
  try {
    detail::check_format(c);
    if (c.contains("question") && c.at("question") == "embeddings")
      return reject("this certificate is for fixed embeddings: check it with the same embeddings X");
    if (c.contains("question") && (c.at("question") == "masked" || c.at("question") == "masked_embeddings"))
      return reject("this certificate is for a masked head (mask " + (c.contains("mask") ? c.at("mask").dump() : std::string("?")) +
                    "): check it with the same mask");
    detail::require_fields(c, detail::free_required_fields, detail::free_optional_fields, "the certificate");
    if (detail::json_string(c.at("question"), "question") != "free") return reject("question must be \"free\"");
    detail::check_header(c, A);
    detail::check_free_claims(A, c, A.rows());
    if (c.contains("approximate")) {
      detail::check_approximate_claims(A, nullptr, detail::json_integer(c.at("dk")), c.at("approximate"));
      return CertificateCheck{true, "verified: floor bounds, verdict, witness error and the approximate bounds re-proven from the target"};
    }
  } catch (const std::exception& e) {
    return reject(e.what());
  }
  return CertificateCheck{true, "verified: floor bounds, verdict and witness error re-proven from the target"};
}

}  // namespace attnrank
