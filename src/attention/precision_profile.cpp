// Precision profiles (attention/precision_profile.hpp).
#include <attnrank/attention/precision_profile.hpp>

#include <attnrank/error.hpp>
#include <attnrank/numbers/decimal.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace attnrank {
namespace {

constexpr long unbounded_block = 1L << 40;  // one block: no rescale

void require_u(double u, const std::string& where) {
  if (!(u >= 0 && u < 0.25))
    throw input_error(where + ": " + shortest_decimal(u) + " is not a unit roundoff in [0, 1/4)");
}

}  // namespace

double NumberFormat::ulp(double x) const {
  const int e = (x == 0 || !std::isfinite(x)) ? min_exponent : std::max(std::ilogb(x), min_exponent);
  return std::ldexp(1.0, e - digits + 1);
}

NumberFormat number_format(const std::string& name) {
  if (name == "bfloat16" || name == "bf16") return {"bfloat16", 0x1p-8, 0x1p-134, 0x1.fep127, 8, -126};
  if (name == "float16" || name == "fp16") return {"float16", 0x1p-11, 0x1p-25, 65504, 11, -14};
  if (name == "float32" || name == "fp32")
    return {"float32", 0x1p-24, 0x1p-150, std::numeric_limits<float>::max(), 24, -126};
  if (name == "float64" || name == "fp64")  // eta rounded up to a double
    return {"float64", 0x1p-53, 0x1p-1074, std::numeric_limits<double>::max(), 53, -1022};
  if (name == "float8_e4m3fn" || name == "fp8_e4m3") return {"float8_e4m3fn", 0x1p-4, 0x1p-10, 448, 4, -6};
  if (name == "float8_e5m2" || name == "fp8_e5m2") return {"float8_e5m2", 0x1p-3, 0x1p-17, 57344, 3, -14};
  throw input_error("format '" + name +
                    "' is not one of bfloat16, float16, float32, float64, float8_e4m3fn, float8_e5m2");
}

Accumulation ieee_fp32_sum() { return {0x1p-24, 0, false}; }
Accumulation tensor_core_fp32_sum() { return {0x1p-23, 17, true}; }

std::vector<std::string> profile_names() {
  return {"fa2-bf16", "fa2-fp16", "fa3-bf16", "fa3-fp16", "fa3-fp8", "torch-math-fp32", "fp32"};
}

