#!/usr/bin/env python3
"""`cargo xtask gpu-check`'s peer: PyTorch on the same GPU, the same shapes, the same input.

Copied into `.gpu-check/peer.py` by `cargo xtask gpu-check build`; `run.sh` runs it after our
timings, on the machine with the GPU, with only the torch and transformers already installed
there (no download: every model is random weights built here). It reads:

- `--ids`: the token ids our timings fed (JSON from the `models` test binary): the bench
  passages as our embedder read them, and the generator's 128-token bench prompt;
- `--ours`: our figures (`key value` lines from the same binary);

and times, on the GPU:

- a random BERT-base (`BertModel(BertConfig())`, no pooler) embedding those passages with mean
  pooling over the real tokens, batched as ours batches them on the GPU (sorted by length, at
  most the rows and padded tokens a batch that the ids file names), in f32 (TF32 off, as ours) and in fp16: passages/s, ids to
  vectors on the host (our figure also includes tokenizing the text);
- a random Llama-2-7B-shaped `LlamaForCausalLM` (32 blocks, vocabulary 32,016 as Self-RAG's) in
  fp16: the 128-token prompt in one pass, then 64 greedy steps with its KV cache, each step's
  token brought to the host (as a generator that checks for EOS must); the same with five rows
  (K = 5). Prompt tokens/s, decode tokens/s.

It prints a table of ours, the peer's and the ratio (ours / peer: above 1 ours is faster) and
appends it to `--table`. Any failure is reported and leaves what was measured; exit status 0
when every figure was measured, 1 otherwise. `--dry-run` skips torch (checks the inputs and the
table's code on a machine without it).
"""

import argparse
import json
import statistics
import sys
import time
import traceback

# Our batching on the CPU (selfrag-models' embedder.rs: TOKENS_PER_BATCH, MAX_ROWS); the ids
# file says our batching on the device measured (`batch_rows`, `batch_tokens`).
TOKENS_PER_BATCH = 2048
MAX_ROWS = 32
LLAMA_VOCAB = 32016


