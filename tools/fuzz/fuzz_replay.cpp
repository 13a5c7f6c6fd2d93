// Runs the fuzz target without libFuzzer (any compiler, CI's 2 cores): every corpus file, then
// deterministic mutations of each (truncations, byte flips, inserted bytes, and the target's own
// structure-aware LLVMFuzzerCustomMutator where it has one). A crash fails the CTest entry; the
// fuzzer proper (GPUOPT_FUZZ=ON, clang) explores further.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed)
    __attribute__((weak));

namespace {
std::mt19937 rng(12345);

// One byte mutation of data[0, size): what a custom mutator falls back to (libFuzzer's
// LLVMFuzzerMutate when linked with libFuzzer; this build has no libFuzzer, so it is defined here).
size_t mutate_bytes(uint8_t* data, size_t size, size_t max_size, int kind) {
  if (size == 0) return 0;
  const size_t pos = rng() % size;
  switch (kind % 4) {
    case 0: return pos;                                                              // truncation
    case 1: data[pos] = static_cast<uint8_t>(data[pos] ^ (1u << (rng() % 8))); return size;  // bit flip
    case 2: data[pos] = static_cast<uint8_t>(rng()); return size;                    // byte overwrite
    default:                                                                         // inserted byte
      if (size >= max_size) return size;
      std::memmove(data + pos + 1, data + pos, size - pos);
      data[pos] = static_cast<uint8_t>(rng());
      return size + 1;
  }
}
}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size) {
  return mutate_bytes(data, size, max_size, static_cast<int>(rng()));
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [mutations per file]\n", argv[0]);
    return 2;
  }
  const int mutations = argc > 2 ? std::atoi(argv[2]) : 200;
  // GPUOPT_FUZZ_REPLAY_DUMP=FILE: each input is written there before it runs, so the one that
  // kills the process (a crash, a hang, the OOM killer) is left behind.
  const char* dump = std::getenv("GPUOPT_FUZZ_REPLAY_DUMP");
  size_t files = 0, runs = 0;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ++files;
    auto feed = [&](const std::vector<uint8_t>& b) {
      if (dump) std::ofstream(dump, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
      LLVMFuzzerTestOneInput(b.data(), b.size());
      ++runs;
    };
    const std::vector<uint8_t> orig(bytes.begin(), bytes.end());
    feed(orig);
    for (int m = 0; m < mutations && !orig.empty(); ++m) {
      std::vector<uint8_t> b = orig;
      b.resize(orig.size() + 64);
      size_t n;
      if (LLVMFuzzerCustomMutator && m % 2) n = LLVMFuzzerCustomMutator(b.data(), orig.size(), b.size(), static_cast<unsigned>(m));
      else n = mutate_bytes(b.data(), orig.size(), b.size(), m);
      b.resize(n);
      feed(b);
    }
  }
  std::printf("fuzz replay: %zu corpus files, %zu inputs, no crash\n", files, runs);
  return files ? 0 : 1;
}
