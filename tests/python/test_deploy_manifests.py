"""deploy/ checked offline, as CI can (no cluster, no registry): every YAML file parses; each
overlay renders with `kubectl kustomize`; every object validates against the Kubernetes OpenAPI
schema of its kind (or its CRD's schema); labels and selectors tie the objects together; the
probes, ports and flags are the ones `gpuopt serve` and `gpuopt exporter` really have; the
shutdown timings nest (preStop + drain < grace period)."""
import glob
import os
import re
import shlex
import subprocess
import time
import urllib.request

import pytest

from gpuopt_cli import gpuopt_bin as gpuopt_bin_
from deploy_fixtures import (DEPLOY, KUBE, OVERLAYS, ROOT, flags_in_help, gpuopt_help, kserve_objects,
                             load_yaml_docs, render, validate_object)

WORKLOADS = ("Deployment", "DaemonSet")


def all_yaml_files():
    return sorted(glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True))


def test_every_yaml_file_parses():
    files = all_yaml_files()
    assert len(files) >= 20, files
    for p in files:
        docs = load_yaml_docs(p)
        assert docs, f"{p}: empty"


def test_kustomizations_name_existing_files():
    for p in glob.glob(os.path.join(KUBE, "**", "kustomization.yaml"), recursive=True):
        k = load_yaml_docs(p)[0]
        d = os.path.dirname(p)
        refs = k.get("resources", []) + k.get("bases", []) + [x["path"] for x in k.get("patchesJson6902", [])]
        assert refs, p
        for r in refs:
            assert os.path.exists(os.path.join(d, r)), f"{p}: {r} does not exist"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_objects_validate_against_their_schemas(overlay):
    objs = render(overlay)
    kinds = sorted(o["kind"] for o in objs)
    want = {"Deployment", "Service", "ServiceMonitor", "HorizontalPodAutoscaler", "PersistentVolumeClaim"}
    if overlay != "cpu":
        want |= {"DaemonSet"}
    assert want <= set(kinds), kinds
    for o in objs:
        validate_object(o)
        # The images transformer reached every container.
        for c in pod_spec(o).get("containers", []) if o["kind"] in WORKLOADS else []:
            assert c["image"] == "registry.example.com/gpuopt:latest", (o["metadata"]["name"], c["image"])


def test_kserve_objects_validate_against_their_crds():
    objs = kserve_objects()
    kinds = {o["kind"] for _, o in objs}
    assert {"ServingRuntime", "ClusterServingRuntime", "InferenceService", "HorizontalPodAutoscaler", "PodMonitor"} <= kinds
    for path, o in objs:
        try:
            validate_object(o)
        except AssertionError as e:
            raise AssertionError(f"{path}: {e}") from None


