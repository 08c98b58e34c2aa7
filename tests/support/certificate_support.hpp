#pragma once
// Tampering with certificates: every variant of a certificate that its checker
// must reject (fields removed, unknown fields added, determined values changed),
// each re-stamped with a valid digest so that only the checker's own validation
// and mathematics can reject it. Shared by the free, embeddings and masked
// certificate tests.

#include "support.hpp"

#include <attnrank/io/json.hpp>
#include <attnrank/reach/detail/certificate_parts.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace attnrank::test {

using nlohmann::json;

inline json redigest(json c) {
  c["digest"] = detail::digest_of(c);
  return c;
}

/// Every variant of `c` that must be rejected: each required field removed, an
/// unknown field added to each object, and each determined value changed. The
/// digest is re-stamped on all of them, so only the checker's own validation
/// and mathematics can reject them.
inline std::vector<std::pair<std::string, json>> tampered(const json& c, Eigen::Index n) {
  std::vector<std::pair<std::string, json>> out;
  std::function<void(const json&, const json::json_pointer&)> walk = [&](const json& node, const json::json_pointer& at) {
    if (!node.is_object()) return;
    json added = c;
    added[at / "surplus"] = 1;
    out.emplace_back("unknown field in " + at.to_string(), redigest(added));
    for (const auto& item : node.items()) {
      const json::json_pointer p = at / item.key();
      const bool optional = at.empty() && (item.key() == "witness" || item.key() == "weights" || item.key() == "approximate");
      if (item.key() != "digest" && !optional) {
        json removed = c;
        removed[p.parent_pointer()].erase(item.key());
        out.emplace_back("removed " + p.to_string(), redigest(removed));
      }
      walk(item.value(), p);
    }
  };
  walk(c, json::json_pointer());
  const auto set = [&](const std::string& why, const std::string& key, json value) {
    if (!c.contains(key)) return;
    json t = c;
    t[key] = std::move(value);
    out.emplace_back(why, redigest(t));
  };
  set("format changed", "format", "something-else/9");
  set("format of version 1", "format", "attnrank-reach-certificate/1");
  set("question changed", "question", c.value("question", "") == "free" ? "embeddings" : "free");
  set("target fingerprint changed", "target_fingerprint", "0000000000000000");
  set("X fingerprint changed", "x_fingerprint", "0000000000000000");
  set("n one more", "n", n + 1);
  set("n one less", "n", n - 1);
  set("n as a string", "n", std::to_string(n));
  set("verdict banana", "verdict", "banana");
  for (const char* v : {"reachable", "unreachable", "undecided"})
    if (c.contains("verdict") && c["verdict"] != v) set(std::string("verdict ") + v, "verdict", v);
  if (c.contains("x_full_row_rank")) set("row rank flipped", "x_full_row_rank", !c["x_full_row_rank"].get<bool>());
  set("constraints unknown to the format", "constraints", "fine");
  if (c.contains("witness")) {
    json t = c;
    t["witness"]["entries"] = t["witness"]["entries"] == "double" ? "rational" : "double";
    out.emplace_back("witness entries relabelled", redigest(t));
    t = c;
    t["witness"]["max_abs_error"] = -1.0;
    out.emplace_back("negative error bound", redigest(t));
  }
  if (c.contains("approximate")) {
    const json& a = c["approximate"];
    const auto change = [&](const std::string& why, const json::json_pointer& p, json value) {
      json t = c;
      t["approximate"][p] = std::move(value);
      out.emplace_back(why, redigest(t));
    };
    json old_format = c;
    old_format["format"] = "attnrank-reach-certificate/2";
    out.emplace_back("format /2 with approximate bounds", redigest(old_format));
    const double lower = a["error_lower"].get<double>();
    if (lower > 0) {
      change("error_lower doubled", json::json_pointer("/error_lower"), 2 * lower);
      change("error_lower one percent up", json::json_pointer("/error_lower"), 1.01 * lower);
      change("error_lower zero, its proof kept", json::json_pointer("/error_lower"), 0.0);
      change("lower proof's width one more", json::json_pointer("/lower_proof/width"), a["lower_proof"]["width"].get<long>() + 1);
      if (a["lower_proof"].contains("vectors"))
        change("lower proof's vectors zero", json::json_pointer("/lower_proof/vectors"),
               matrix_json(Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(a["lower_proof"]["vectors"].size()),
                                                 static_cast<Eigen::Index>(a["lower_proof"]["vectors"][0].size()))));
      if (a["lower_proof"].contains("pairs")) {  // the order bound at width 1
        change("order proof's orders false", json::json_pointer("/lower_proof/orders"), false);
        change("order proof's orders a string", json::json_pointer("/lower_proof/orders"), "true");
        json pairs = a["lower_proof"]["pairs"];
        pairs[0] = json::array({pairs[0][0]});
        change("order proof's first pair one key", json::json_pointer("/lower_proof/pairs"), pairs);
        pairs = a["lower_proof"]["pairs"];
        pairs.push_back(pairs[0]);
        change("order proof's pairs three", json::json_pointer("/lower_proof/pairs"), pairs);
      }
      json rows = a["lower_proof"]["rows"];
      rows.push_back(rows[0]);
      change("a row twice", json::json_pointer("/lower_proof/rows"), rows);
    }
    if (a["error_upper"].is_number()) {
      const double upper = a["error_upper"].get<double>();
      change("error_upper halved", json::json_pointer("/error_upper"), 0.5 * upper);
      change("error_upper null, the witness kept", json::json_pointer("/error_upper"), nullptr);
      change("error_upper below error_lower", json::json_pointer("/error_upper"), 0.5 * lower);
    }
    if (a.contains("epsilon_verdict"))
      for (const char* v : {"within", "not_within", "undecided", "maybe"})
        if (a["epsilon_verdict"] != v) change(std::string("epsilon_verdict ") + v, json::json_pointer("/epsilon_verdict"), v);
    if (a.contains("epsilon")) change("epsilon above 1", json::json_pointer("/epsilon"), 1.5);
  }
  return out;
}

template <class Check>
inline void expect_all_tampering_rejected(const json& c, Eigen::Index n, Check check) {
  REQUIRE(check(c).valid);
  for (const auto& [why, t] : tampered(c, n)) {
    INFO(why);
    CHECK_FALSE(check(t).valid);
  }
}

}  // namespace attnrank::test
