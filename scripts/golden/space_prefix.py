"""Golden ids for the SentencePiece dummy prefix after an added special token (issue 18, part 3).

Trains a tiny Llama-style SentencePiece model (BPE, byte fallback, add_dummy_prefix, <unk>=0 <s>=1 </s>=2)
from fixed text, loads it into transformers' *slow* LlamaTokenizer, adds the 16 Self-RAG tokens (ids in the
released model's order) and records input_ids (add_special_tokens=False) for a few texts, three ways:
  legacy_true         every chunk after a special token gets the dummy prefix ("<paragraph>Title" -> "▁Title")
  legacy_false        no prefix after a special token ("Title"); whitespace next to one is kept
  legacy_false_strip  legacy=False plus the whitespace stripping around string-added special tokens of
                      transformers <= 4.34: the most likely tokenization of the Self-RAG training data
                      (checked equal to transformers 4.33.3's legacy=False output)
Writes crates/selfrag-models/tests/golden/space_prefix.json with the vocabulary (piece, score, sentencepiece
type), so a Rust test can rebuild the same model without Python or network.

Run once, by hand, when the texts change (CI never runs it). transformers 5 has no slow LlamaTokenizer, so
pin the 4.x that AkariAsai/self-rag's requirements.txt pins:

    python3 -m venv /tmp/spvenv && /tmp/spvenv/bin/pip install transformers==4.36.2 sentencepiece==0.1.99 protobuf
    /tmp/spvenv/bin/python scripts/golden/space_prefix.py
"""

import json
import os
import platform
import tempfile

import sentencepiece as spm
import transformers
from transformers import AddedToken, LlamaTokenizer

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "selfrag-models", "tests", "golden",
                   "space_prefix.json")

# retrieval_lm/finetune.py:450-455 (AkariAsai/self-rag @ 1fcdc42): 15 reflection tokens, then <pad>.
SELFRAG_TOKENS = ["[No Retrieval]", "[Retrieval]", "[Continue to Use Evidence]", "[Irrelevant]", "[Relevant]",
                  "<paragraph>", "</paragraph>", "[Utility:1]", "[Utility:2]", "[Utility:3]", "[Utility:4]",
                  "[Utility:5]", "[Fully supported]", "[Partially supported]", "[No support / Contradictory]"]

TRAIN_TEXT = """The text of it was written by a careful author who wrote many books about the sea.
Who wrote it? The answer is in the passage, and the passage has a title and a text.
Alpha Title is the name of the first passage. Beta Title is the name of the second one.
In 1984 the novel was read by millions of readers; in 2001 it was read again, 42 times.
Instruction: answer the question. Response: the answer text follows the evidence.
Retrieval finds relevant passages; irrelevant passages are dropped, and supported answers are kept.
### Instruction:
Who wrote the book?

### Response:
She wrote it in the summer, by the sea, with a pen and a lot of paper.
"""

CASES = [
    # the training layout: prompt, passage (title after <paragraph>), answer after [Relevant]
    "### Instruction:\nWho wrote it?\n\n### Response:\n[Retrieval]<paragraph>Alpha Title\nThe text of it."
    "</paragraph>[Relevant]Answer text.[Fully supported][Utility:5]",
    "### Instruction:\nWho wrote it?\n\n### Response:\n[No Retrieval]She wrote it.[Utility:4]",
    "[Relevant] Answer after a space.[Partially supported]",  # a space right after a special token
    "<paragraph>\nBeta Title\nThe text.</paragraph>",  # a newline right after a special token
    "[Retrieval]<paragraph>1984 (novel)\nIn 1984 it was read.</paragraph>",  # text starting with a digit
    "The text of it was written by a careful author.",  # no special token at all
    " Leading space, then [Irrelevant]trailing text",  # leading space; special token mid-text
]


def train(tmp):
    path = os.path.join(tmp, "train.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(TRAIN_TEXT)
    prefix = os.path.join(tmp, "tiny")
    # Llama-2's trainer_spec, scaled down: BPE, byte fallback, split digits, identity normalisation,
    # dummy prefix on, extra whitespace kept; one thread and no sampling, so the result is deterministic.
    spm.SentencePieceTrainer.train(
        input=path, model_prefix=prefix, model_type="bpe", vocab_size=400, hard_vocab_limit=False,
        byte_fallback=True, split_digits=True, normalization_rule_name="identity", add_dummy_prefix=True,
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, character_coverage=1.0,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, input_sentence_size=0,
        minloglevel=2)
    return prefix + ".model"


def make(model, legacy, strip):
    """Slow LlamaTokenizer + the Self-RAG tokens, ids in list order like the released model (32000..32015).

    transformers <= 4.34 turned each plain-string special token into AddedToken(lstrip=True, rstrip=True), so
    whitespace next to a reflection token was dropped; 4.35+ keeps it. `strip` reproduces the older rule.
    One token per call: 4.34+ collects one call's tokens in a set, which scrambles their ids.
    """
    tok = LlamaTokenizer(vocab_file=model, legacy=legacy)
    for t in SELFRAG_TOKENS:
        tok.add_special_tokens({"additional_special_tokens": [AddedToken(t, lstrip=strip, rstrip=strip,
                                                                         normalized=False, special=True)]},
                               replace_additional_special_tokens=False)
    tok.add_special_tokens({"pad_token": AddedToken("<pad>", lstrip=strip, rstrip=strip, normalized=False,
                                                    special=True)})
    assert len(tok) == tok.vocab_size + 16
    return tok


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = train(tmp)
        sp = spm.SentencePieceProcessor(model_file=model)
        vocab = [{"piece": sp.id_to_piece(i), "score": sp.get_score(i),
                  # sentencepiece ModelProto.SentencePiece.Type: 1 normal, 2 unknown, 3 control, 6 byte
                  "type": 2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1}
                 for i in range(sp.get_piece_size())]
        toks = {"legacy_true": make(model, True, strip=False), "legacy_false": make(model, False, strip=False),
                "legacy_false_strip": make(model, False, strip=True)}
        special = {t: toks["legacy_true"].convert_tokens_to_ids(t) for t in SELFRAG_TOKENS + ["<pad>"]}
        assert all(special == {t: tok.convert_tokens_to_ids(t) for t in special} for tok in toks.values())
        cases = [{"text": text, **{k: tok(text, add_special_tokens=False)["input_ids"] for k, tok in toks.items()}}
                 for text in CASES]
    out = {"versions": {"python": platform.python_version(), "transformers": transformers.__version__,
                        "sentencepiece": spm.__version__},
           "vocab": vocab, "special_tokens": special, "cases": cases}
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    for c in cases:
        print(repr(c["text"]))
        for k in ("legacy_true", "legacy_false", "legacy_false_strip"):
            print(f"  {k:18}", [special_name(special, vocab, i) for i in c[k]])


def special_name(special, vocab, i):
    return vocab[i]["piece"] if i < len(vocab) else next(t for t, j in special.items() if j == i)


if __name__ == "__main__":
    main()
