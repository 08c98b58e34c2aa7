// Checking a certificate someone else produced: the checker re-proves the floor
// bounds, the verdict and the witness error from the target alone, trusting
// nothing in the file but its claims. Usage: check_certificate TARGET.csv CERT.json
#include <attnrank/io/parse.hpp>
#include <attnrank/reach/certificate.hpp>

#include <iostream>

int main(int argc, char** argv) {
  using namespace attnrank;
  if (argc != 3) {
    std::cerr << "usage: check_certificate TARGET.csv CERTIFICATE.json\n";
    return 2;
  }
  try {
    const Matrix<Rational> A = read_matrix(argv[1]);
    // The strict reader: a key stated twice or a number beyond double is refused.
    const nlohmann::json certificate = parse_certificate(read_text_file(argv[2]), argv[2]);
    std::cout << "claim: " << certificate.value("verdict", "?") << " at d_k = " << certificate.value("dk", 0) << "\n";
    const CertificateCheck check = check_reach_certificate(A, certificate);
    std::cout << (check.valid ? "valid: " : "rejected: ") << check.reason << "\n";

    // Tamper with the claim and check again: the checker must refuse it.
    nlohmann::json forged = certificate;
    forged["dk"] = certificate.value("dk", 1) > 1 ? certificate.value("dk", 1) - 1 : 2;
    const CertificateCheck forged_check = check_reach_certificate(A, forged);
    std::cout << "forged d_k = " << forged["dk"] << ": " << (forged_check.valid ? "ACCEPTED (bug)" : "rejected: ")
              << forged_check.reason << "\n";
    return check.valid ? 0 : 1;
  } catch (const input_error& e) {
    std::cerr << "check_certificate: " << e.what() << "\n";
    return 2;
  } catch (const nlohmann::json::exception& e) {
    std::cerr << "check_certificate: " << argv[2] << " is not a certificate (" << e.what() << ")\n";
    return 2;
  }
}
