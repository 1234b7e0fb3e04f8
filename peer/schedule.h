// The step schedule of every peer collective: recursive doubling among the largest power of two
// m <= P ranks, with a fold for the P - m "extra" ranks. Pure functions of (P, rank, step).
//
//   step 0         fold:    rank r >= m sends its partial state to r - m, which combines it;
//   steps 1..L     (L = log2 m) rank r < m exchanges with r XOR 2^(s-1) and combines;
//   step L + 1     unfold:  rank r < P - m sends its final state to r + m, which takes it as is.
//
// Every combine puts the partial covering the lower ranks first, so every rank evaluates the same
// expression tree: the results are bitwise equal on all ranks. A power-of-two P has empty fold and
// unfold steps. Each rank sends at most ceil(log2 P) messages per collective.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace sketchps::peer {

// The number of steps of a collective among P ranks (fold, L doubling steps, unfold): L + 2.
std::uint32_t NumSteps(std::uint32_t num_ranks);
// The largest power of two <= P (P >= 1).
std::uint32_t DoublingRanks(std::uint32_t num_ranks);

struct Step {
  std::uint32_t index = 0;
  std::optional<std::uint32_t> send_to;    // the rank this rank sends its state to
  std::optional<std::uint32_t> recv_from;  // the rank whose state this rank receives
  bool replace = false;                    // unfold: the received state replaces this rank's
  bool received_first = false;             // combine(received, own) instead of combine(own, received)
};

// This rank's part of step `index` (both optionals empty when it sits the step out).
Step StepOf(std::uint32_t num_ranks, std::uint32_t rank, std::uint32_t index);

// The steps in which this rank sends or receives, in order.
std::vector<Step> Schedule(std::uint32_t num_ranks, std::uint32_t rank);

// The ranks (ascending) whose contributions the state that `sender` sends at step `index` covers.
// Empty when `sender` sends nothing at that step.
std::vector<std::uint32_t> SentBlock(std::uint32_t num_ranks, std::uint32_t sender, std::uint32_t index);

}  // namespace sketchps::peer
