"""The dashboard's serving panels and the Prometheus adapter's rules, run in a real Prometheus that
scrapes a real `gpuopt serve` under load (tritonclient, some bad requests) and a `gpuopt exporter`
over the fake NVML: every metric a panel or rule names is one the two processes really export,
every serving query returns data, and the adapter's two HPA metrics equal what the server's own
counters say. The Grafana provisioning files point at the dashboard."""
import json
import os
import re
import sys
import threading
import time

import numpy as np
import pytest

from deploy_fixtures import DEPLOY, KUBE, ROOT, load_yaml_docs
from monitor_fixtures import (Env, free_port, gpu, http_get, prom_query, prometheus_or_skip, start_exporter,
                              start_prometheus, stop, stop_prometheus)

sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import server_harness as H  # noqa: E402

SERVING = re.compile(r"\b(nv_inference|gpuopt_inference)_")
NAMESPACE, POD = "ml", "gpuopt-7d9f-abcde"


def dashboard():
    with open(os.path.join(DEPLOY, "grafana", "gpuopt-dashboard.json")) as f:
        return json.load(f)


def panel_exprs(d):
    return [(p["title"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]


def families(text):
    """Metric names a /metrics body exports, histograms with their _bucket/_sum/_count series."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()[:4]
            names.add(name)
            if kind == "histogram":
                names |= {name + "_bucket", name + "_sum", name + "_count"}
    return names


def metric_names(expr):
    return set(re.findall(r"\b((?:nv|gpuopt|DCGM_FI)_[A-Za-z0-9_]+)\b", expr))


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    prom_bin = prometheus_or_skip()
    httpclient = pytest.importorskip("tritonclient.http")
    repo = tmp_path_factory.mktemp("repo")
    H.make_repository(str(repo), delay_us=20000)
    server = H.Server(["--model-repository", str(repo)])
    env = Env({"devices": [gpu(0, 55, 4000, 300.0, {"processes": [{"pid": 4242, "used_memory": 1 << 30}]})]})
    exp_port = free_port()
    exporter = start_exporter(env, exp_port, "--interval", "250ms")
    prom = None
    try:
        prom, base, data = start_prometheus(prom_bin, env.dir, f"""  - job_name: serve
    static_configs:
      - targets: ['127.0.0.1:{server.metrics_port}']
        labels: {{namespace: {NAMESPACE}, pod: {POD}}}
  - job_name: exporter
    static_configs:
      - targets: ['127.0.0.1:{exp_port}']
""")
        # A first scrape of the idle server, so every counter's first sample in Prometheus is 0
        # (the adapter check below compares rates with raw increases: no extrapolation then).
        end = time.time() + 60
        while time.time() < end and not prom_query(base, 'gpuopt_inference_queue_duration_us_count{model="simple"}'):
            time.sleep(0.2)
        # Load: 8 clients for ~6 s on the batched model (20 ms queue delay: batches form, requests
        # wait), plus requests with a wrong shape (failures, reason OTHER).
        stop_at = time.time() + 6
        errors = []

        def client(seed):
            c = httpclient.InferenceServerClient(server.url)
            rng = np.random.default_rng(seed)
            while time.time() < stop_at:
                a = rng.standard_normal((1, 16)).astype(np.float32)
                ins = [httpclient.InferInput("INPUT0", a.shape, "FP32"), httpclient.InferInput("INPUT1", a.shape, "FP32")]
                ins[0].set_data_from_numpy(a)
                ins[1].set_data_from_numpy(a)
                try:
                    r = c.infer("simple", ins)
                    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + a)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

        ts = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        c = httpclient.InferenceServerClient(server.url)
        bad = np.zeros((1, 15), np.float32)
        for _ in range(5):
            ins = [httpclient.InferInput("INPUT0", bad.shape, "FP32"), httpclient.InferInput("INPUT1", bad.shape, "FP32")]
            ins[0].set_data_from_numpy(bad)
            ins[1].set_data_from_numpy(bad)
            with pytest.raises(Exception):
                c.infer("simple", ins)
        for t in ts:
            t.join()
        assert not errors, errors[:3]
        time.sleep(3)  # the last counters scraped
        yield {"base": base, "server": server, "exp_port": exp_port}
    finally:
        if prom:
            stop_prometheus(prom, data)
        stop(exporter)
        server.stop()
        env.cleanup()


def test_every_dashboard_metric_is_exported(stack):
    _, _, serve_body = http_get(f"http://127.0.0.1:{stack['server'].metrics_port}/metrics")
    _, _, exp_body = http_get(f"http://127.0.0.1:{stack['exp_port']}/metrics")
    serve_names, exp_names = families(serve_body), families(exp_body)
    d = dashboard()
    exprs = panel_exprs(d) + [(v["name"], v["definition"]) for v in d["templating"]["list"] if v["type"] == "query"]
    # GPM, ECC and XID series exist only on GPUs that report them: documented names suffice there
    # (tests/python/test_monitor_prometheus.py); every other name is exported by one of the two.
    with open(os.path.join(ROOT, "docs", "monitoring.md")) as f:
        doc = f.read()
    for title, e in exprs:
        for n in metric_names(e):
            if SERVING.search(n):
                assert n in serve_names, f"panel '{title}': {n} is not exported by gpuopt serve"
            else:
                assert n in exp_names or f"`{n}`" in doc, f"panel '{title}': {n} is neither exported nor documented"
    serving_titles = {t for t, e in exprs if SERVING.search(e)}
    for want in ("Requests/s", "p50 / p99", "Queue time", "Batch size distribution", "Failures by reason"):
        assert any(want in t for t in serving_titles), f"no serving panel '{want}'"


def test_serving_panels_return_data(stack):
    for title, e in panel_exprs(dashboard()):
        if not SERVING.search(e):
            continue
        # The model under load (an idle model's percentiles are NaN: Grafana draws a gap).
        q = e.replace("$model", "simple").replace("$Hostname", ".*").replace("$gpu", ".*")
        res = prom_query(stack["base"], q)
        assert res, f"panel '{title}': no data for {q}"
        vals = [float(r["value"][1]) for r in res]
        assert all(v == v and v >= 0 for v in vals), (title, vals)  # no NaN, nothing negative
    fails = prom_query(stack["base"], 'sum by (reason) (increase(nv_inference_request_failure{model="simple"}[1m]))')
    by_reason = {r["metric"]["reason"]: float(r["value"][1]) for r in fails}
    assert by_reason.get("OTHER", 0) > 0, by_reason
    batch = prom_query(stack["base"], 'sum(gpuopt_inference_batch_size_sum{model="simple"}) / sum(gpuopt_inference_batch_size_count{model="simple"})')
    assert float(batch[0]["value"][1]) > 1, "8 clients and a 20 ms queue delay should batch"


def adapter_rules():
    values = load_yaml_docs(os.path.join(KUBE, "prometheus-adapter", "values.yaml"))[0]
    return {r["name"]["as"]: r for r in values["rules"]["custom"]}


def expand(rule):
    """The query prometheus-adapter sends for the pods of one namespace (its Go template)."""
    series = re.match(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)", rule["seriesQuery"]).group(1)
    return (rule["metricsQuery"].replace("<<.Series>>", series)
            .replace("<<.LabelMatchers>>", f'namespace="{NAMESPACE}",pod=~"{POD}"')
            .replace("<<.GroupBy>>", "pod"))


def is_llm_rule(rule):
    return rule["seriesQuery"].lstrip().startswith("gpuopt:")


def test_adapter_rules_serve_the_hpa_metrics(stack):
    # The language-model rules need a server with an LLM: test_llm_panels_and_rules_return_data.
    rules = {k: r for k, r in adapter_rules().items() if not is_llm_rule(r)}
    hpa = next(d for d in load_yaml_docs(os.path.join(KUBE, "base", "serve-hpa.yaml")))
    wanted = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]}
    assert wanted <= set(rules), (wanted, set(rules))
    for name, r in rules.items():
        assert re.search(r["name"]["matches"], re.match(r"\s*([\w:]+)", r["seriesQuery"]).group(1)), name
        assert set(r["resources"]["overrides"]) == {"namespace", "pod"}
    base = stack["base"]
    # Both series are found by the adapter's discovery query, with the labels it maps to pods.
    for r in rules.values():
        found = prom_query(base, r["seriesQuery"])
        assert found and all(s["metric"]["pod"] == POD for s in found), r["seriesQuery"]
    # Pending requests: the server is idle now, the gauge and the rule say the same.
    pending = prom_query(base, expand(rules["gpuopt_pending_requests"]))
    assert [x["metric"]["pod"] for x in pending] == [POD]
    assert float(pending[0]["value"][1]) == sum(
        float(x["value"][1]) for x in prom_query(base, "nv_inference_pending_request_count"))
    # Queue seconds per request: the rule's rate ratio equals the histogram's own increase
    # ratio over the same minute (sum of queue microseconds / requests), read independently.
    q = prom_query(base, expand(rules["gpuopt_queue_seconds_per_request"]))
    assert [x["metric"]["pod"] for x in q] == [POD]
    got = float(q[0]["value"][1])
    t = float(q[0]["value"][0])
    raw = {}
    for suffix in ("sum", "count"):
        # The raw samples of the last minute (a range selector at the rule's evaluation time).
        res = prom_query(base, f'gpuopt_inference_queue_duration_us_{suffix}{{model="simple"}}[1m]', t)
        raw[suffix] = [float(v) for _, v in res[0]["values"]] if res else []
    assert raw["count"] and raw["count"][-1] > raw["count"][0]
    want = (raw["sum"][-1] - raw["sum"][0]) / (raw["count"][-1] - raw["count"][0]) / 1e6
    assert got == pytest.approx(want, rel=1e-6), (got, want)
    assert 0 < got < 1  # 20 ms queue delay: well under a second


def test_grafana_provisioning_points_at_the_dashboard():
    prov = load_yaml_docs(os.path.join(DEPLOY, "grafana", "provisioning", "dashboards", "gpuopt.yaml"))[0]
    assert prov["apiVersion"] == 1
    (p,) = prov["providers"]
    assert p["type"] == "file" and p["options"]["path"].startswith("/")
    ds = load_yaml_docs(os.path.join(DEPLOY, "grafana", "provisioning", "datasources", "prometheus.yaml"))[0]
    (src,) = ds["datasources"]
    assert src["type"] == "prometheus" and src["isDefault"] is True
    # The dashboard takes the default Prometheus through its $datasource variable.
    d = dashboard()
    var = next(v for v in d["templating"]["list"] if v["name"] == "datasource")
    assert var["type"] == "datasource" and var["query"] == "prometheus"
    for panel in d["panels"]:
        if "datasource" in panel:
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_dashboard_layout_is_sound():
    """Unique panel ids, panels inside the 24-column grid and not overlapping (Grafana would
    silently move them), the serving row above the GPU rows."""
    panels = dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), ids
    boxes = []
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for q, h in boxes:
            overlap = g["x"] < h["x"] + h["w"] and h["x"] < g["x"] + g["w"] and g["y"] < h["y"] + h["h"] and h["y"] < g["y"] + g["h"]
            assert not overlap, f"panels '{p['title']}' and '{q}' overlap"
        boxes.append((p["title"], g))
    rows = [(p["gridPos"]["y"], p["title"]) for p in panels if p["type"] == "row"]
    assert sorted(rows)[0][1].startswith("Serving"), rows


# ---- language models -------------------------------------------------------------------------

# vLLM's serving metrics under the gpuopt: prefix (issue 38), labelled model_name, by type.
LLM_METRICS = {
    "gpuopt:num_requests_running": "gauge", "gpuopt:num_requests_waiting": "gauge",
    "gpuopt:kv_cache_usage_perc": "gauge", "gpuopt:num_preemptions_total": "counter",
    "gpuopt:prompt_tokens_total": "counter", "gpuopt:generation_tokens_total": "counter",
    "gpuopt:prefix_cache_queries_total": "counter", "gpuopt:prefix_cache_hits_total": "counter",
    "gpuopt:time_to_first_token_seconds": "histogram", "gpuopt:inter_token_latency_seconds": "histogram",
    "gpuopt:e2e_request_latency_seconds": "histogram", "gpuopt:request_queue_time_seconds": "histogram",
}
LLM_NAME = re.compile(r"\b(gpuopt:[a-z0-9_]+)")


def llm_series(name):
    """What a query may select of a metric: a histogram's _bucket/_sum/_count, the rest as is."""
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    if LLM_METRICS.get(base) == "histogram" and base != name:
        return base
    return name if name in LLM_METRICS and LLM_METRICS[name] != "histogram" else None


def llm_panels():
    d = dashboard()
    rows = sorted((p["gridPos"]["y"], p["title"]) for p in d["panels"] if p["type"] == "row")
    (y0, _), = [(y, t) for y, t in rows if t.startswith("Language models")]
    y1 = min([y for y, _ in rows if y > y0], default=10**9)
    return [p for p in d["panels"] if y0 < p["gridPos"]["y"] < y1]


def test_llm_panels_query_the_llm_metrics():
    """The language-model row: every name is one of the LLM metrics used as its type allows (a
    histogram through its buckets, a counter through rate), every query filtered by the
    dashboard's $llm_model variable on model_name, and every metric shown somewhere."""
    panels = llm_panels()
    assert len(panels) >= 6
    seen = set()
    for p in panels:
        assert p["datasource"]["uid"] == "${datasource}"
        for t in p["targets"]:
            e = t["expr"]
            names = LLM_NAME.findall(e)
            assert names, (p["title"], e)
            for n in names:
                base = llm_series(n)
                assert base, f"panel '{p['title']}': {n} is not an LLM metric (or a histogram used without _bucket/_sum/_count)"
                seen.add(base)
                if LLM_METRICS[base] == "counter" or n.endswith(("_sum", "_count")):
                    assert re.search(rf"(rate|increase)\({re.escape(n)}\{{", e), (p["title"], e)
                if n.endswith("_bucket"):
                    assert "histogram_quantile(" in e and "sum by (le, model_name)" in e, (p["title"], e)
                assert f'{n}{{model_name=~"$llm_model"}}' in e, (p["title"], e)
    assert seen == set(LLM_METRICS), set(LLM_METRICS) - seen
    titles = " / ".join(p["title"] for p in panels)
    for want in ("Time to first token", "Inter-token latency", "End-to-end", "Tokens/s", "waiting", "KV-cache", "prefix"):
        assert want in titles, want
    var = next(v for v in dashboard()["templating"]["list"] if v["name"] == "llm_model")
    assert var["definition"] == "label_values(gpuopt:num_requests_running, model_name)"
    for r in adapter_rules().values():
        if is_llm_rule(r):
            assert llm_series(re.match(r"\s*([\w:]+)", r["seriesQuery"]).group(1)), r["seriesQuery"]


def test_llm_panels_and_rules_return_data(tmp_path):
    """A real `gpuopt serve` with a tiny language model under streaming load, scraped by a real
    Prometheus: the server exports every LLM metric with the documented type, every panel of the
    language-model row returns numbers, and the adapter's LLM rules answer for the pod."""
    prom_bin = prometheus_or_skip()
    from llm_server import MODEL, start_llm_server
    server = start_llm_server(tmp_path / "repo")
    prom = None
    try:
        _, _, body = http_get(f"http://127.0.0.1:{server.metrics_port}/metrics")
        types = dict(l.split()[2:4] for l in body.splitlines() if l.startswith("# TYPE gpuopt:"))
        for name, kind in LLM_METRICS.items():
            assert types.get(name) == kind, f"{name}: exported as {types.get(name)}, want {kind}"
        prom, base, data = start_prometheus(prom_bin, str(tmp_path), f"""  - job_name: serve
    static_configs:
      - targets: ['127.0.0.1:{server.metrics_port}']
        labels: {{namespace: {NAMESPACE}, pod: {POD}}}
""")
        end = time.time() + 60
        while time.time() < end and not prom_query(base, "gpuopt:num_requests_running"):
            time.sleep(0.2)
        import urllib.request
        errors, generated = [], []

        def client(i):
            try:
                for k in range(4):
                    req = urllib.request.Request(
                        f"http://{server.url}/v1/completions",
                        data=json.dumps({"model": MODEL, "prompt": "the quick brown fox " * (1 + k), "max_tokens": 12,
                                         "temperature": 0, "stream": True,
                                         "stream_options": {"include_usage": True}}).encode(),
                        headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=60) as r:
                        events = [l[6:] for l in r.read().decode().splitlines() if l.startswith("data: ")]
                    assert events[-1] == "[DONE]"
                    usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
                    generated.append(usage[-1]["completion_tokens"])
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        ts = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[:3]
        time.sleep(3)
        for p in llm_panels():
            for t in p["targets"]:
                q = t["expr"].replace("$llm_model", MODEL)
                res = prom_query(base, q)
                assert res, f"panel '{p['title']}': no data for {q}"
                vals = [float(r["value"][1]) for r in res]
                assert all(v == v and v >= 0 for v in vals), (p["title"], q, vals)
        gen = prom_query(base, f'gpuopt:generation_tokens_total{{model_name="{MODEL}"}}')
        assert float(gen[0]["value"][1]) == sum(generated) > 0, generated
        for r in adapter_rules().values():
            if is_llm_rule(r):
                got = prom_query(base, expand(r))
                assert [x["metric"]["pod"] for x in got] == [POD], r["seriesQuery"]
                assert float(got[0]["value"][1]) >= 0
    finally:
        if prom:
            stop_prometheus(prom, data)
        server.stop()
