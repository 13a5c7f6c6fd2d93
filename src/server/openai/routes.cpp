// OpenAI and Triton-generate endpoints over the serving engine (routes.h).
#include "server/openai/routes.h"

#include <atomic>
#include <mutex>

#include "core/log.h"
#include "server/openai/protocol.h"
#include "server/openai/responses.h"

namespace gpuopt::server {
int http_status_for(const Status& s);  // inference_server.h
}

namespace gpuopt::server::openai {

using net::HttpRequest;
using net::HttpResponse;
using ojson = nlohmann::ordered_json;

namespace {

// One client request in flight: its engine requests (n per prompt) and what they produced.
struct Job : std::enable_shared_from_this<Job> {
  GenerationRequest req;
  std::shared_ptr<LlmModel> model;
  ResponseMeta meta;
  std::vector<int64_t> prompt_lens;
  std::vector<Choice> choices;
  std::vector<size_t> offsets;  // completions' text_offset per choice (streamed logprobs)
  Usage usage;
  std::mutex mu;
  std::vector<uint64_t> ids;
  int remaining = 0;
  bool cancelled = false;
  net::Responder done;
  std::shared_ptr<net::ResponseStream> stream;
  std::string error;
  bool overflow = false;  // the stream's buffer was full: cancel once the lock is released

  void cancel_all() {
    std::vector<uint64_t> v;
    {
      std::lock_guard<std::mutex> lk(mu);
      cancelled = true;
      v = ids;
    }
    for (uint64_t id : v) model->engine->cancel(id);
  }

  void write(std::string event) {
    if (stream->write(std::move(event)) == net::ResponseStream::Write::kFull) {
      // A reader slower than the generation: its buffer is full. The request ends here.
      GPUOPT_LOG(warn, "openai: {}: the client reads too slowly for the stream buffer; request cancelled", meta.id);
      stream->finish();
      overflow = true;
    }
  }