def test_schema_check_catches_mistakes():
    """The validator is strict: a misspelt field or a wrong type fails, in built-ins and CRDs."""
    dep = next(o for o in render("gpu") if o["kind"] == "Deployment")
    import copy
    bad = copy.deepcopy(dep)
    bad["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(AssertionError, match="readinesProbe|Additional properties"):
        validate_object(bad)
    bad = copy.deepcopy(dep)
    bad["spec"]["replicas"] = "two"
    with pytest.raises(AssertionError, match="replicas"):
        validate_object(bad)
    sm = next(o for o in render("gpu") if o["kind"] == "ServiceMonitor")
    bad = copy.deepcopy(sm)
    bad["spec"]["endpoints"][0]["intervall"] = "15s"
    with pytest.raises(AssertionError, match="intervall|Additional properties"):
        validate_object(bad)
    isvc = next(o for _, o in kserve_objects() if o["kind"] == "InferenceService")
    bad = copy.deepcopy(isvc)
    bad["spec"]["predictor"]["model"]["storageURI"] = "s3://x"
    with pytest.raises(AssertionError, match="storageURI|Additional properties"):
        validate_object(bad)


def pod_spec(o):
    return o["spec"]["template"]["spec"]


def pod_labels(o):
    return o["spec"]["template"]["metadata"]["labels"]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_labels_and_selectors_are_consistent(overlay):
    objs = render(overlay)
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    workloads = [o for o in objs if o["kind"] in WORKLOADS]
    for w in workloads:
        sel = w["spec"]["selector"]["matchLabels"]
        assert matches(sel, pod_labels(w)), f"{w['metadata']['name']}: selector does not match its own pods"
        others = [x for x in workloads if x is not w]
        assert not any(matches(sel, pod_labels(x)) for x in others), f"{w['metadata']['name']}: selector overlaps"
        for t in pod_spec(w).get("topologySpreadConstraints", []):
            assert matches(t["labelSelector"]["matchLabels"], pod_labels(w))
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod_spec(w).get("volumes", [])
                  if "persistentVolumeClaim" in v]
        pvcs = {p["metadata"]["name"] for p in by_kind.get("PersistentVolumeClaim", [])}
        assert set(claims) <= pvcs, (claims, pvcs)
        mounts = {m["name"] for c in pod_spec(w)["containers"] for m in c.get("volumeMounts", [])}
        assert mounts <= {v["name"] for v in pod_spec(w).get("volumes", [])}
    services = by_kind["Service"]
    for s in services:
        selected = [w for w in workloads if matches(s["spec"]["selector"], pod_labels(w))]
        assert len(selected) == 1, f"Service {s['metadata']['name']} selects {len(selected)} workloads"
        ports = {p["name"]: p["containerPort"] for c in pod_spec(selected[0])["containers"] for p in c["ports"]}
        for p in s["spec"]["ports"]:
            assert p["targetPort"] in ports, f"Service {s['metadata']['name']}: targetPort {p['targetPort']}"
            assert p["port"] == ports[p["targetPort"]]
    for m in by_kind["ServiceMonitor"]:
        svc = [s for s in services if matches(m["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
        assert len(svc) == 1, f"ServiceMonitor {m['metadata']['name']} selects {len(svc)} Services"
        names = {p["name"] for p in svc[0]["spec"]["ports"]}
        for e in m["spec"]["endpoints"]:
            assert e["port"] in names
            assert e["path"] == "/metrics"
    for h in by_kind["HorizontalPodAutoscaler"]:
        ref = h["spec"]["scaleTargetRef"]
        assert any(w["kind"] == ref["kind"] and w["metadata"]["name"] == ref["name"] for w in workloads), ref
        assert h["spec"]["minReplicas"] <= h["spec"]["maxReplicas"]


def serve_container(overlay):
    dep = next(o for o in render(overlay) if o["kind"] == "Deployment")
    return dep, pod_spec(dep)["containers"][0]


def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def probe_port(c, probe):
    port = c[probe]["httpGet"]["port"]
    if isinstance(port, str):
        port = next(p["containerPort"] for p in c["ports"] if p["name"] == port)
    return port


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_use_the_ports_serve_listens_on(overlay):
    dep, c = serve_container(overlay)
    env = env_of(c)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    # The entrypoint passes these to `gpuopt serve` (tests/python/test_deploy_entrypoint.py runs it).
    assert ports["http"] == int(env["GPUOPT_HTTP_PORT"])
    assert ports["metrics"] == int(env["GPUOPT_METRICS_PORT"])
    assert ports["grpc"] == int(env["GPUOPT_GRPC_PORT"])
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert probe_port(c, probe) == int(env["GPUOPT_HTTP_PORT"]), probe
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    # preStop, then the drain: both inside the grace period, with a margin for the process exit.
    pre = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre[0] == "sleep"
    grace = pod_spec(dep)["terminationGracePeriodSeconds"]
    assert int(pre[1]) + int(env["GPUOPT_EXIT_TIMEOUT_SECS"]) + 5 <= grace


def test_kserve_runtime_ports_and_probe():
    for path, o in kserve_objects():
        if o["kind"] not in ("ServingRuntime", "ClusterServingRuntime"):
            continue
        c = o["spec"]["containers"][0]
        env = env_of(c)
        assert c["name"] == "kserve-container", path
        assert env["GPUOPT_MODEL_REPOSITORY"] == "/mnt/models", path  # where KServe's storage initializer writes
        assert c["ports"][0]["containerPort"] == int(env["GPUOPT_HTTP_PORT"]) == 8080
        assert probe_port(c, "readinessProbe") == 8080
        assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
        assert o["spec"]["annotations"]["prometheus.kserve.io/port"] == env["GPUOPT_METRICS_PORT"]
        assert "v2" in o["spec"]["protocolVersions"]
    # The PodMonitor scrapes the runtime's metrics port, on pods KServe labels as predictors.
    pm = next(o for _, o in kserve_objects() if o["kind"] == "PodMonitor")
    assert pm["spec"]["podMetricsEndpoints"][0]["portNumber"] == int(env["GPUOPT_METRICS_PORT"])
    assert pm["spec"]["selector"]["matchLabels"] == {"component": "predictor"}
    runtimes = [o for _, o in kserve_objects() if o["kind"].endswith("ServingRuntime")]
    plain = [o for o in runtimes if o["metadata"]["name"] == "gpuopt"]
    assert len(plain) == 2 and plain[0]["spec"] == plain[1]["spec"], "ServingRuntime and ClusterServingRuntime differ"
    by_name = {o["metadata"]["name"]: o for o in runtimes}
    for path, o in kserve_objects():
        if o["kind"] == "InferenceService":
            model = o["spec"]["predictor"]["model"]
            assert model["runtime"] in by_name, path
            # KServe picks the runtime only if it declares the InferenceService's model format.
            formats = {f["name"] for f in by_name[model["runtime"]]["spec"]["supportedModelFormats"]}
            assert model["modelFormat"]["name"] in formats, (path, model["modelFormat"], formats)


def test_llm_runtime_and_its_autoscaler():
    """The LLM runtime runs the same image and entrypoint as the ONNX one (same env, probes and
    ports), and its HPA scales the predictor of the LLM InferenceService on the two LLM metrics
    the Prometheus adapter serves."""
    objs = kserve_objects()
    rt = {o["metadata"]["name"]: o for _, o in objs if o["kind"] == "ServingRuntime"}
    llm, plain = rt["gpuopt-llm"]["spec"], rt["gpuopt"]["spec"]
    c, pc = llm["containers"][0], plain["containers"][0]
    assert c["image"] == pc["image"] and env_of(c) == env_of(pc)
    assert c["readinessProbe"] == pc["readinessProbe"]
    assert c["startupProbe"]["httpGet"]["path"] == "/v2/health/live" and probe_port(c, "startupProbe") == 8080
    assert {f["name"] for f in llm["supportedModelFormats"]} == {"huggingface"}
    isvc = next(o for _, o in objs if o["kind"] == "InferenceService" and o["spec"]["predictor"]["model"]["runtime"] == "gpuopt-llm")
    assert isvc["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "external"
    hpa = next(o for _, o in objs if o["kind"] == "HorizontalPodAutoscaler"
               and o["spec"]["scaleTargetRef"]["name"] == isvc["metadata"]["name"] + "-predictor")
    assert hpa["metadata"]["namespace"] == isvc["metadata"]["namespace"]
    metrics = {m["pods"]["metric"]["name"]: m["pods"]["target"] for m in hpa["spec"]["metrics"]}
    assert set(metrics) == {"gpuopt_num_requests_waiting", "gpuopt_kv_cache_usage_perc"}
    # The KV usage is a fraction: a target at or over 1 would never scale.
    kv = metrics["gpuopt_kv_cache_usage_perc"]["averageValue"]
    assert 0 < (int(kv[:-1]) / 1000 if kv.endswith("m") else float(kv)) < 1, kv


def test_every_hpa_metric_has_an_adapter_rule():
    values = load_yaml_docs(os.path.join(KUBE, "prometheus-adapter", "values.yaml"))[0]
    served = {r["name"]["as"] for r in values["rules"]["custom"]}
    hpas = [o for _, o in kserve_objects() if o["kind"] == "HorizontalPodAutoscaler"]
    hpas += [o for o in render("gpu") if o["kind"] == "HorizontalPodAutoscaler"]
    assert len(hpas) >= 3
    for h in hpas:
        for m in h["spec"]["metrics"]:
            if m["type"] == "Pods":
                name = m["pods"]["metric"]["name"]
                assert name in served, f"HPA {h['metadata']['name']} scales on {name}, which no adapter rule serves"
    for r in values["rules"]["custom"]:
        series = re.match(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)", r["seriesQuery"]).group(1)
        assert re.fullmatch(r["name"]["matches"].strip("^$"), series), r["name"]


def test_manifest_env_is_read_by_the_entrypoint():
    with open(os.path.join(DEPLOY, "entrypoint.sh")) as f:
        entry = f.read()
    envs = set()
    for o in render("gpu"):
        if o["kind"] == "Deployment":
            envs |= set(env_of(pod_spec(o)["containers"][0]))
    for _, o in kserve_objects():
        if o["kind"].endswith("ServingRuntime"):
            envs |= set(env_of(o["spec"]["containers"][0]))
    assert envs
    for e in envs:
        assert e in entry, f"{e} is set in the manifests but deploy/entrypoint.sh never reads it"


def test_exporter_args_are_real_flags_and_its_probe_answers(tmp_path):
    ds = next(o for o in render("gpu") if o["kind"] == "DaemonSet")
    c = pod_spec(ds)["containers"][0]
    args = c["args"]
    assert args[0] == "exporter"
    flags = flags_in_help(gpuopt_help("exporter"))
    for a in args[1:]:
        if a.startswith("--"):
            assert a.split("=")[0] in flags, f"DaemonSet passes {a}, which `gpuopt exporter` does not have"
    listen = args[args.index("--listen") + 1]
    port = int(listen.rsplit(":", 1)[1])
    assert c["ports"][0]["containerPort"] == port
    assert probe_port(c, "livenessProbe") == port
    sock = args[args.index("--pod-resources-socket") + 1]
    mount = next(m for m in c["volumeMounts"] if m["name"] == "pod-resources")
    assert os.path.dirname(sock) == mount["mountPath"]
    host = next(v for v in pod_spec(ds)["volumes"] if v["name"] == "pod-resources")
    assert host["hostPath"]["path"] == mount["mountPath"]
    # A missing socket (the hostPath mount forgotten) is one line and exit 1, before serving.
    r = subprocess.run([gpuopt_bin_(), "exporter", "--listen", "127.0.0.1:0", "--pod-resources-socket",
                        "/nonexistent/pod-resources/kubelet.sock"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "'/nonexistent/pod-resources/kubelet.sock'" in r.stderr, r.stderr
    # The probe's path answers 200 on a real exporter (no NVML here: it still serves /health).
    from gpuopt_cli import gpuopt_bin
    from monitor_fixtures import free_port, wait_http
    p = free_port()
    env = dict(os.environ, GPUOPT_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    proc = subprocess.Popen([gpuopt_bin(), "exporter", "--listen", f"127.0.0.1:{p}"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_http(f"http://127.0.0.1:{p}{c['livenessProbe']['httpGet']['path']}", deadline_s=30, proc=proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{p}{c['readinessProbe']['httpGet']['path']}", timeout=5) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_answers_the_probe_paths(tmp_path):
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
    import server_harness as H
    H.make_repository(str(tmp_path))
    _, c = serve_container("gpu")
    with H.Server(["--model-repository", str(tmp_path)]) as s:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            with urllib.request.urlopen(f"http://{s.url}{c[probe]['httpGet']['path']}", timeout=10) as r:
                assert r.status == 200, probe
        with urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=10) as r:
            assert b"nv_inference_pending_request_count" in r.read()
        code, _, out = s.stop()
        assert code == 0, out


def dockerfile_instructions():
    """(instruction, argument) pairs of deploy/Dockerfile, continuation lines joined."""
    with open(os.path.join(DEPLOY, "Dockerfile")) as f:
        text = f.read()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        ins, _, arg = line.partition(" ")
        out.append((ins.upper(), arg.strip()))
    return out


def test_dockerfile_paths_and_options_exist():
    ins = dockerfile_instructions()
    froms = [a for i, a in ins if i == "FROM"]
    assert len(froms) == 2 and "cudnn-devel" in froms[0] and "cudnn-runtime" in froms[1], froms
    for i, a in ins:
        if i == "COPY" and "--from=" not in a:
            for src in [w for w in shlex.split(a)[:-1] if not w.startswith("--")]:
                assert os.path.exists(os.path.join(ROOT, src)), f"Dockerfile COPY {src}: no such path"
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        cmake = f.read()
    for i, a in ins:
        if i == "RUN" and "cmake -S" in a:
            for opt in re.findall(r"-D(GPUOPT_[A-Z_]+)=", a):
                assert re.search(rf"\b{opt}\b", cmake), f"Dockerfile sets -D{opt}, which CMakeLists.txt does not know"
            assert "--target gpuopt" in a
    run = dict(ins)
    assert run["USER"].split(":")[0] not in ("0", "root"), "the image must not run as root"
    assert run["STOPSIGNAL"] == "SIGTERM"
    assert run["VOLUME"] == '["/models"]'
    assert set(run["EXPOSE"].split()) == {"8000", "8001", "8002"}
    assert "/v2/health/ready" in run["HEALTHCHECK"]
    assert run["ENTRYPOINT"] == '["/opt/gpuopt/bin/gpuopt-entrypoint"]'
    env = dict(re.findall(r"(GPUOPT_[A-Z_]+)=(\S+)", " ".join(a for i, a in ins if i == "ENV")))
    assert env["GPUOPT_MODEL_REPOSITORY"] == "/models"
    assert (env["GPUOPT_HTTP_PORT"], env["GPUOPT_GRPC_PORT"], env["GPUOPT_METRICS_PORT"]) == ("8000", "8001", "8002")
    # The drain ends before Kubernetes' default grace period (30 s) would SIGKILL.
    assert int(env["GPUOPT_EXIT_TIMEOUT_SECS"]) < 30


def test_entrypoint_flags_exist_in_serve_help():
    with open(os.path.join(DEPLOY, "entrypoint.sh")) as f:
        script = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("#"))
    serve_flags = flags_in_help(gpuopt_help("serve"))
    named = set(re.findall(r"(--[a-z][a-z0-9-]+)", script)) - {"--help"}
    assert {"--model-repository", "--http-port", "--metrics-port", "--exit-timeout-secs"} <= named
    for flag in named:
        if flag in serve_flags:
            continue
        # Passed only where this gpuopt has it: the script must ask `serve --help` first.
        assert re.search(rf"serve --help .*grep -q -- '{flag}'", script), f"entrypoint passes {flag} unguarded"


def test_dockerfile_build_context_configures(tmp_path):
    """The build stage sees only what it COPYs: that subset alone configures (CMake, tests off as
    in the image; CUDA off here, so it runs on CI's machine in seconds)."""
    import shutil
    ins = dockerfile_instructions()
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    for i, a in ins:
        if i == "COPY" and "--from=" not in a:
            words = [w for w in shlex.split(a) if not w.startswith("--")]
            for src in words[:-1]:
                if src.startswith("deploy/"):
                    continue  # copied after the build, into the image
                s = os.path.join(ROOT, src)
                (shutil.copytree if os.path.isdir(s) else shutil.copy)(s, ctx / src.rstrip("/"))
    r = subprocess.run(["cmake", "-S", str(ctx), "-B", str(tmp_path / "b"), "-DGPUOPT_CUDA=OFF",
                        "-DGPUOPT_BUILD_TESTS=OFF"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
