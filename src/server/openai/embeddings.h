// OpenAI's /v1/embeddings: one vector per input, from an encoder served from ONNX (BERT-style:
// input_ids, attention_mask, token_type_ids -> last_hidden_state, then pooled) or from a decoder
// checkpoint (the last token's hidden state after the final norm).
//
//   GPUOPT_ASSIGN_OR_RETURN(std::shared_ptr<Embedder> e, load_embedder("models/minilm", {}));
//   net::Router router;
//   add_embedding_routes(router, [e](std::string_view model) {
//     return model == "minilm" ? e : nullptr;        // nullptr: 404 "model ... does not exist"
//   });
//
// Request: {"model", "input": string | [string] | [int] | [[int]], "encoding_format": "float" |
// "base64", "dimensions" (refused: 400), "user" (ignored)}. Answer: {"object": "list", "data":
// [{"object": "embedding", "index", "embedding": [floats] or base64 of little-endian f32}],
// "model", "usage": {"prompt_tokens", "total_tokens"}}. Errors in OpenAI's error body.
//
// A model folder's pooling (encoders): embedding.json {"pooling": "mean" | "cls" | "max" |
// "last", "normalize": true | false}; else sentence-transformers' 1_Pooling/config.json
// (pooling_mode_*) with normalisation when modules.json lists a Normalize module; else mean
// pooling, normalised. Decoders: last-token pooling, normalised unless embedding.json says not.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gpuopt/session.h"
#include "llm/runner.h"
#include "llm/tokenizer.h"
#include "net/http.h"

namespace gpuopt::server::openai {

enum class Pooling { kMean, kCls, kMax, kLast };
const char* pooling_name(Pooling p);

struct PoolingConfig {
  Pooling pooling = Pooling::kMean;
  bool normalize = true;
};
// The folder's pooling as described above (`decoder`: the default is last-token pooling).
Result<PoolingConfig> read_pooling_config(const std::filesystem::path& dir, bool decoder);

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual const llm::Tokenizer& tokenizer() const = 0;
  virtual int64_t max_input_tokens() const = 0;  // per input
  virtual int64_t dimensions() const = 0;
  virtual const PoolingConfig& pooling() const = 0;
  // One vector per input (token ids, each 1..max_input_tokens long, in the vocabulary); the
  // inputs are run in batches. Thread-safe.
  virtual Result<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int64_t>>& inputs) = 0;
};

// An encoder folder: model.onnx (or onnx/model.onnx, 1/model.onnx), tokenizer.json, optional
// config.json (max_position_embeddings, pad_token_id) and the pooling files above.
Result<std::shared_ptr<Embedder>> load_onnx_embedder(const std::filesystem::path& dir, const SessionOptions& options,
                                                     int max_batch = 32);
// A decoder: its runner (used by this embedder alone) and tokenizer.
Result<std::shared_ptr<Embedder>> make_decoder_embedder(std::unique_ptr<llm::ModelRunner> runner,
                                                        std::shared_ptr<const llm::Tokenizer> tokenizer,
                                                        PoolingConfig pooling);
// Either, from what the folder holds: an ONNX model -> encoder; config.json + safetensors ->
// decoder on `device` ("cpu" or "cuda[:N]").
Result<std::shared_ptr<Embedder>> load_embedder(const std::filesystem::path& dir, const std::string& device);

// Pooling of one input's rows `h` [tokens, dim] (mask: 1 for real tokens), then L2
// normalisation when asked. Exposed for tests.
std::vector<float> pool(const float* h, int64_t tokens, int64_t dim, const std::vector<int64_t>& mask,
                        const PoolingConfig& cfg);

using EmbedderLookup = std::function<std::shared_ptr<Embedder>(std::string_view model)>;
// POST /v1/embeddings. `max_inputs`: inputs in one request at most (OpenAI's limit is 2048).
void add_embedding_routes(net::Router& router, EmbedderLookup lookup, size_t max_inputs = 2048);

}  // namespace gpuopt::server::openai
