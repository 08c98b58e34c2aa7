// The one unit that compiles the library's Eigen decompositions
// (attnrank/linalg/detail/dense_decompositions.hpp says why).
#include <attnrank/linalg/detail/dense_decompositions.hpp>

template class Eigen::BDCSVD<Eigen::MatrixXd>;
template class Eigen::JacobiSVD<Eigen::MatrixXd>;
template class Eigen::HouseholderQR<Eigen::MatrixXd>;
template class Eigen::ColPivHouseholderQR<Eigen::MatrixXd>;
template class Eigen::CompleteOrthogonalDecomposition<Eigen::MatrixXd>;
template class Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>;
template class Eigen::PartialPivLU<Eigen::MatrixXd>;
template class Eigen::FullPivLU<Eigen::MatrixXd>;
template class Eigen::LDLT<Eigen::MatrixXd>;
