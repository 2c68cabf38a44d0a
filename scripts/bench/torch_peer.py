"""PyTorch `transformers`' side of `cargo xtask bench embedder`.

Embeds the passages of PASSAGES (a JSON array of strings) as Contriever does: a BertModel (no
pooler), mean of the last hidden states over the attention mask, not normalised; batches of
BATCH passages sorted by length first, as sentence-transformers does; `torch.set_num_threads`.
Prints one JSON object: passages, seconds (tokenization included, model loading excluded), the
library versions, and with --compare FILE (the JSON of `selfrag debug embed` on the same
passages) the smallest cosine similarity between the two sides' vectors; --compare-int8 FILE
does the same for our int8 vectors (`min_cosine_int8`), against these fp32 ones.

    python torch_peer.py --model DIR --passages passages.json --threads 2 [--compare ours.json]
        [--compare-int8 ours-int8.json]
"""

import argparse
import json
import time

import torch
import transformers
from transformers import BertModel, BertTokenizerFast


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--passages", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--compare")
    parser.add_argument("--compare-int8")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    with open(args.passages, encoding="utf-8") as f:
        passages = json.load(f)
    # From the folder: transformers 5 ignores a `vocab_file=` argument and tokenizes every word
    # as [UNK], which made an earlier run of this benchmark compare different inputs.
    tokenizer = BertTokenizerFast.from_pretrained(args.model, do_lower_case=True)
    model = BertModel.from_pretrained(args.model, add_pooling_layer=False).eval()

    started = time.perf_counter()
    order = sorted(range(len(passages)), key=lambda i: len(passages[i]))
    vectors = [None] * len(passages)
    with torch.inference_mode():
        for begin in range(0, len(order), args.batch):
            chunk = order[begin : begin + args.batch]
            inputs = tokenizer(
                [passages[i] for i in chunk],
                padding=True,
                truncation=True,
                max_length=512,
                return_tensors="pt",
            )
            hidden = model(**inputs).last_hidden_state
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            for i, v in zip(chunk, pooled):
                vectors[i] = v
    seconds = time.perf_counter() - started

    result = {
        "passages": len(passages),
        "seconds": seconds,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "attention": model.config._attn_implementation,
    }
    theirs = torch.stack(vectors)
    for key, path in (("min_cosine", args.compare), ("min_cosine_int8", args.compare_int8)):
        if path:
            with open(path, encoding="utf-8") as f:
                ours = torch.tensor(json.load(f)["embeddings"])
            cosine = torch.nn.functional.cosine_similarity(ours, theirs, dim=1)
            result[key] = float(cosine.min())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
