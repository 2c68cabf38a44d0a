"""LlamaIndex's SelfRAGPack, the peer of `cargo xtask bench answer`.

Answers the question of TRACE (our `selfrag ask --json` of the same round) over the passages our
side retrieved, so that both read the same text, with SelfRAGQueryEngine from PyPI's
`llama-index-packs-self-rag`, on llama-cpp-python, as the pack ships it: its model settings
(`logits_all`, a 2,048-token context) and its generation settings (greedy, 50 new tokens,
log-probabilities over the whole vocabulary), with the thread count set. It writes up to 50
tokens to decide, and after retrieval one candidate of up to 50 tokens per passage, one passage
after the other.

The benchmark's model has random weights, so it never writes `[Retrieval]` by itself: the text of
the pack's first generation gets `[Retrieval]` appended, after it was generated in full, so that
the pack retrieves as our side does (ours: `--mode adaptive --threshold 0`). Its retriever hands
back the passages given, without an embedding model.

Prints one JSON object: the seconds of each step (`import`, `load`, `decide`, `search`,
`critique` = the candidates with their scores, `answer`), the tokens each generation wrote, the
prompt tokens of each candidate, the
process's peak resident set size, and the pack's and llama-cpp-python's versions.

    python selfrag_pack_peer.py --model FILE.gguf --trace TRACE.json --threads 2
"""

import argparse
import json
import resource
import time
import warnings

STARTED = time.perf_counter()

warnings.filterwarnings("ignore")

# The imports are part of the answer's time, as our binary's start is part of ours.
import llama_cpp  # noqa: E402
from importlib.metadata import version  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402
from llama_index.packs.self_rag import base as pack  # noqa: E402


class GivenPassages(BaseRetriever):
    """Returns the passages it was given, best first, timing the call."""

    def __init__(self, passages):
        super().__init__()
        self._passages = passages
        self.seconds = 0.0

    def _retrieve(self, query_bundle):
        started = time.perf_counter()
        nodes = [
            NodeWithScore(node=TextNode(text=text, id_=str(i)), score=1.0 - i / 100)
            for i, text in enumerate(self._passages)
        ]
        self.seconds += time.perf_counter() - started
        return nodes


class TimedLlama:
    """The pack's Llama, timing each call; the first call's text is made to ask for retrieval."""

    def __init__(self, llm):
        self._llm = llm
        self.calls = []
        self.completion_tokens = []
        self.forced = False

    def __call__(self, *args, **kwargs):
        started = time.perf_counter()
        result = self._llm(*args, **kwargs)
        self.calls.append(time.perf_counter() - started)
        self.completion_tokens.append(result["usage"]["completion_tokens"])
        if len(self.calls) == 1:
            text = result["choices"][0]["text"]
            if "[Retrieval]" not in text:
                result["choices"][0]["text"] = text + "[Retrieval]"
                self.forced = True
        return result

    def tokens(self, text):
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args()
    imported = time.perf_counter()

    with open(args.trace, encoding="utf-8") as f:
        trace = json.load(f)
    question = trace["question"]
    passages = [p["text"] for p in trace["passages"]]
    retriever = GivenPassages(passages)
    model_kwargs = dict(pack._MODEL_KWARGS, n_threads=args.threads, n_threads_batch=args.threads)
    engine = pack.SelfRAGQueryEngine(args.model, retriever, model_kwargs=model_kwargs)
    llm = TimedLlama(engine.llm)
    engine.llm = llm
    loaded = time.perf_counter()

    response = engine.query(question)
    answered = time.perf_counter()

    prompt_tokens = [llm.tokens(pack._format_prompt(question, p)) for p in passages]
    listed = lambda values: ", ".join(str(v) for v in values)  # noqa: E731
    print(
        json.dumps(
            {
                "import_seconds": imported - STARTED,
                "load_seconds": loaded - imported,
                "decide_seconds": llm.calls[0] if llm.calls else 0.0,
                "search_seconds": retriever.seconds,
                "critique_seconds": sum(llm.calls[1:]),
                "answer_seconds": answered - loaded,
                "process_seconds": answered - STARTED,
                "candidates": len(llm.calls) - 1,
                "retrieval_forced": int(llm.forced),
                "candidate_prompt_tokens": listed(prompt_tokens),
                "decide_tokens": llm.completion_tokens[0] if llm.completion_tokens else 0,
                "candidate_tokens": listed(llm.completion_tokens[1:]),
                "max_tokens": pack._GENERATE_KWARGS["max_tokens"],
                "answer": str(response),
                "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "llama_cpp_python": llama_cpp.__version__,
                "llama_index_packs_self_rag": version("llama-index-packs-self-rag"),
                "llama_index_core": version("llama-index-core"),
            }
        )
    )


if __name__ == "__main__":
    main()