PrecisionProfile named_profile(const std::string& name) {
  PrecisionProfile p;
  p.name = name;
  // FlashAttention 2 and 3: tensor-core Q K^T and P V in fp32, ex2.approx, P stored in
  // the inputs' 16-bit format, fp32 row sums of the unrounded P, blocks of at least 16
  // keys, up to 128 split-KV partitions (num_splits), the output in the same format.
  const auto flash = [&](const char* format) {
    p.probabilities = number_format(format);
    p.output = number_format(format);
    p.splits = 128;
  };
  if (name == "fa2-bf16" || name == "fa3-bf16") flash("bfloat16");
  else if (name == "fa2-fp16" || name == "fa3-fp16") flash("float16");
  else if (name == "fa3-fp8") {  // FP8 path: P converted to e4m3 before P V, bf16 output
    flash("bfloat16");
    p.probabilities = number_format("float8_e4m3fn");
  } else if (name == "torch-math-fp32") {  // one fp32 softmax then one GEMM, IEEE, correctly rounded exp
    p.scores = ieee_fp32_sum();
    p.pv = ieee_fp32_sum();
    p.exp_relative = 0x1p-23;  // glibc's / SLEEF's expf: below one ulp
    p.probabilities = number_format("float32");
    p.output = number_format("float32");
    p.min_block = unbounded_block;
    p.flush_to_zero = false;
  } else if (name == "fp32") {
    p.probabilities = number_format("float32");
    p.output = number_format("float32");
    p.splits = 128;
  } else {
    std::string known;
    for (const std::string& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
    throw input_error("profile '" + name + "' is not one of " + known + " (or a JSON object / file of one)");
  }
  return p;
}

namespace {

Accumulation accumulation_from_json(const nlohmann::json& j, const std::string& where) {
  if (j.is_string()) {
    if (j == "ieee_fp32") return ieee_fp32_sum();
    if (j == "tensor_core_fp32") return tensor_core_fp32_sum();
    throw input_error(where + ": '" + j.get<std::string>() + "' is not ieee_fp32, tensor_core_fp32 or {\"u\", \"extra_terms\"}");
  }
  if (!j.is_object()) throw input_error(where + ": needs ieee_fp32, tensor_core_fp32 or {\"u\", \"extra_terms\"}");
  Accumulation a;
  for (const auto& [key, value] : j.items()) {
    if (key == "u" && value.is_number()) a.u = value.get<double>();
    else if (key == "extra_terms" && value.is_number_integer() && value.get<long>() >= 0) a.extra_terms = value.get<long>();
    else if (key == "tensor_core" && value.is_boolean()) a.tensor_core = value.get<bool>();
    else throw input_error(where + "." + key + ": not a known field, or not its type (u: number, extra_terms: integer >= 0)");
  }
  require_u(a.u, where + ".u");
  return a;
}

nlohmann::json accumulation_json(const Accumulation& a) {
  return {{"u", a.u}, {"extra_terms", a.extra_terms}, {"tensor_core", a.tensor_core}};
}

}  // namespace

PrecisionProfile profile_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw input_error(source + ": a precision profile is a JSON object");
  PrecisionProfile p = named_profile(j.contains("base") ? [&] {
    if (!j["base"].is_string()) throw input_error(source + ".base: needs a profile's name");
    return j["base"].get<std::string>();
  }() : std::string("fp32"));
  p.name = j.contains("base") ? j["base"].get<std::string>() + " (modified)" : "custom";
  const auto number = [&](const std::string& key, const nlohmann::json& v) {
    if (!v.is_number()) throw input_error(source + "." + key + ": needs a number");
    return v.get<double>();
  };
  const auto count = [&](const std::string& key, const nlohmann::json& v) {
    if (!v.is_number_integer() || v.get<long>() < 1) throw input_error(source + "." + key + ": needs an integer >= 1");
    return v.get<long>();
  };
  const auto format = [&](const std::string& key, const nlohmann::json& v) {
    if (!v.is_string()) throw input_error(source + "." + key + ": needs a format's name");
    try {
      return number_format(v.get<std::string>());
    } catch (const input_error& e) {
      throw input_error(source + "." + key + ": " + e.what());
    }
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "base") continue;
    if (key == "name") {
      if (!value.is_string()) throw input_error(source + ".name: needs a string");
      p.name = value.get<std::string>();
    } else if (key == "scores") p.scores = accumulation_from_json(value, source + ".scores");
    else if (key == "row_sums") p.row_sums = accumulation_from_json(value, source + ".row_sums");
    else if (key == "pv") p.pv = accumulation_from_json(value, source + ".pv");
    else if (key == "argument_u") p.argument_u = number(key, value);
    else if (key == "exp_relative") p.exp_relative = number(key, value);
    else if (key == "rescale_u") p.rescale_u = number(key, value);
    else if (key == "divide_u") p.divide_u = number(key, value);
    else if (key == "lse_u") p.lse_u = number(key, value);
    else if (key == "probabilities") p.probabilities = format(key, value);
    else if (key == "output") p.output = format(key, value);
    else if (key == "row_sum_of_stored") {
      if (!value.is_boolean()) throw input_error(source + ".row_sum_of_stored: needs true or false");
      p.row_sum_of_stored = value.get<bool>();
    } else if (key == "flush_to_zero") {
      if (!value.is_boolean()) throw input_error(source + ".flush_to_zero: needs true or false");
      p.flush_to_zero = value.get<bool>();
    } else if (key == "min_block") p.min_block = count(key, value);
    else if (key == "splits") p.splits = count(key, value);
    else
      throw input_error(source + ": '" + key + "' is not a field of a precision profile (name, base, scores, "
                        "argument_u, exp_relative, probabilities, row_sum_of_stored, row_sums, pv, rescale_u, "
                        "divide_u, lse_u, output, min_block, splits, flush_to_zero)");
  }
  for (const auto& [u, key] : {std::pair{p.argument_u, "argument_u"}, {p.exp_relative, "exp_relative"},
                               {p.rescale_u, "rescale_u"}, {p.divide_u, "divide_u"}, {p.lse_u, "lse_u"}})
    require_u(u, source + "." + key);
  return p;
}

nlohmann::json to_json(const PrecisionProfile& p) {
  return {{"name", p.name},
          {"scores", accumulation_json(p.scores)},
          {"argument_u", p.argument_u},
          {"exp_relative", p.exp_relative},
          {"probabilities", p.probabilities.name},
          {"row_sum_of_stored", p.row_sum_of_stored},
          {"row_sums", accumulation_json(p.row_sums)},
          {"pv", accumulation_json(p.pv)},
          {"rescale_u", p.rescale_u},
          {"divide_u", p.divide_u},
          {"lse_u", p.lse_u},
          {"output", p.output.name},
          {"min_block", p.min_block},
          {"splits", p.splits},
          {"flush_to_zero", p.flush_to_zero}};
}

PrecisionProfile profile_from_argument(const std::string& argument) {
  const auto parse = [](const std::string& text, const std::string& source) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) throw input_error(source + ": not valid JSON");
    return profile_from_json(j, source);
  };
  if (!argument.empty() && argument.front() == '{') return parse(argument, "profile");
  for (const std::string& name : profile_names())
    if (argument == name) return named_profile(name);
  std::ifstream file(argument);
  if (!file) {
    std::string known;
    for (const std::string& name : profile_names()) known += (known.empty() ? "" : ", ") + name;
    throw input_error("profile '" + argument + "' is neither a profile's name (" + known +
                      ") nor a readable JSON file");
  }
  std::ostringstream text;
  text << file.rdbuf();
  return parse(text.str(), "profile file " + argument);
}

}  // namespace attnrank
