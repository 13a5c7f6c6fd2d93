"""/v1/embeddings on a real `gpuopt serve` (--embedding-model NAME=DIR), called with the `openai`
client and with raw HTTP.

Encoder: the two-layer BERT exported by torch (tests/data/exported/bert_tiny_legacy.onnx,
input_ids + attention_mask -> [batch, 16, 64]) with a BERT tokenizer as bert-base-uncased's is built
(BertNormalizer lowercasing and stripping accents, BertPreTokenizer, WordPiece, BertProcessing's
[CLS] ... [SEP], the WordPiece decoder), trained here with `tokenizers`; the ids it gives are the
oracle's input. Oracle: ONNX Runtime on each input alone,
padded as the model's fixed length requires, then numpy pooling written from
sentence-transformers' definitions (mean over the attention mask, or the [CLS] row; L2
normalisation), configured three ways: sentence-transformers' 1_Pooling/config.json with a
Normalize module, gpuopt's embedding.json (cls, not normalised), and the default.

Decoder: a tiny Llama (tests/python/test_llm_generate.py's checkpoint writer), last-token pooling:
the numpy forward pass of that file with the LM head replaced by the identity gives the final-norm
hidden state of the last token, normalised here.

Also: batches of inputs equal each input alone, token-id inputs, base64 equals float, usage
counts the tokens `tokenizers` makes, and bad requests answer 400/404 in OpenAI's error body."""
import base64
import json
import os
import shutil
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
from gpuopt_cli import ROOT  # noqa: E402

ort = pytest.importorskip("onnxruntime")
openai = pytest.importorskip("openai")
BERT = os.path.join(ROOT, "tests", "data", "exported", "bert_tiny_legacy.onnx")
SEQ = 16  # the export's fixed sequence length
# Cased, accented, punctuated, CJK and unknown words: the WordPiece path as BERT runs it.
TEXTS = ["the quick brown fox", "A Stitch in TIME", "lazy dog!", "über café jumps over", "foxes 狐狸 zebra?"]


def wordpiece_tokenizer(path):
    """Trained once; every encoder folder gets the same file (the trainer breaks ties by hash order)."""
    if getattr(wordpiece_tokenizer, "json", None) is None:
        wordpiece_tokenizer.json = train_wordpiece().to_str()
    (path / "tokenizer.json").write_text(wordpiece_tokenizer.json)


