#pragma once
// The Eigen decompositions the library runs (SVD, QR, LU, LDLT, symmetric
// eigensolver), declared as explicit instantiations: each is compiled once, in
// src/linalg/dense_decompositions.cpp, instead of in every unit that uses it.
// The SVDs alone were most of the library's compile time (three units took 45 to
// 85 s each under ThreadSanitizer); the decompositions themselves are Eigen's,
// unchanged. Include this header instead of <Eigen/SVD> and friends.

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/LU>
#include <Eigen/QR>
#include <Eigen/SVD>

// Doubles: the numeric rank, the SVD behind certified singular values, witness
// fitting, the certified minor's approximate inverse.
extern template class Eigen::BDCSVD<Eigen::MatrixXd>;
extern template class Eigen::JacobiSVD<Eigen::MatrixXd>;
extern template class Eigen::HouseholderQR<Eigen::MatrixXd>;
extern template class Eigen::ColPivHouseholderQR<Eigen::MatrixXd>;
extern template class Eigen::CompleteOrthogonalDecomposition<Eigen::MatrixXd>;  // pseudo-inverses
extern template class Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>;
extern template class Eigen::PartialPivLU<Eigen::MatrixXd>;
extern template class Eigen::FullPivLU<Eigen::MatrixXd>;
extern template class Eigen::LDLT<Eigen::MatrixXd>;
