#pragma once
// The pieces of the free-scores certificate (src/reach/certificate.cpp) that the
// embeddings certificate reuses: a certificate for X of full row rank is a free
// certificate with X's fields added, written and checked by the same code.
// Checks throw std::invalid_argument naming what fails; the public checkers turn
// that into a rejected CertificateCheck.

#include <attnrank/reach/certificate.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace attnrank::detail {

/// Indices as 1-based JSON integers, and back (each checked against n).
nlohmann::json one_based(const std::vector<Eigen::Index>& v);
std::vector<Eigen::Index> zero_based(const nlohmann::json& a, Eigen::Index n);

/// A rows x cols double matrix from its JSON rows (throws on a wrong shape).
Eigen::MatrixXd matrix_from_json(const nlohmann::json& rows, Eigen::Index n_rows, Eigen::Index cols);

/// The digest of a certificate: fnv1a_hex of its text without the digest field.
std::string digest_of(nlohmann::json cert);

/// A precision field, within the toolkit's range; the "bits" field of `parent`
/// (absent: `fallback`).
unsigned json_precision(const nlohmann::json& v);
unsigned json_bits(const nlohmann::json& parent, unsigned fallback);

/// The columns of an integer matrix (kernel vectors), each as a list of strings.
nlohmann::json columns_json(const Matrix<Integer>& K);

/// The verdict, n, d_k, floor and witness fields of a free certificate.
void add_free_claims(nlohmann::json& c, const ReachResult& r);

/// The fields a free certificate has (the embeddings certificate of a full-row-
/// rank X adds its own to these).
extern const std::vector<const char*> free_required_fields;
extern const std::vector<const char*> free_optional_fields;

/// The format string, checked before anything else.
void check_format(const nlohmann::json& c);

/// The digest, then the target: the checks before any mathematics.
void check_header(const nlohmann::json& c, const Matrix<Rational>& A);

/// Re-proves rank(log(B) C) >= rows.size() (C centres B's columns): the minor on
/// `rows` x `cols` of B's centered log is nonsingular, in MPFI at max(64, bits)
/// up to size mpfi_limit and in double balls beyond. `what` names the claim in errors.
void check_minor_proof(const Matrix<Rational>& B, const std::vector<Eigen::Index>& rows,
                       const std::vector<Eigen::Index>& cols, unsigned bits, const std::string& what,
                       Eigen::Index mpfi_limit = 200);

/// Re-proves rank(log(B) C) >= B.rows() from the ones row: [log B; 1^T] (B is
/// k x (k + 1), the minor itself) is nonsingular, since rank([L; 1^T]) =
/// rank(L C) + 1; in MPFI at max(64, bits) up to size mpfi_limit, in double balls beyond.
void check_ones_row_minor_proof(const Matrix<Rational>& B, unsigned bits, const std::string& what,
                                Eigen::Index mpfi_limit);

/// Re-proves rank(log(B) C) <= upper from {bases, kernel}: pairwise coprime
/// bases over which B factors exactly, and B.cols() - upper independent integer
/// vectors annihilated by every centered exponent matrix.
void check_kernel_proof(const Matrix<Rational>& B, const nlohmann::json& proof, Eigen::Index upper,
                        const std::string& what);

/// Re-proves every claim of a free certificate (after check_header) with d_k in
/// [1, max_dk].
void check_free_claims(const Matrix<Rational>& A, const nlohmann::json& c, Eigen::Index max_dk);

}  // namespace attnrank::detail
