"""llama.cpp's side of `cargo xtask bench generator`, through llama-cpp-python.

Runs the same greedy job as `selfrag debug generate --ignore-eos`: the prompt IDS in one
evaluation, then MAX_TOKENS - 1 single-token decode steps, each choosing the argmax of the
last logits. Prints one JSON object with the same keys as `selfrag debug generate`, plus the
process's peak resident set size and llama.cpp's system info (which SIMD paths it was built with).

    python llama_cpp_peer.py --model FILE.gguf --ids 1,2,3 --max-tokens 65 --threads 2
"""

import argparse
import json
import resource
import time

import llama_cpp
import numpy as np
from llama_cpp import Llama


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--ids", required=True)
    parser.add_argument("--max-tokens", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args()

    ids = [int(i) for i in args.ids.split(",")]
    # A context just large enough, as `selfrag debug generate` reserves just what it needs.
    n_ctx = len(ids) + args.max_tokens + 16
    llm = Llama(
        model_path=args.model,
        n_ctx=n_ctx,
        n_batch=512,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        verbose=False,
    )
    n_vocab = llm.n_vocab()

    def next_id() -> int:
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
        return int(np.argmax(logits))

    started = time.perf_counter()
    llm.eval(ids)
    generated = [next_id()]
    prompt_seconds = time.perf_counter() - started

    started = time.perf_counter()
    decode_tokens = 0
    while len(generated) < args.max_tokens:
        llm.eval([generated[-1]])
        decode_tokens += 1
        generated.append(next_id())
    decode_seconds = time.perf_counter() - started

    print(
        json.dumps(
            {
                "prompt_tokens": len(ids),
                "prompt_seconds": prompt_seconds,
                "decode_tokens": decode_tokens,
                "decode_seconds": decode_seconds,
                "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "llama_cpp_python": llama_cpp.__version__,
                "system_info": llama_cpp.llama_print_system_info().decode().strip(),
                "ids": [generated],
            }
        )
    )


if __name__ == "__main__":
    main()