  // On the engine thread.
  void on_output(int c, const llm::EngineOutput& o) {
    std::unique_lock<std::mutex> lk(mu);
    Choice& ch = choices[static_cast<size_t>(c)];
    ch.text += o.text;
    if (req.logprobs) ch.tokens.insert(ch.tokens.end(), o.tokens.begin(), o.tokens.end());
    ch.completion_tokens = o.completion_tokens;
    if (o.finished) {
      ch.finish_reason = o.finish_reason;
      usage.completion_tokens += o.completion_tokens;
      usage.cached_tokens += o.cached_prompt_tokens;
      if (o.finish_reason == "error" && error.empty()) error = o.error;
    }
    const bool last = o.finished && --remaining == 0;
    if (stream) {
      if (!o.text.empty() || o.finished || (req.logprobs && !o.tokens.empty())) {
        if (req.endpoint == Endpoint::kGenerate) {
          write(generate_event(meta.model, o.text, o.finished ? o.finish_reason : ""));
        } else {
          write(chunk_event(meta, *model->tokenizer, c, o.text, o.tokens, offsets[static_cast<size_t>(c)],
                            o.finished ? o.finish_reason : "", false, req.include_usage));
          if (req.logprobs)  // text_offset of the next chunk's tokens
            for (const auto& t : o.tokens) offsets[static_cast<size_t>(c)] += model->tokenizer->decode({t.token}, false).size();
        }
      }
      if (last) {
        if (req.endpoint != Endpoint::kGenerate) {
          if (req.include_usage) write(usage_event(meta, usage));
          write(kDoneEvent);
        }
        stream->finish();
      }
      if (std::exchange(overflow, false)) {
        lk.unlock();
        cancel_all();
      }
      return;
    }
    if (!last) return;
    lk.unlock();
    if (!error.empty()) return done(error_response(make_error(500, "generation failed: " + error)));
    if (req.endpoint == Endpoint::kGenerate)
      return done(HttpResponse::json(200, generate_json(meta.model, choices[0].text, choices[0].finish_reason, usage)));
    done(HttpResponse::json(200, completion_json(meta, *model->tokenizer, choices, usage)));
  }
};

HttpResponse triton_error(int status, const std::string& msg) { return HttpResponse::error(status, msg); }

// Answers errors in the endpoint's form (OpenAI's body, or KServe's {"error": "..."}).
void answer_error(Endpoint e, const net::Responder& done, const ApiError& err) {
  if (e == Endpoint::kGenerate) return done(triton_error(err.status, err.message));
  done(error_response(err));
}

void handle(LlmModels& models, const std::function<bool()>& stopping, Endpoint endpoint, HttpRequest&& q,
            net::Responder done, bool force_stream) {
  ApiError err;
  std::optional<GenerationRequest> parsed;
  std::string_view body = q.raw_body.data ? std::string_view(q.raw_body.data, q.raw_body.size) : q.body;
  if (endpoint == Endpoint::kCompletions) parsed = parse_completion_request(body, &err);
  else if (endpoint == Endpoint::kChat) parsed = parse_chat_request(body, &err);
  else parsed = parse_generate_request(body, std::string(q.param("model")), &err);
  if (!parsed) return answer_error(endpoint, done, err);
  if (force_stream) parsed->stream = true;
  if (stopping()) return answer_error(endpoint, done, make_error(503, "the server is shutting down"));
  auto model = models.find(parsed->model);
  if (!model)
    return answer_error(endpoint, done,
                        make_error(404, fmt::format("The model `{}` does not exist.", net::printable(parsed->model)),
                                   "model"));
  auto job = std::make_shared<Job>();
  job->req = std::move(*parsed);
  job->model = model;
  GenerationRequest& req = job->req;
  job->meta = {.id = new_request_id(endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl"),
               .created = unix_now(),
               .model = model->name,
               .endpoint = endpoint,
               .logprobs = req.logprobs};
  const llm::Tokenizer& tok = *model->tokenizer;
  // Prompts -> token ids.
  std::vector<std::vector<int64_t>> prompts;
  if (endpoint == Endpoint::kChat) {
    if (!model->chat)
      return answer_error(endpoint, done,
                          make_error(400, fmt::format("model '{}' has no chat template (tokenizer_config.json "
                                                      "chat_template): use /v1/completions",
                                                      model->name)));
    auto text = model->chat->render(req.messages, req.add_generation_prompt);
    if (!text.ok()) return answer_error(endpoint, done, make_error(400, text.status().message(), "messages"));
    // The template writes BOS itself (as Hugging Face's apply_chat_template + encode without specials).
    prompts.push_back(tok.encode(*text, /*add_special_tokens=*/false));
  } else {
    for (const auto& p : req.prompts) {
      if (p.is_ids) {
        for (int64_t id : p.ids)
          if (id >= tok.vocab_size() && id >= model->config.vocab_size)
            return answer_error(endpoint, done, make_error(400, fmt::format("token id {} is outside the vocabulary", id), "prompt"));
        prompts.push_back(p.ids);
      } else {
        prompts.push_back(tok.encode(p.text, /*add_special_tokens=*/true));
      }
    }
  }
  // Lengths against the context, as vLLM words it.
  for (const auto& p : prompts) {
    const int64_t len = static_cast<int64_t>(p.size());
    if (len == 0) return answer_error(endpoint, done, make_error(400, "the prompt is empty", "prompt"));
    const int64_t room = model->max_model_len - len;
    const int64_t want = req.max_tokens.value_or(room);
    if (room <= 0 || want > room)
      return answer_error(
          endpoint, done,
          make_error(400,
                     fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                 "({} in the messages, {} in the completion). Please reduce the length of the "
                                 "messages or completion.",
                                 model->max_model_len, len + std::max<int64_t>(want, 0), len, want),
                     req.max_tokens ? "max_tokens" : "prompt"));
    job->prompt_lens.push_back(len);
    job->usage.prompt_tokens += len;
  }
  const int n = req.n;
  const size_t total = prompts.size() * static_cast<size_t>(n);
  job->choices.resize(total);
  job->offsets.assign(total, 0);
  for (size_t i = 0; i < total; ++i) job->choices[i].index = static_cast<int>(i);
  job->remaining = static_cast<int>(total);
  job->done = done;
  if (req.stream) {
    job->stream = std::make_shared<net::ResponseStream>(models.options().stream_buffer_bytes);
    std::weak_ptr<Job> weak = job;
    job->stream->on_close([weak] {
      if (auto j = weak.lock()) j->cancel_all();  // the client went away: free its KV blocks
    });
    if (endpoint == Endpoint::kChat)  // the first delta of each choice names the role
      for (size_t i = 0; i < total; ++i)
        job->stream->write(chunk_event(job->meta, tok, static_cast<int>(i), "", {}, 0, "", true, req.include_usage));
  }
  // n engine requests per prompt (seed + index); a refusal cancels those already queued.
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int64_t want = req.max_tokens.value_or(model->max_model_len - job->prompt_lens[p]);
    for (int k = 0; k < n; ++k) {
      const size_t c = p * static_cast<size_t>(n) + static_cast<size_t>(k);
      llm::EngineRequest er;
      er.prompt = prompts[p];
      er.params = req.sampling(want, k);
      er.skip_special_tokens = req.skip_special_tokens;
      auto id = model->engine->submit(std::move(er), [job, c](const llm::EngineOutput& o) {
        job->on_output(static_cast<int>(c), o);
      });
      if (!id.ok()) {
        {
          std::lock_guard<std::mutex> lk(job->mu);
          job->stream = nullptr;
          job->done = net::Responder();  // callbacks of the cancelled ones answer nothing
        }
        job->cancel_all();
        const Status& s = id.status();
        int status = s.code() == StatusCode::kUnavailable ? (stopping() ? 503 : 429) : http_status_for(s);
        return answer_error(endpoint, done, make_error(status, s.message()));
      }
      std::lock_guard<std::mutex> lk(job->mu);
      job->ids.push_back(*id);
      if (job->cancelled) model->engine->cancel(*id);
    }
  }
  if (job->stream) {
    done(HttpResponse::streamed(200, "text/event-stream", job->stream));
  } else {
    std::weak_ptr<Job> weak = job;
    done.on_client_gone([weak] {
      if (auto j = weak.lock()) j->cancel_all();  // nobody will read the answer: free its KV blocks
    });
  }
}

}  // namespace

