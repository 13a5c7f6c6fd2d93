"""gpuopt's WordPiece tokenizers (BERT and the sentence-transformers encoders built on it:
BertNormalizer, BertPreTokenizer, WordPiece model and decoder, [CLS]/[SEP]) through
`gpuopt tokenize --json`, against the Hugging Face `tokenizers` library as the oracle.

Each variant is trained here with `tokenizers`' WordPieceTrainer on a corpus of mixed scripts,
accents, CJK, punctuation, emoji and whitespace runs, saved as tokenizer.json; both sides encode
(with and without special tokens) and decode the same few hundred strings, the streaming decoder's
pieces equal DecodeStream's, and a sweep over Unicode checks the BERT character classes
(control characters, whitespace, punctuation, CJK ideographs, non-spacing marks)."""
import json
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: E402
from tokenizers import processors, trainers  # noqa: E402

from gpuopt_cli import gpuopt_bin  # noqa: E402
from test_llm_tokenizer import CORPUS, corpus_iter, gpuopt_json, make_inputs  # noqa: E402

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
EXTRA = ["Die Straße heißt Ærøskøbing; o'clock, naïve café — «quotes» ‘single’ “double” ¿qué? ¡sí!",
         "中文分词：每个汉字单独成词。漢字と仮名が混ざった文、한국어는 띄어쓰기를 합니다.",
         "unaffable unbelievable playing played player plays replay   runs\u3000of\u2003spaces",
         "control\x00chars\x07and\x1bescapes\u200bzero\u200dwidth\ufeffbom\u00adsoft\ufffdreplacement"]


def wordpiece(tmp, name, normalizer, pre=None, post="bert", decoder=None, max_chars=100):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=max_chars))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre or pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoder or decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=900, min_frequency=2, limit_alphabet=200,
                                        special_tokens=BERT_SPECIALS, show_progress=False)
    tok.train_from_iterator(list(corpus_iter()) + EXTRA * 3, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if post == "bert":
        tok.post_processor = processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
    else:
        tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                           special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.add_tokens([AddedToken("<tool>", normalized=True)])
    path = tmp / f"{name}.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def formats(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wp")
    bert = normalizers.BertNormalizer
    return {
        # bert-base-uncased: lowercase, accents stripped (strip_accents null follows lowercase)
        "uncased": wordpiece(tmp, "uncased", bert(lowercase=True)),
        # bert-base-cased: neither lowercased nor stripped
        "cased": wordpiece(tmp, "cased", bert(lowercase=False)),
        # lowercase but accents kept (multilingual-uncased-like with strip_accents=False)
        "uncased_keep_accents": wordpiece(tmp, "keep", bert(lowercase=True, strip_accents=False)),
        # accents stripped without lowercasing, no text cleaning or CJK spacing, Whitespace
        # pre-tokenizer, a template post-processor, a decoder without cleanup, short max words
        "cased_strip_whitespace": wordpiece(
            tmp, "strip", bert(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False),
            pre=pre_tokenizers.Whitespace(), post="template", decoder=decoders.WordPiece(cleanup=False), max_chars=12),
    }


def inputs():
    items = make_inputs() + EXTRA
    items += ["[CLS] hello [SEP]", "a [MASK] b", "[UNK][PAD]", "x" * 99, "x" * 100, "x" * 101, "a" * 13,
              "abcdefghijkl", "abcdefghijklm", "##", "## ##a", "don ' t", "it 's", "do not", "a . b , c ? d !",
              "Ünïcödé ÀÉÎÕÜ ǅ İ ẞ", "\u4e00\u4e01x\u3400y\U00020000z", "\U0002b740\U0002b81f\U0002ceaf\U0002f800"]
    return items


