// CudaRunner::step_sample: the step's logits stay on the GPU and are reduced there to one token
// (and its logprob) per sampling sequence by llmkern's argmax/sample kernels; only those few
// bytes come back. Requests the kernels do not cover here (penalties, which need the token
// histories on the device, and top-n logprobs) take the default path: logits to the host and
// sample_cpu.
#include <algorithm>

#include "llm/cuda/cuda_runner.h"
#include "llm/kernels/llm_kernels.h"

namespace gpuopt::llm::cuda {

Status CudaRunner::step_sample(const StepBatch& b, const std::vector<const SamplingParams*>& params,
                               const std::vector<uint64_t>& seeds,
                               const std::vector<const std::vector<int64_t>*>& prompts,
                               const std::vector<const std::vector<int64_t>*>& outputs,
                               const std::vector<int64_t>& steps, std::vector<SampledToken>* out) {
  const size_t n =
      static_cast<size_t>(std::count_if(b.seqs.begin(), b.seqs.end(), [](const StepSeq& s) { return s.sample; }));
  if (params.size() != n || seeds.size() != n || prompts.size() != n || outputs.size() != n || steps.size() != n)
    return Status::InvalidArgument(
        "step_sample: {} sampling sequences but {} params, {} seeds, {} prompts, {} outputs, {} steps", n,
        params.size(), seeds.size(), prompts.size(), outputs.size(), steps.size());
  const bool on_device = std::all_of(params.begin(), params.end(), [](const SamplingParams* p) {
    return p->repetition_penalty == 1.0 && p->presence_penalty == 0.0 && p->frequency_penalty == 0.0 &&
           p->logprobs == 0;
  });
  if (!on_device) return ModelRunner::step_sample(b, params, seeds, prompts, outputs, steps, out);
  GPUOPT_RETURN_IF_ERROR(launch(b));
  out->clear();
  if (n == 0) return cuda_status(cudaStreamSynchronize(stream_), "finishing a step");
  const int64_t V = cfg_.vocab_size;
  int32_t* tok = sampled_.as<int32_t>();
  float* lp = reinterpret_cast<float*>(tok + opts_.max_batch);
  const bool greedy =
      std::all_of(params.begin(), params.end(), [](const SamplingParams* p) { return p->temperature <= 0; });
  if (greedy) {
    argmax_rows(logits_.as<float>(), static_cast<int64_t>(n), V, V, tok, lp, stream_);
  } else {
    SampleRowParams* hp = sample_params_host_.as<SampleRowParams>();
    for (size_t i = 0; i < n; ++i) {
      const SamplingParams& p = *params[i];
      SampleRowParams r;
      r.temperature = static_cast<float>(p.temperature);
      r.top_p = static_cast<float>(p.top_p);
      r.min_p = static_cast<float>(p.min_p);
      r.top_k = static_cast<int32_t>(std::min<int64_t>(p.top_k, V));
      r.seed = seeds[i];
      r.counter_hi = static_cast<uint64_t>(steps[i]);  // sample_cpu's philox_uniform(seed, step, 0)
      r.counter_lo = 0;
      hp[i] = r;
    }
    GPUOPT_CUDA_RETURN(
        cudaMemcpyAsync(sample_params_.get(), hp, n * sizeof(SampleRowParams), cudaMemcpyHostToDevice, stream_));
    sample_rows(logits_.as<float>(), static_cast<int64_t>(n), V, V, sample_params_.as<SampleRowParams>(), nullptr,
                nullptr, tok, lp, stream_);
  }
  GPUOPT_CUDA_RETURN(cudaGetLastError());
  int32_t* htok = sampled_host_.as<int32_t>();
  float* hlp = reinterpret_cast<float*>(htok + opts_.max_batch);
  // Tokens then logprobs are one span of the buffer: one copy back.
  GPUOPT_CUDA_RETURN(
      cudaMemcpyAsync(htok, tok, (static_cast<size_t>(opts_.max_batch) + n) * 4, cudaMemcpyDeviceToHost, stream_));
  GPUOPT_CUDA_RETURN(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < n; ++i) out->push_back({htok[i], hlp[i], {}});
  return Status::Ok();
}

}  // namespace gpuopt::llm::cuda