def batches_like_ours(rows, max_rows=MAX_ROWS, tokens_per_batch=TOKENS_PER_BATCH):
    """Indices of `rows` in our embedder's batches: sorted by length, a batch closed when it has
    `max_rows` rows or the next (longer) row would take it past `tokens_per_batch` padded
    tokens."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    out, batch = [], []
    for position, i in enumerate(order):
        batch.append(i)
        following = order[position + 1] if position + 1 < len(order) else None
        full = len(batch) == max_rows or following is None or (
            (len(batch) + 1) * max(len(rows[following]), 1) > tokens_per_batch
        )
        if full:
            out.append(batch)
            batch = []
    return out


def read_ours(path):
    figures = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:
                    figures[parts[0]] = float(parts[1])
    except OSError as e:
        print(f"peer: our figures unreadable ({e})")
    return figures


def time_embedder(torch, transformers, passages, batching, dtype, rounds):
    config = transformers.BertConfig()  # BERT-base: 12 layers, 768, 12 heads, 3072
    config.vocab_size = max(config.vocab_size, 1 + max(max(p) for p in passages))
    with torch.device("cuda"):
        model = transformers.BertModel(config, add_pooling_layer=False)
    model = model.to(dtype).eval()
    batches = []
    for batch in batches_like_ours(passages, *batching):
        width = max(len(passages[i]) for i in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, i in enumerate(batch):
            ids[r, : len(passages[i])] = torch.tensor(passages[i])
            mask[r, : len(passages[i])] = 1
        batches.append((ids.pin_memory(), mask.pin_memory()))

    def embed_all():
        vectors = []
        for ids, mask in batches:
            ids, mask = ids.cuda(non_blocking=True), mask.cuda(non_blocking=True)
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1)
            vectors.append(pooled.float().cpu())
        return vectors

    rates = []
    with torch.inference_mode():
        embed_all()  # cuBLAS's and the attention's kernels chosen
        for _ in range(rounds):
            torch.cuda.synchronize()
            t = time.perf_counter()
            embed_all()
            torch.cuda.synchronize()
            rates.append(len(passages) / (time.perf_counter() - t))
    del model
    torch.cuda.empty_cache()
    return statistics.median(rates), rates


def time_llama(torch, transformers, prompt, steps, rounds):
    config = transformers.LlamaConfig(
        vocab_size=LLAMA_VOCAB,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
    )
    t = time.perf_counter()
    # Built on the GPU in fp16 directly: 13.5 GB, never in f32 on the host. Should this
    # transformers refuse an fp16 default, in f32 on the GPU (27 GB), then halved.
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float16)
        with torch.device("cuda"):
            model = transformers.LlamaForCausalLM(config)
    except Exception as e:  # noqa: BLE001
        print(f"peer: building in fp16 failed ({e!r}); building in f32 on the GPU")
        torch.set_default_dtype(previous)
        torch.cuda.empty_cache()
        with torch.device("cuda"):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model = model.half().eval()
    assert next(model.parameters()).device.type == "cuda"
    build_s = time.perf_counter() - t

    def run(rows, new_steps):
        ids = torch.tensor([prompt] * rows, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        token.cpu()
        t1 = time.perf_counter()
        cache = out.past_key_values
        for _ in range(new_steps):
            out = model(input_ids=token, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            token.cpu()  # the host reads each step's tokens, as ours does
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1

    prompt_rates, decode_rates, batch_rates = [], [], []
    with torch.inference_mode():
        run(1, 2)
        run(5, 2)
        for _ in range(rounds):
            p, d = run(1, steps)
            prompt_rates.append(len(prompt) / p)
            decode_rates.append(steps / d)
            _, d5 = run(5, steps)
            batch_rates.append(5 * steps / d5)
    del model
    torch.cuda.empty_cache()
    med = statistics.median
    return {
        "build_s": build_s,
        "prompt": (med(prompt_rates), prompt_rates),
        "decode": (med(decode_rates), decode_rates),
        "k5": (med(batch_rates), batch_rates),
    }


def fmt(value):
    return "n/a" if value is None else f"{value:.1f}"


def ratio(ours, peer):
    return "n/a" if not ours or not peer else f"{ours / peer:.2f}×"


def table(ours, peer, versions):
    rows = [
        ("embedding passages, passages/s", "embed_passages_per_s", "f32", "bert_f32", "f32 (TF32 off)"),
        ("embedding passages, passages/s", "embed_passages_per_s", "f32", "bert_f16", "fp16"),
        ("prompt (128 tokens), tokens/s", "prompt_tokens_per_s", "Q4_K_M weights, f32 compute", "prompt", "fp16"),
        ("decode (64 steps), tokens/s", "decode_tokens_per_s", "Q4_K_M weights, f32 compute", "decode", "fp16"),
        ("K = 5 batched decode, tokens/s (5 rows)", "k5_tokens_per_s", "Q4_K_M weights, f32 compute", "k5", "fp16"),
    ]
    lines = [
        "",
        f"### Against a peer: PyTorch on the same GPU ({versions})",
        "",
        "Ratio = ours / peer: above 1, ours is faster. Random weights on both sides; BERT-base "
        "(mean pooling, our batching, the same token ids), Llama-2-7B shape (the same 128-token "
        "prompt, greedy, KV cache, each step's tokens read on the host). Our passages/s include "
        "tokenizing the text; the peer's start from the ids.",
        "",
        "| figure | ours | ours' precision | PyTorch | PyTorch's precision | ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for figure, our_key, our_precision, peer_key, peer_precision in rows:
        our_value = ours.get(our_key)
        peer_value = peer.get(peer_key)
        lines.append(
            f"| {figure} | {fmt(our_value)} | {our_precision} | {fmt(peer_value)} | "
            f"{peer_precision} | {ratio(our_value, peer_value)} |"
        )
    answer = ours.get("answer_s")
    lines.append(
        f"| whole answer (short form, K = 5, 50 new tokens), s | "
        f"{'n/a' if answer is None else f'{answer:.2f}'} | Q4_K_M weights, f32 compute | "
        "no peer (our algorithm) | | |"
    )
    if ours.get("blocks") not in (None, 32.0):
        lines.append(f"\nOur generator had {ours['blocks']:.0f} of 32 blocks: its figures are not a 7B's.")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ids", required=True)
    parser.add_argument("--ours", required=True)
    parser.add_argument("--table", help="a markdown file the table is appended to")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--dry-run", action="store_true", help="no torch: inputs and table only")
    args = parser.parse_args()

    ours = read_ours(args.ours)
    with open(args.ids) as f:
        ids = json.load(f)
    passages, prompt = ids["passages"], ids["prompt"]
    batching = (ids.get("batch_rows", MAX_ROWS), ids.get("batch_tokens", TOKENS_PER_BATCH))
    lengths = [len(p) for p in passages]
    print(
        f"peer: {len(passages)} passages of {min(lengths)}–{max(lengths)} tokens in "
        f"{len(batches_like_ours(passages, *batching))} batches (at most {batching[0]} rows, "
        f"{batching[1]} padded tokens); a prompt of {len(prompt)} tokens; "
        f"our figures: {', '.join(f'{k} {v:.4g}' for k, v in ours.items()) or 'none'}"
    )

    peer, failed = {}, []
    versions = "not run"
    if args.dry_run:
        failed.append("dry run: PyTorch not run")
    else:
        try:
            import torch
            import transformers

            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            versions = (
                f"torch {torch.__version__}, transformers {transformers.__version__}, "
                f"{torch.cuda.get_device_name(0)}"
            )
            print(f"peer: {versions}")
        except Exception as e:  # noqa: BLE001 - any reason means no peer
            failed.append(f"no PyTorch with CUDA: {e!r}")
            torch = transformers = None
        if torch is not None:
            steps = [
                ("bert_f32", lambda: time_embedder(torch, transformers, passages, batching, torch.float32, args.rounds)),
                ("bert_f16", lambda: time_embedder(torch, transformers, passages, batching, torch.float16, args.rounds)),
                ("llama", lambda: time_llama(torch, transformers, prompt, args.steps, args.rounds)),
            ]
            for name, step in steps:
                t = time.perf_counter()
                try:
                    result = step()
                except Exception as e:  # noqa: BLE001 - report it, go on to the next
                    traceback.print_exc()
                    failed.append(f"{name}: {e!r}")
                    torch.cuda.empty_cache()
                    continue
                if name == "llama":
                    print(f"peer: Llama-2-7B shape built on the GPU in fp16 in {result['build_s']:.1f} s")
                    for key in ("prompt", "decode", "k5"):
                        value, rounds = result[key]
                        peer[key] = value
                        print(f"peer: {key}: {value:.1f} tokens/s (rounds: {', '.join(f'{r:.1f}' for r in rounds)})")
                else:
                    value, rounds = result
                    peer[name] = value
                    print(f"peer: {name}: {value:.1f} passages/s (rounds: {', '.join(f'{r:.1f}' for r in rounds)})")
                print(f"peer: ({name}: {time.perf_counter() - t:.0f} s)")

    text = table(ours, peer, versions)
    print(text)
    if args.table:
        with open(args.table, "a") as f:
            f.write(text)
    if failed:
        print("peer: not measured: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
