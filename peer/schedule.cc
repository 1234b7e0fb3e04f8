#include "peer/schedule.h"

namespace sketchps::peer {

std::uint32_t DoublingRanks(std::uint32_t num_ranks) {
  std::uint32_t m = 1;
  while (m * 2 <= num_ranks) m *= 2;
  return m;
}

std::uint32_t NumSteps(std::uint32_t num_ranks) {
  std::uint32_t levels = 0;
  for (std::uint32_t m = DoublingRanks(num_ranks); m > 1; m /= 2) ++levels;
  return levels + 2;
}

Step StepOf(std::uint32_t num_ranks, std::uint32_t rank, std::uint32_t index) {
  const std::uint32_t m = DoublingRanks(num_ranks);
  const std::uint32_t extra = num_ranks - m;
  const std::uint32_t last = NumSteps(num_ranks) - 1;
  Step step;
  step.index = index;
  if (index == 0) {
    if (rank >= m) step.send_to = rank - m;
    if (rank < extra) step.recv_from = rank + m;
  } else if (index < last) {
    if (rank < m) {
      const std::uint32_t partner = rank ^ (1u << (index - 1));
      step.send_to = partner;
      step.recv_from = partner;
      step.received_first = partner < rank;
    }
  } else if (index == last) {
    if (rank < extra) step.send_to = rank + m;
    if (rank >= m) {
      step.recv_from = rank - m;
      step.replace = true;
    }
  }
  return step;
}

std::vector<Step> Schedule(std::uint32_t num_ranks, std::uint32_t rank) {
  std::vector<Step> steps;
  for (std::uint32_t i = 0; i < NumSteps(num_ranks); ++i) {
    Step s = StepOf(num_ranks, rank, i);
    if (s.send_to || s.recv_from) steps.push_back(s);
  }
  return steps;
}

std::vector<std::uint32_t> SentBlock(std::uint32_t num_ranks, std::uint32_t sender, std::uint32_t index) {
  const Step step = StepOf(num_ranks, sender, index);
  std::vector<std::uint32_t> block;
  if (!step.send_to) return block;
  if (index == 0) return {sender};
  if (index == NumSteps(num_ranks) - 1) {
    for (std::uint32_t r = 0; r < num_ranks; ++r) block.push_back(r);
    return block;
  }
  // Before doubling step s, rank q < m holds the folded states of the 2^(s-1) aligned ranks around it.
  const std::uint32_t m = DoublingRanks(num_ranks);
  const std::uint32_t width = 1u << (index - 1);
  const std::uint32_t lo = sender & ~(width - 1);
  for (std::uint32_t x = lo; x < lo + width; ++x) block.push_back(x);
  for (std::uint32_t x = lo; x < lo + width; ++x) {
    if (x + m < num_ranks) block.push_back(x + m);
  }
  return block;
}

}  // namespace sketchps::peer
