#pragma once
// Module reach: can a head of width d_k produce an attention pattern? Softmax
// inversion (centered_log), what a target is (target), what every question
// answers with (verdict), the rank floor (free), how close a head comes
// (approximate), the embeddings question (embeddings), and certificates a third
// party can check. Depends on attention, io, linalg and numbers.
#include <attnrank/attention.hpp>
#include <attnrank/io.hpp>
#include <attnrank/reach/centered_log.hpp>
#include <attnrank/reach/target.hpp>
#include <attnrank/reach/verdict.hpp>
#include <attnrank/reach/log_exponents.hpp>
#include <attnrank/reach/free.hpp>
#include <attnrank/reach/masked.hpp>
#include <attnrank/reach/approximate.hpp>
#include <attnrank/reach/search_monitor.hpp>
#include <attnrank/reach/embeddings.hpp>
#include <attnrank/reach/certificate.hpp>
#include <attnrank/reach/embeddings_certificate.hpp>
#include <attnrank/reach/masked_embeddings.hpp>
#include <attnrank/reach/masked_certificate.hpp>