FORMATS = ["uncased", "cased", "uncased_keep_accents", "cased_strip_whitespace"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_decode_match_tokenizers(formats, fmt):
    path = formats[fmt]
    hf = Tokenizer.from_file(str(path))
    items = inputs()
    for special in (True, False):
        want = [e.ids for e in hf.encode_batch(items, add_special_tokens=special)]
        got = gpuopt_json(path, items, *([] if special else ["--no-special"]))
        bad = [(items[k], want[k], got[k]) for k in range(len(items)) if want[k] != got[k]]
        assert not bad, f"{len(bad)}/{len(items)} differ, first: {bad[:3]}"
    unk = hf.token_to_id("[UNK]")
    ids = [hf.encode(s, add_special_tokens=True).ids for s in items]
    n_unk = sum(i.count(unk) for i in ids)
    n_sub = sum(1 for i in ids for x in i if hf.id_to_token(x).startswith("##"))
    assert n_unk > 10 and n_sub > 100, f"weak test: {n_unk} unknown words, {n_sub} ## pieces"
    for skip in (False, True):
        want = [hf.decode(i, skip_special_tokens=skip) for i in ids]
        got = gpuopt_json(path, ids, "--decode", *(["--no-special"] if skip else []))
        bad = [(items[k], want[k], got[k]) for k in range(len(items)) if want[k] != got[k]]
        assert not bad, f"decode(skip_special_tokens={skip}): {len(bad)} differ, first: {bad[:3]}"


@pytest.mark.parametrize("fmt", ["uncased", "cased_strip_whitespace"])
def test_stream_decoder_matches_decode_stream(formats, fmt):
    from tokenizers.decoders import DecodeStream
    path = formats[fmt]
    hf = Tokenizer.from_file(str(path))
    items = inputs()[:80]
    ids = [hf.encode(s, add_special_tokens=True).ids for s in items]
    got = gpuopt_json(path, ids, "--decode", "--stream", "--no-special")
    for k, seq in enumerate(ids):
        ds = DecodeStream(skip_special_tokens=True)
        steps = [ds.step(hf, i) or "" for i in seq]
        assert got[k][:-1] == steps, f"{items[k]!r}: pieces {got[k]} vs DecodeStream {steps}"


@pytest.mark.parametrize("fmt", ["uncased", "cased_strip_whitespace"])
def test_unicode_sweep(formats, fmt):
    """Code points inside a word, " a{c}b": whether each is removed, becomes a space, splits off as
    punctuation or a CJK ideograph, is a mark stripped after NFD, or stays in the word (an unknown
    word: [UNK]) shows in the ids. The BERT classes come from an older Unicode than utf8proc's
    (src/llm/tok_wordpiece.cpp lists the differences). Every code point of planes 0-3 and 14 (all
    that Unicode assigns outside private use) and every 31st other one; short texts, since
    `tokenizers` slows down on long ones."""
    path = formats[fmt]
    hf = Tokenizer.from_file(str(path))
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and
           (c < 0x40000 or 0xE0000 <= c < 0xF0000 or c % 31 == 0)]
    n = 100
    items = ["".join(f" a{chr(c)}b" for c in cps[k:k + n]) for k in range(0, len(cps), n)]
    want = [e.ids for e in hf.encode_batch(items, add_special_tokens=False)]
    got = gpuopt_json(path, items, "--no-special")
    bad = [k for k in range(len(items)) if want[k] != got[k]]
    assert not bad, f"{len(bad)} of {len(items)} chunks differ, first at code point {hex(cps[bad[0] * n])}.."


def test_bad_wordpiece_files(tmp_path):
    good = json.loads(wordpiece(tmp_path, "good", normalizers.BertNormalizer()).read_text())
    cases = {}
    j = json.loads(json.dumps(good))
    del j["model"]["vocab"]
    cases["novocab.json"] = (j, "model.vocab is missing")
    j = json.loads(json.dumps(good))
    del j["model"]["unk_token"]
    cases["nounk.json"] = (j, "model.unk_token is missing")
    j = json.loads(json.dumps(good))
    j["model"]["unk_token"] = "[NOPE]"
    cases["unkvocab.json"] = (j, "model.unk_token '[NOPE]' is not in model.vocab")
    j = json.loads(json.dumps(good))
    j["normalizer"]["type"] = "Precompiled"
    cases["norm.json"] = (j, "normalizer type 'Precompiled' is not supported")
    for name, (content, needle) in cases.items():
        (tmp_path / name).write_text(json.dumps(content))
        r = subprocess.run([gpuopt_bin(), "tokenize", str(tmp_path / name)], input="hi\n",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, (name, r.returncode, r.stderr)
        assert needle in r.stderr and name in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = subprocess.run([gpuopt_bin(), "tokenize", str(tmp_path / "good.json")], input="Hello, world!\n",
                       capture_output=True, text=True, timeout=60)
    hf = Tokenizer.from_file(str(tmp_path / "good.json"))
    assert r.returncode == 0 and [int(x) for x in r.stdout.split()] == hf.encode("Hello, world!").ids, r.stderr


def test_corpus_round_trip_uncased(formats):
    """decode(encode(x)) through gpuopt alone equals tokenizers' for the corpus (lowercased, accents
    stripped, CJK spaced, punctuation cleaned up): the decoder's ## joining and cleanup."""
    path = formats["uncased"]
    hf = Tokenizer.from_file(str(path))
    want = [hf.decode(hf.encode(s).ids) for s in CORPUS + EXTRA]
    got = gpuopt_json(path, gpuopt_json(path, CORPUS + EXTRA), "--decode", "--no-special")
    assert got == want
    assert sum(1 for w in want if "[UNK]" not in w) > 5
