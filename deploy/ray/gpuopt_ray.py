"""gpuopt serve as the replica process of a Ray Serve deployment: one gpuopt per GPU (num_gpus=1;
Ray sets CUDA_VISIBLE_DEVICES for the replica and gpuopt inherits it), requests forwarded as they
come (KServe v2 paths, JSON or binary tensors), so tritonclient and curl talk to Ray's HTTP proxy
as they would to gpuopt. docs/deploy.md#ray and deploy/ray/README.md.

    cd deploy/ray && GPUOPT_MODEL_REPOSITORY=/models serve run gpuopt_ray:app   # or: python3 gpuopt_ray.py

`GpuoptProcess` is the part that is ours and needs no Ray: tests/python/test_deploy_ray.py runs it
against a real repository; the Ray deployment around it runs only where Ray is installed.
"""
import http.client
import os
import shutil
import signal
import socket
import subprocess
import time

# Headers worth passing on: the v2 binary-tensor extension's and the content type.
FORWARDED = ("content-type", "inference-header-content-length", "accept")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GpuoptProcess:
    """A `gpuopt serve` child on 127.0.0.1 (free ports), ready when the constructor returns."""

    def __init__(self, model_repository, gpuopt=None, extra_args=(), ready_timeout_s=600):
        self.binary = gpuopt or os.environ.get("GPUOPT_BIN") or shutil.which("gpuopt") or "/opt/gpuopt/bin/gpuopt"
        if not os.path.isdir(model_repository):
            raise ValueError(f"model repository '{model_repository}' is not a directory")
        self.http_port, self.metrics_port = _free_port(), _free_port()
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--model-repository", model_repository, "--http-address", "127.0.0.1",
             "--http-port", str(self.http_port), "--metrics-port", str(self.metrics_port), *extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + ready_timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gpuopt serve exited with {self.proc.returncode}: {self.proc.stderr.read().strip()}")
            try:
                if self.forward("GET", "/v2/health/ready", {}, b"")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"gpuopt serve not ready within {ready_timeout_s} s")

    def forward(self, method, path, headers, body, timeout_s=60):
        """One request to the child; returns (status, headers to pass back, body)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=timeout_s)
        try:
            hdrs = {k: v for k, v in headers.items() if k.lower() in FORWARDED}
            conn.request(method, path, body=body or None, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            back = {k: v for k, v in r.getheaders() if k.lower() in FORWARDED}
            return r.status, back, data
        finally:
            conn.close()

    def stop(self, timeout_s=30):
        """SIGTERM: gpuopt drains what it holds and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


try:  # The Ray Serve deployment, where Ray is installed (pip install "ray[serve]").
    import asyncio

    from ray import serve
    from starlette.requests import Request
    from starlette.responses import Response
except ImportError:  # pragma: no cover - Ray is optional
    serve = None

if serve is not None:

    @serve.deployment(
        ray_actor_options={"num_gpus": float(os.environ.get("GPUOPT_RAY_GPUS", "1"))},
        autoscaling_config={"min_replicas": 1, "max_replicas": int(os.environ.get("GPUOPT_RAY_MAX_REPLICAS", "4")),
                            "target_ongoing_requests": 32},
        max_ongoing_requests=256,
    )
    class GpuoptDeployment:
        def __init__(self, model_repository):
            self.gpuopt = GpuoptProcess(model_repository)

        async def __call__(self, request: Request) -> Response:
            body = await request.body()
            status, headers, data = await asyncio.to_thread(
                self.gpuopt.forward, request.method, request.url.path, dict(request.headers), body)
            return Response(content=data, status_code=status, headers=headers)

        def __del__(self):
            self.gpuopt.stop()

    app = GpuoptDeployment.bind(os.environ.get("GPUOPT_MODEL_REPOSITORY", "/models"))

if __name__ == "__main__":
    if serve is None:
        raise SystemExit("gpuopt_ray: Ray is not installed (pip install \"ray[serve]\")")
    serve.run(app, route_prefix="/")
    print("gpuopt on Ray Serve: http://127.0.0.1:8000/v2/health/ready; Ctrl-C stops")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
