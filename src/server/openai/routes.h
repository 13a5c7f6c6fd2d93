// The HTTP endpoints of the generation models: OpenAI's /v1/completions, /v1/chat/completions and
// /v1/models, and Triton's generate extension (/v2/models/NAME/generate and generate_stream).
// Each request becomes n engine requests per prompt; a streamed one answers server-sent events
// through a bounded net::ResponseStream, and a client that leaves (or reads too slowly for the
// stream's buffer) has its engine requests cancelled at the next step.
//
//   net::Router r;
//   add_openai_routes(r, models, [&] { return shutting_down; });
#pragma once

#include <functional>

#include "net/http.h"
#include "server/openai/llm_models.h"

namespace gpuopt::server::openai {

// `stopping`: true once the server drains (new requests then get 503).
void add_openai_routes(net::Router& r, LlmModels& models, std::function<bool()> stopping);

// Whether `name` is a generation model (Triton's metadata/ready endpoints answer for it).
nlohmann::json generate_model_metadata(const LlmModel& m);

}  // namespace gpuopt::server::openai