nlohmann::json generate_model_metadata(const LlmModel& m) {
  return {{"name", m.name},
          {"versions", {"1"}},
          {"platform", "gpuopt_llm"},
          {"inputs", {{{"name", "text_input"}, {"datatype", "BYTES"}, {"shape", {1}}}}},
          {"outputs", {{{"name", "text_output"}, {"datatype", "BYTES"}, {"shape", {-1}}}}}};
}

void add_openai_routes(net::Router& r, LlmModels& models, std::function<bool()> stopping) {
  LlmModels* m = &models;
  auto route = [m, stopping](Endpoint e, bool force_stream) {
    return [m, stopping, e, force_stream](HttpRequest&& q, net::Responder done) {
      auto req = std::make_shared<HttpRequest>(std::move(q));
      m->post([m, stopping, e, force_stream, req, done = std::move(done)]() mutable {
        handle(*m, stopping, e, std::move(*req), std::move(done), force_stream);
      });
    };
  };
  r.add_async("POST", "/v1/completions", route(Endpoint::kCompletions, false));
  r.add_async("POST", "/v1/chat/completions", route(Endpoint::kChat, false));
  r.add_async("POST", "/v2/models/{model}/generate", route(Endpoint::kGenerate, false));
  r.add_async("POST", "/v2/models/{model}/generate_stream", route(Endpoint::kGenerate, true));
  r.get("/v1/models", [m](const HttpRequest&) {
    ojson data = ojson::array();
    for (const auto& x : m->all())
      data.push_back({{"id", x->name},
                      {"object", "model"},
                      {"created", x->created},
                      {"owned_by", "gpuopt"},
                      {"root", x->path},
                      {"parent", nullptr},
                      {"max_model_len", x->max_model_len}});
    return HttpResponse::json(200, ojson({{"object", "list"}, {"data", data}}).dump());
  });
  r.get("/v1/models/{model}", [m](const HttpRequest& q) {
    auto x = m->find(std::string(q.param("model")));
    if (!x)
      return error_response(
          make_error(404, fmt::format("The model `{}` does not exist.", net::printable(q.param("model"))), "model"));
    return HttpResponse::json(
        200, ojson({{"id", x->name}, {"object", "model"}, {"created", x->created}, {"owned_by", "gpuopt"}}).dump());
  });
}

}  // namespace gpuopt::server::openai
