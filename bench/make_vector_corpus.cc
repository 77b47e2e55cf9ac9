// Writes a JSONL corpus with precomputed vectors for the `zerovec build`
// scaling series (bench/build_scaling.sh), streaming (constant memory):
//
//   make_vector_corpus ROWS DIM OUT.jsonl
//
// Each line: {"id":"d<i>","text":"...","namespace":"n<i%8>","vector":[...]},
// the vector clustered around one of 200 random centres and L2-normalised
// (embedding-like), values with 6 significant digits; the text is ~90 bytes.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ROWS DIM OUT.jsonl\n", argv[0]);
    return 2;
  }
  const size_t rows = std::strtoull(argv[1], nullptr, 10);
  const int dim = std::atoi(argv[2]);
  std::FILE* out = std::fopen(argv[3], "wb");
  if (!out || dim <= 0) return 1;
  std::mt19937_64 rng(20261202);
  std::normal_distribution<float> g;
  const int clusters = 200;
  std::vector<float> centres(size_t(clusters) * dim);
  for (int c = 0; c < clusters; ++c) {
    float s = 0;
    for (int j = 0; j < dim; ++j) {
      centres[c * dim + j] = g(rng);
      s += centres[c * dim + j] * centres[c * dim + j];
    }
    for (int j = 0; j < dim; ++j) centres[c * dim + j] /= std::sqrt(s);
  }
  std::uniform_int_distribution<int> pick(0, clusters - 1);
  std::vector<float> v(dim);
  std::string line;
  char num[32];
  for (size_t i = 0; i < rows; ++i) {
    const int c = pick(rng);
    float s = 0;
    for (int j = 0; j < dim; ++j) {
      v[j] = centres[c * dim + j] + 0.6f * g(rng) / std::sqrt(float(dim));
      s += v[j] * v[j];
    }
    s = 1.0f / std::sqrt(s);
    line = "{\"id\":\"d" + std::to_string(i) + "\",\"text\":\"document " +
           std::to_string(i) + " of the scaling corpus, cluster " +
           std::to_string(c) +
           ", a short stand-in text for its vector\",\"namespace\":\"n" +
           std::to_string(i % 8) + "\",\"vector\":[";
    for (int j = 0; j < dim; ++j) {
      auto r = std::to_chars(num, num + sizeof(num), v[j] * s,
                             std::chars_format::general, 6);
      if (j) line += ',';
      line.append(num, r.ptr);
    }
    line += "]}\n";
    std::fwrite(line.data(), 1, line.size(), out);
  }
  return std::fclose(out) == 0 ? 0 : 1;
}
