// Runs the fuzz target without libFuzzer (any compiler, CI's 2 cores): every corpus file, then
// deterministic mutations of each (truncations, byte flips, inserted bytes). A crash fails the
// CTest entry; the fuzzer proper (GPUOPT_FUZZ=ON, clang) explores further.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [mutations per file]\n", argv[0]);
    return 2;
  }
  const int mutations = argc > 2 ? std::atoi(argv[2]) : 200;
  std::mt19937 rng(12345);
  size_t files = 0, runs = 0;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ++files;
    auto feed = [&](const std::string& b) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(b.data()), b.size());
      ++runs;
    };
    feed(bytes);
    for (int m = 0; m < mutations && !bytes.empty(); ++m) {
      std::string b = bytes;
      const size_t pos = rng() % b.size();
      switch (m % 4) {
        case 0: b.resize(pos); break;                                         // truncation
        case 1: b[pos] = static_cast<char>(b[pos] ^ (1u << (rng() % 8))); break;  // bit flip
        case 2: b[pos] = static_cast<char>(rng()); break;                     // byte overwrite
        case 3: b.insert(pos, 1, static_cast<char>(rng())); break;            // inserted byte
      }
      feed(b);
    }
  }
  std::printf("fuzz replay: %zu corpus files, %zu inputs, no crash\n", files, runs);
  return files ? 0 : 1;
}
