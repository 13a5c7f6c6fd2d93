"""Generation models under Triton's model-control modes: `--model-control-mode explicit` (only
--load-model's models at start; tritonclient's load_model / unload_model for the rest) and `poll`
(folders added, removed or replaced while the server runs). Oracles: the numpy forward pass of
test_llm_generate (greedy text), Triton's repository index as tritonclient reads it, and the
`openai` client's model list. Runs on the CPU (--llm-device cpu)."""
import os
import shutil
import sys
import threading
import time

import pytest

openai = pytest.importorskip("openai")
httpclient = pytest.importorskip("tritonclient.http")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as H  # noqa: E402
from test_llm_generate import greedy  # noqa: E402
from test_llm_serve import ZEPHYR, llm_folder, wait_for  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

PROMPT = "the quick brown fox"


def clients(s):
    return (openai.OpenAI(base_url=f"http://{s.url}/v1", api_key="none", max_retries=0, timeout=60),
            httpclient.InferenceServerClient(s.url))


def model_ids(oa):
    return sorted(m.id for m in oa.models.list().data)


def states(tc):
    return {e["name"]: (e.get("state"), e.get("reason", "")) for e in tc.get_model_repository_index()}


def answer(oa, name):
    return oa.completions.create(model=name, prompt=PROMPT, max_tokens=12, temperature=0,
                                 extra_body={"ignore_eos": True}).choices[0].text


def answer_or_none(oa, name):  # None while the model is away (between unload and load)
    try:
        return answer(oa, name)
    except openai.NotFoundError:
        return None


def expected(m):
    hf, cfg, W = m
    want, _ = greedy(cfg, W, hf.encode(PROMPT).ids, 12)
    return hf.decode(want, skip_special_tokens=True)


def test_explicit_mode_loads_and_unloads_generation_models(tmp_path):
    a = llm_folder(tmp_path / "a", ZEPHYR, seed=1)
    b = llm_folder(tmp_path / "b", ZEPHYR, seed=2)
    H.add_sub_model(str(tmp_path / "simple" / "1" / "model.onnx"))
    with H.Server(["--model-repository", str(tmp_path), "--model-control-mode", "explicit", "--load-model", "a",
                   "--llm-device", "cpu", "--num-kv-blocks", "64"], timeout=120) as s:
        oa, tc = clients(s)
        assert model_ids(oa) == ["a"]
        st = states(tc)
        assert st["a"][0] == "READY" and st["b"] == ("UNAVAILABLE", "unloaded"), st
        assert st["simple"] == ("UNAVAILABLE", "unloaded"), st
        with pytest.raises(openai.NotFoundError):
            answer(oa, "b")

        tc.load_model("b")
        assert model_ids(oa) == ["a", "b"]
        assert tc.is_model_ready("b")
        assert answer(oa, "b") == expected(b)
        assert answer(oa, "a") == expected(a)

        # A request in flight when its model is unloaded still finishes (the unload drains it).
        result = {}

        def long_request():
            r = oa.completions.create(model="a", prompt=PROMPT, max_tokens=60, temperature=0,
                                      extra_body={"ignore_eos": True})
            result["text"], result["reason"] = r.choices[0].text, r.choices[0].finish_reason

        t = threading.Thread(target=long_request)
        t.start()
        time.sleep(0.3)
        tc.unload_model("a")
        t.join(60)
        hf, cfg, W = a
        want, _ = greedy(cfg, W, hf.encode(PROMPT).ids, 60)
        assert result == {"text": hf.decode(want, skip_special_tokens=True), "reason": "length"}
        assert model_ids(oa) == ["b"]
        assert states(tc)["a"] == ("UNAVAILABLE", "unloaded")
        with pytest.raises(openai.NotFoundError):
            answer(oa, "a")
        assert not tc.is_model_ready("a")

        # Unknown names are the client's error; the ONNX model beside them still loads.
        with pytest.raises(InferenceServerException, match="nope"):
            tc.load_model("nope")
        tc.load_model("simple")
        assert tc.is_model_ready("simple")
        code, _, out = s.stop()
        assert code == 0, out


def test_poll_mode_follows_the_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    a = llm_folder(repo / "a", ZEPHYR, seed=1)
    c = llm_folder(tmp_path / "staging" / "c", ZEPHYR, seed=3)
    with H.Server(["--model-repository", str(repo), "--model-control-mode", "poll", "--repository-poll-secs", "1",
                   "--llm-device", "cpu", "--num-kv-blocks", "64"], timeout=120) as s:
        oa, tc = clients(s)
        assert model_ids(oa) == ["a"]
        assert answer(oa, "a") == expected(a)
        # A folder moved in is loaded at the next scan; one removed is unloaded.
        shutil.move(str(tmp_path / "staging" / "c"), str(repo / "c"))
        assert wait_for(lambda: model_ids(oa) == ["a", "c"], 60), model_ids(oa)
        assert answer(oa, "c") == expected(c)
        shutil.rmtree(repo / "a")
        assert wait_for(lambda: model_ids(oa) == ["c"], 60), model_ids(oa)
        assert "a" not in states(tc)
        # Replacing a folder's checkpoint reloads it: the answers are the new weights'.
        d = llm_folder(tmp_path / "staging" / "d", ZEPHYR, seed=4)
        for f in ("model.safetensors", "config.json"):
            shutil.copy(tmp_path / "staging" / "d" / f, repo / "c" / f)
        want = expected(d)
        assert want != expected(c)
        assert wait_for(lambda: answer_or_none(oa, "c") == want, 60)
        code, _, out = s.stop()
        assert code == 0, out