def train_wordpiece():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train_from_iterator(["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
                             "Über naïve café, THE DOGS!", "the foxes jumped; stitches"] * 20, trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    assert tok.get_vocab_size() <= 256  # the model's vocabulary
    return tok


def encoder_dir(root, name, files):
    d = root / name
    os.makedirs(d)
    shutil.copy(BERT, d / "model.onnx")
    wordpiece_tokenizer(d)
    for rel, content in files.items():
        os.makedirs((d / rel).parent, exist_ok=True)
        (d / rel).write_text(json.dumps(content))
    return d


def ort_rows(ids):
    """[tokens, 64] last hidden state of one input, ONNX Runtime, padded to the fixed length."""
    sess = ort_rows.sess = getattr(ort_rows, "sess", None) or ort.InferenceSession(BERT, providers=["CPUExecutionProvider"])
    x = np.zeros((1, SEQ), np.int64)
    m = np.zeros((1, SEQ), np.int64)
    x[0, :len(ids)] = ids
    m[0, :len(ids)] = 1
    return sess.run(None, {"input_ids": x, "attention_mask": m})[0][0].astype(np.float64), m[0]


def oracle(ids, pooling, normalize):
    h, m = ort_rows(ids)
    if pooling == "mean":  # sentence-transformers: sum(h * mask) / clamp(sum(mask), 1e-9)
        v = (h * m[:, None]).sum(0) / max(m.sum(), 1e-9)
    else:
        v = h[0]
    if normalize:
        v = v / max(np.linalg.norm(v), 1e-12)
    return v


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import server_harness as H
    from llm_server import make_llm_repository
    root = tmp_path_factory.mktemp("emb")
    st = encoder_dir(root, "st", {"1_Pooling/config.json": {"word_embedding_dimension": 64, "pooling_mode_mean_tokens": True,
                                                            "pooling_mode_cls_token": False},
                                  "modules.json": [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                                                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                                                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]})
    cls = encoder_dir(root, "cls", {"embedding.json": {"pooling": "cls", "normalize": False}})
    plain = encoder_dir(root, "plain", {})
    cfg, W, dec_tok = make_llm_repository(root / "llm")
    repo = root / "repo"  # serve wants a model repository: one small ONNX model
    H.add_sub_model(str(repo / "simple" / "1" / "model.onnx"))
    s = H.Server(["--model-repository", str(repo), "--embedding-model", f"st={st}", "--embedding-model", f"cls={cls}",
                  "--embedding-model", f"plain={plain}", "--embedding-model", f"llama={root / 'llm' / 'tiny-llama'}"])
    from tokenizers import Tokenizer
    yield {"server": s, "tok": Tokenizer.from_file(str(st / "tokenizer.json")), "cfg": cfg, "W": W, "dec_tok": dec_tok}
    s.stop()


def client(s):
    return openai.OpenAI(base_url=f"http://{s.url}/v1", api_key="none")


def post(s, body, raw=None):
    req = urllib.request.Request(f"http://{s.url}/v1/embeddings", data=raw if raw is not None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.parametrize("model, pooling, normalize", [("st", "mean", True), ("cls", "cls", False), ("plain", "mean", True)])
def test_encoder_pooling_matches_onnx_runtime(served, model, pooling, normalize):
    s, tok = served["server"], served["tok"]
    r = client(s).embeddings.create(model=model, input=TEXTS)  # the client asks for base64 and decodes it
    assert r.model == model and [d.index for d in r.data] == list(range(len(TEXTS)))
    ids = [tok.encode(t).ids for t in TEXTS]
    pieces = [tok.id_to_token(i) for x in ids for i in x]
    assert "[UNK]" in pieces and any(p.startswith("##") for p in pieces), pieces  # WordPiece at work
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(map(len, ids))
    for d, x in zip(r.data, ids):
        got = np.asarray(d.embedding, np.float64)
        want = oracle(x, pooling, normalize)
        assert got.shape == (64,)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        if normalize:
            assert abs(np.linalg.norm(got) - 1) < 1e-5


def test_batch_equals_single_and_formats_agree(served):
    s, tok = served["server"], served["tok"]
    code, batch = post(s, {"model": "st", "input": TEXTS, "encoding_format": "float"})
    assert code == 200 and batch["object"] == "list"
    for i, t in enumerate(TEXTS):
        code, one = post(s, {"model": "st", "input": t})
        assert code == 200 and one["data"][0]["object"] == "embedding"
        np.testing.assert_allclose(one["data"][0]["embedding"], batch["data"][i]["embedding"], rtol=1e-5, atol=1e-6)
    code, b64 = post(s, {"model": "st", "input": TEXTS, "encoding_format": "base64"})
    assert code == 200
    for f, b in zip(batch["data"], b64["data"]):
        dec = np.frombuffer(base64.b64decode(b["embedding"]), dtype="<f4")
        np.testing.assert_array_equal(dec, np.asarray(f["embedding"], np.float32))
    # Token ids: one list, or a list of lists, taken as they are (no [CLS]/[SEP] added).
    ids = [tok.encode(t).ids for t in TEXTS]
    code, by_ids = post(s, {"model": "st", "input": ids})
    assert code == 200 and by_ids["usage"]["prompt_tokens"] == sum(map(len, ids))
    np.testing.assert_allclose([d["embedding"] for d in by_ids["data"]], [d["embedding"] for d in batch["data"]],
                               rtol=1e-5, atol=1e-6)
    code, one = post(s, {"model": "st", "input": ids[0][1:-1]})
    assert code == 200
    np.testing.assert_allclose(one["data"][0]["embedding"], oracle(ids[0][1:-1], "mean", True), rtol=1e-4, atol=1e-5)


def test_decoder_last_token_matches_numpy(served):
    from test_llm_generate import forward
    s, cfg, W, tok = served["server"], served["cfg"], served["W"], served["dec_tok"]
    # The final-norm hidden state: the numpy forward with the LM head swapped for the identity.
    Wi = dict(W, **{"lm_head.weight": np.eye(cfg["hidden_size"])})
    texts = ["the quick brown fox", "a stitch", "lazy"]
    r = client(s).embeddings.create(model="llama", input=texts)
    for d, t in zip(r.data, texts):
        ids = tok.encode(t).ids
        h = forward(dict(cfg, tie_word_embeddings=False), Wi, ids)[-1]
        want = h / np.linalg.norm(h)
        np.testing.assert_allclose(np.asarray(d.embedding), want, rtol=1e-4, atol=1e-5)
    assert r.usage.prompt_tokens == sum(len(tok.encode(t).ids) for t in texts)


@pytest.mark.parametrize("body, code, want", [
    ({"model": "st", "input": "x", "dimensions": 32}, 400, "dimensions"),
    ({"model": "nope", "input": "x"}, 404, "nope"),
    ({"model": "st", "input": ""}, 400, "empty"),
    ({"model": "st", "input": []}, 400, "input"),
    ({"model": "st", "input": [5, 999]}, 400, "999"),
    ({"model": "st", "input": [[5], [1.5]]}, 400, "input[1]"),
    ({"model": "st", "input": "fox " * 40}, 400, "maximum context of 16 tokens"),
    ({"model": "st", "input": "x" * 100000}, 400, "maximum context"),
    ({"model": "st", "input": "x", "encoding_format": "int8"}, 400, "encoding_format"),
    ({"input": "x"}, 400, "model"),
    ({"model": "st", "input": ["fox"] * 2049}, 400, "2049 items"),
])
def test_bad_requests(served, body, code, want):
    got, j = post(served["server"], body)
    assert got == code, j
    assert want in j["error"]["message"] and j["error"]["type"] == "invalid_request_error", j


def test_malformed_json_and_the_client_errors(served):
    s = served["server"]
    got, j = post(s, None, raw=b"{not json")
    assert got == 400 and "JSON" in j["error"]["message"]
    c = client(s)
    with pytest.raises(openai.BadRequestError):
        c.embeddings.create(model="st", input="x", dimensions=8)
    with pytest.raises(openai.NotFoundError):
        c.embeddings.create(model="missing", input="x")
    # The server is unharmed.
    assert len(c.embeddings.create(model="st", input="fox").data[0].embedding) == 64


def test_concurrent_requests_each_get_their_own_vectors(served):
    """16 clients at once on the encoder and the decoder: every answer equals the one the same
    request gets alone."""
    import threading
    s = served["server"]
    alone = {(m, t): post(s, {"model": m, "input": t})[1]["data"][0]["embedding"]
             for m in ("st", "llama") for t in TEXTS[:3]}
    errors = []

    def worker(k):
        try:
            for i in range(6):
                m, t = ("st", "llama")[(k + i) % 2], TEXTS[(k + i) % 3]
                code, j = post(s, {"model": m, "input": [t, t]})
                assert code == 200, j
                for d in j["data"]:
                    np.testing.assert_allclose(d["embedding"], alone[(m, t)], rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
