// POST /v2/models/{m}[/versions/{v}]/infer: decode, check against the model config, queue on
// the batcher, answer from the batcher thread. submit_infer is the part HTTP and gRPC share:
// shared-memory inputs, checks against the config, the batcher, statistics, the drain count.
#include <malloc.h>

#include <charconv>
#include <utility>

#include "core/log.h"
#include "core/nvtx.h"
#include "server/inference_server.h"
#include "server/kserve.h"

namespace gpuopt::server {

constexpr size_t kTrimAfterRefusalBytes = size_t{4} << 20;

using net::HttpRequest;
using net::HttpResponse;

namespace {

// Puts the request's tensors in model input order and checks dtype and shape against the config.
Result<std::vector<Tensor>> arrange_inputs(const LoadedVersion& v, std::vector<InferInput>& given) {
  const ModelConfig& c = v.config;
  for (const auto& g : given) {
    bool known = false;
    for (const auto& t : c.inputs) known |= t.name == g.name;
    if (!known) {
      std::string names;
      for (const auto& t : c.inputs) names += (names.empty() ? "'" : ", '") + t.name + "'";
      return Status::InvalidArgument("unexpected inference input '{}' for model '{}' (it takes {})", g.name, v.name,
                                     names);
    }
  }
  std::vector<Tensor> out;
  for (const IoSpec& mi : v.model_inputs) {
    const TensorConfig* tc = nullptr;
    for (const auto& t : c.inputs)
      if (t.name == mi.name) tc = &t;
    InferInput* in = nullptr;
    for (auto& g : given)
      if (g.name == mi.name) in = &g;
    if (!in) return Status::InvalidArgument("expected input '{}' for model '{}' is missing", mi.name, v.name);
    if (in->tensor.dtype() != tc->dtype)
      return Status::InvalidArgument("input '{}' for model '{}': datatype {} does not match the model's {}", mi.name,
                                     v.name, dtype_kserve_name(in->tensor.dtype()), dtype_kserve_name(tc->dtype));
    Shape want = tc->dims;
    if (c.max_batch_size > 0) want.insert(want.begin(), -1);
    const Shape& got = in->tensor.shape();
    bool ok = got.size() == want.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || want[i] == got[i];
    if (!ok)
      return Status::InvalidArgument("input '{}' for model '{}': shape {} does not match the model's {}", mi.name,
                                     v.name, dims_string(got), dims_string(want));
    if (c.max_batch_size > 0 && (got[0] < 1 || got[0] > c.max_batch_size))
      return Status::InvalidArgument("input '{}' for model '{}': batch size {} is outside 1..{} (max_batch_size)",
                                     mi.name, v.name, got[0], c.max_batch_size);
    Tensor t = std::move(in->tensor);
    if (tc->reshape) {
      Shape r = *tc->reshape;
      if (c.max_batch_size > 0) r.insert(r.begin(), got[0]);
      GPUOPT_ASSIGN_OR_RETURN(t, t.reshaped(r));
    }
    out.push_back(std::move(t));
  }
  return out;
}

struct OutputPlan {
  std::vector<size_t> index;  // into the model's outputs
  std::vector<std::string> name;
  std::vector<bool> binary;
  std::vector<std::optional<Shape>> client_dims;  // config dims when a reshape applies
  std::vector<std::optional<ShmRef>> shm;         // written to shared memory instead of the reply
};

Result<OutputPlan> plan_outputs(const LoadedVersion& v, const InferRequest& req) {
  OutputPlan p;
  auto add = [&](size_t i, bool binary, std::optional<ShmRef> shm = std::nullopt) {
    p.index.push_back(i);
    p.shm.push_back(std::move(shm));
    p.name.push_back(v.model_outputs[i].name);
    p.binary.push_back(binary);
    std::optional<Shape> dims;
    for (const auto& t : v.config.outputs)
      if (t.name == v.model_outputs[i].name && t.reshape && shape_numel(t.dims) >= 0) dims = t.dims;
    p.client_dims.push_back(dims);
  };
  if (req.outputs.empty()) {
    // Every output the config lists (all of the model's when it lists none).
    for (size_t i = 0; i < v.model_outputs.size(); ++i)
      for (const auto& t : v.config.outputs)
        if (t.name == v.model_outputs[i].name) add(i, req.binary_output_default);
    return p;
  }
  for (const auto& r : req.outputs) {
    size_t found = v.model_outputs.size();
    for (size_t i = 0; i < v.model_outputs.size(); ++i)
      if (v.model_outputs[i].name == r.name) found = i;
    if (found == v.model_outputs.size())
      return Status::InvalidArgument("unexpected inference output '{}' for model '{}'", r.name, v.name);
    add(found, r.binary.value_or(req.binary_output_default), r.shm);
  }
  return p;
}

}  // namespace

void InferenceServer::handle_infer(HttpRequest&& req, net::Responder done) {
  const uint64_t t_start = now_ns();
  if (shutting_down_) {
    done(HttpResponse::error(503, "server is shutting down"));
    return;
  }
  auto found = repo_->find(std::string(req.param("model")), std::string(req.param("version")));
  if (!found.ok()) {
    done(HttpResponse::error(http_status_for(found.status()), found.status().message()));
    return;
  }
  std::shared_ptr<LoadedVersion> v = std::move(found).value();
  std::optional<size_t> header_len;
  if (auto h = req.header("Inference-Header-Content-Length"); !h.empty()) {
    size_t n = 0;
    auto [p, ec] = std::from_chars(h.data(), h.data() + h.size(), n);
    if (ec != std::errc() || p != h.data() + h.size()) {
      done(HttpResponse::error(400, "Inference-Header-Content-Length is not a number"));
      return;
    }
    header_len = n;
  }
  const size_t body_size = req.raw_body.data ? req.raw_body.size : req.body.size();
  std::optional<NvtxRange> decode_range(std::in_place, "serve decode");
  // Zero-copy: binary tensors are views of the body, which they keep alive until the answer (a
  // large body was read straight into memory laid out for it: request_body.h).
  auto decoded = req.raw_body.data ? decode_infer_request(req.raw_body.data, req.raw_body.size,
                                                          std::move(req.raw_body.keep), header_len, opt_.request_limits)
                                   : decode_infer_request(std::make_shared<std::string>(std::move(req.body)),
                                                          header_len, opt_.request_limits);
  decode_range.reset();
  if (!decoded.ok()) {
    const Status& s = decoded.status();
    // glibc keeps what a large refused request freed (the body, the JSON it began to build) in
    // its heap; handing it back keeps a refusal from leaving the server larger.
    if (body_size >= kTrimAfterRefusalBytes) malloc_trim(0);
    // The decoder's out-of-memory is the per-request limit: the request can never fit (413);
    // Unavailable is the server-wide budget (503, retry later).
    v->stats->record_request(false, now_ns() - t_start, 0, 0, 0, 0, 0,
                             s.code() == StatusCode::kUnavailable ? FailReason::kRejected : FailReason::kOther);
    done(HttpResponse::error(s.code() == StatusCode::kOutOfMemory ? 413 : http_status_for(s), s.message()));
    return;
  }
  std::shared_ptr<WireTimes> wire;  // only when tracing: the network stages of a sampled request
  if (tracer_) {
    wire = std::make_shared<WireTimes>();
    wire->received_ns = req.received_ns;
  }
  submit_infer(std::move(v), std::move(decoded).value(), t_start, [done, wire](Result<InferReply> r) {
    HttpResponse resp;
    if (!r.ok()) {
      resp = HttpResponse::error(http_status_for(r.status()), r.status().message());
    } else {
      // Binary outputs go out from the output tensors themselves (no copy into the body).
      EncodedResponse enc = encode_infer_response(r->meta, r->outputs, r->binary, r->shm, /*binary_tail=*/true);
      resp.status = 200;
      resp.body = std::move(enc.body);
      for (Tensor& t : enc.tail)
        if (t.nbytes()) resp.tail.push_back({t.raw(), t.nbytes(), std::shared_ptr<const void>(t.storage(), t.raw())});
      if (enc.binary) {
        resp.content_type = "application/octet-stream";
        resp.headers.emplace_back("Inference-Header-Content-Length", std::to_string(enc.json_length));
      }
    }
    if (wire && wire->sent)  // a traced request: its trace is recorded once the answer is out
      resp.on_written = [wire, ready = now_ns()](uint64_t written) {
        if (auto sent = std::exchange(wire->sent, nullptr)) sent(ready, written);
      };
    done(std::move(resp));
  }, wire);
}

void InferenceServer::submit_infer(std::shared_ptr<LoadedVersion> v, InferRequest&& ir, uint64_t t_start,
                                   InferDone done, std::shared_ptr<WireTimes> wire) {
  auto fail = [&](const Status& s, FailReason reason) {
    v->stats->record_request(false, now_ns() - t_start, 0, 0, 0, 0, 0, reason);
    done(s);
  };
  if (shutting_down_) return fail(Status::Unavailable("server is shutting down"), FailReason::kRejected);
  // The rest of "decode" (the trace's first stage runs from t_start to the batcher hand-off).
  std::optional<NvtxRange> decode_range(std::in_place, "serve decode");
  std::vector<std::pair<std::string, ShmRef>> shm_used;  // checked again once the request ran
  for (auto& in : ir.inputs) {
    if (!in.shm) continue;
    shm_used.emplace_back(in.name, *in.shm);
    auto t = shm_.read_input(in.name, *in.shm, in.dtype, in.shape);
    if (!t.ok()) return fail(t.status(), FailReason::kOther);
    in.tensor = std::move(t).value();
  }
  auto inputs = arrange_inputs(*v, ir.inputs);
  if (!inputs.ok()) return fail(inputs.status(), FailReason::kOther);
  auto plan = plan_outputs(*v, ir);
  if (!plan.ok()) return fail(plan.status(), FailReason::kOther);
  for (size_t i = 0; i < plan->shm.size(); ++i)
    if (plan->shm[i]) {
      if (Status s = shm_.check_output(plan->name[i], *plan->shm[i]); !s.ok()) return fail(s, FailReason::kOther);
      shm_used.emplace_back(plan->name[i], *plan->shm[i]);
    }
  decode_range.reset();

  const uint64_t t_submit = now_ns();
  const bool traced = tracer_ && tracer_->sample();
  BatchRequest br;
  br.inputs = std::move(inputs).value();
  br.timeout_us = ir.timeout_us;
  br.priority = ir.priority;
  ResponseMeta meta{v->name, v->version_str, ir.id};
  pending_++;
  v->stats->pending++;
  // Counted first, then checked: shutdown() sets shutting_down_ before it reads pending_, so
  // either it waits for this request or the request sees the flag here and is refused. (Checked
  // only at the top, a request decoded while shutdown() passed its drain wait reached a stopped
  // batcher and answered into a connection the HTTP server had already torn down.)
  if (shutting_down_) {
    v->stats->pending--;
    if (--pending_ == 0) {
      std::lock_guard<std::mutex> lk(drain_mu_);
      drain_cv_.notify_all();
    }
    return fail(Status::Unavailable("server is shutting down"), FailReason::kRejected);
  }
  auto stats = v->stats;
  // memory_hold: the decoded tensors stay in the in-flight budget until the answer is out.
  br.done = [this, done, meta = std::move(meta), plan = std::move(plan).value(), stats, t_start, t_submit, traced, wire,
             hold = std::move(ir.memory_hold), shm_used = std::move(shm_used)](Result<std::vector<Tensor>> out, const Timing& t) mutable {
    const uint64_t t_answer = now_ns();
    std::optional<NvtxRange> encode_range(std::in_place, "serve encode");
    Result<InferReply> reply = Status::Internal("no reply");
    const std::string model = traced ? meta.model_name : std::string();  // meta moves into the reply
    if (!out.ok()) {
      bool rejected = out.status().code() == StatusCode::kUnavailable;
      stats->record_request(false, now_ns() - t_start, t.queue_ns, t.compute_input_ns, t.compute_infer_ns,
                            t.compute_output_ns, 0, rejected ? FailReason::kRejected : FailReason::kBackend);
      reply = out.status();
    } else {
      InferReply r;
      r.meta = std::move(meta);
      r.binary = plan.binary;
      r.shm = plan.shm;
      Status written;
      for (size_t i = 0; i < plan.index.size(); ++i) {
        Tensor o = (*out)[plan.index[i]];
        if (plan.client_dims[i] && o.rank() > 0) {
          Shape s = *plan.client_dims[i];
          s.insert(s.begin(), o.dim(0));
          if (auto rs = o.reshaped(s); rs.ok()) o = std::move(rs).value();
        }
        if (plan.shm[i] && written.ok()) written = shm_.write_output(plan.name[i], *plan.shm[i], o);
        r.outputs.emplace_back(plan.name[i], std::move(o));
      }
      // A client that shrank a region's object while the request ran: what was read or written
      // there was not its data (the server survived the fault; the answer is an error).
      if (written.ok() && !shm_used.empty()) written = shm_.intact(shm_used);
      stats->record_request(written.ok(), now_ns() - t_start, t.queue_ns, t.compute_input_ns, t.compute_infer_ns,
                            t.compute_output_ns, written.ok() ? t.batch_rows : 0);
      if (written.ok())
        reply = std::move(r);
      else
        reply = written;
    }
    const bool ok = reply.ok();
    hold.reset();  // before the answer: a client that has it may send the next request at once
    RequestMoments moments{wire ? wire->received_ns : 0, t_start, t_submit, t_answer, 0, 0};
    if (traced && wire)  // the protocol tells when its answer is out (network out), then it is recorded
      wire->sent = [this, model, moments, t, ok](uint64_t ready, uint64_t written) mutable {
        moments.encoded_ns = ready;
        moments.written_ns = written;
        tracer_->record(model, moments, t, ok);
      };
    // The gauge first: a client that has its answer and reads /metrics sees it no longer pending.
    stats->pending--;
    done(std::move(reply));  // encodes it for its protocol (HTTP JSON/binary, gRPC) and hands it over
    encode_range.reset();
    if (traced && !wire) {
      RequestMoments m = moments;
      m.encoded_ns = now_ns();
      tracer_->record(model, m, t, ok);
    }
    if (--pending_ == 0) {
      std::lock_guard<std::mutex> lk(drain_mu_);
      drain_cv_.notify_all();
    }
  };
  Status s = v->batcher->submit(std::move(br));
  if (!s.ok()) {
    v->stats->pending--;
    if (--pending_ == 0) {
      std::lock_guard<std::mutex> lk(drain_mu_);
      drain_cv_.notify_all();
    }
    fail(s, s.code() == StatusCode::kUnavailable ? FailReason::kRejected : FailReason::kOther);
  }
}

}  // namespace gpuopt::server
