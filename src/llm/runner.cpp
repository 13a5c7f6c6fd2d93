// ModelRunner's defaults: sampling on the host after step(), and the decode roofline's byte count.
#include "llm/runner.h"

namespace gpuopt::llm {

Status ModelRunner::step_sample(const StepBatch& batch, const std::vector<const SamplingParams*>& params,
                                const std::vector<uint64_t>& seeds,
                                const std::vector<const std::vector<int64_t>*>& prompts,
                                const std::vector<const std::vector<int64_t>*>& outputs,
                                const std::vector<int64_t>& steps, std::vector<SampledToken>* out) {
  std::vector<float> logits;
  GPUOPT_RETURN_IF_ERROR(step(batch, &logits));
  const int64_t vocab = config().vocab_size;
  const size_t n = logits.size() / static_cast<size_t>(vocab);
  if (params.size() != n || seeds.size() != n || prompts.size() != n || outputs.size() != n || steps.size() != n)
    return Status::Internal(
        "step_sample: {} sampling sequences but {} params, {} seeds, {} prompts, {} outputs, {} steps", n,
        params.size(), seeds.size(), prompts.size(), outputs.size(), steps.size());
  out->clear();
  out->reserve(n);
  for (size_t i = 0; i < n; ++i)
    out->push_back(sample_cpu(logits.data() + i * static_cast<size_t>(vocab), vocab, *params[i], seeds[i], *prompts[i],
                              *outputs[i], steps[i]));
  return Status::Ok();
}

Status ModelRunner::hidden_states(const StepBatch&, std::vector<float>*) {
  return Status::Unimplemented("this model runner does not return hidden states (no decoder embeddings on it)");
}

int64_t ModelRunner::decode_bytes(int batch, int64_t context) const {
  // Every weight once (the embedding table only when it doubles as the LM head: a decode step
  // reads just `batch` rows of it otherwise), plus each sequence's K and V.
  const LlmConfig& c = config();
  int64_t params = c.num_params();
  if (!c.tie_word_embeddings) params -= c.vocab_size * c.hidden_size;
  const int64_t es = static_cast<int64_t>(dtype_size(c.dtype));
  return params * es + static_cast<int64_t>(batch) * context * c.kv_bytes_per_token(c.dtype);
}

#if !GPUOPT_HAVE_CUDA
Result<std::unique_ptr<ModelRunner>> make_cuda_runner(const LlmConfig&, const Checkpoint&, const RunnerOptions&) {
  return Status::Unavailable("gpuopt was built without CUDA: use --device cpu");
}
#endif

}  // namespace gpuopt::llm
