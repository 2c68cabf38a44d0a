#!/usr/bin/env bash
# `cargo xtask cpu-check`, the half that runs on the other machine: copied into
# `.cpu-check/run.sh` by `cargo xtask cpu-check build`, run from the repository root as
# `bash .cpu-check/run.sh`. It needs no Rust and no network, only bash, gzip and python3 (the
# peer's requests and the summary).
#
# Steps: the CPU described (name, vendor/family/model/stepping, SIMD levels, caches); the
# benchmark's 7B-shaped Q4_K_M model written (8 blocks); for each thread count, ours
# (selfrag-models' `cpu_timings` test: the load's calibrated prefetch distance, then prompt and
# decode tokens/s with each distance, rounds taking turns) and llama.cpp's server on the same
# file (the same 128-token prompt as token ids, 65 greedy tokens ignoring EOS, no prompt cache;
# its own timings). Everything printed goes to $OUT/cpu-check.txt (else .cpu-check/out/), the
# table to $OUT/cpu-check.md.
#
# Knobs: SELFRAG_CPU_CHECK_THREADS (default "2 N", N the machine's CPUs),
# SELFRAG_CPU_CHECK_ROUNDS (3), SELFRAG_CPU_CHECK_BLOCKS (8), SELFRAG_CPU_CHECK_MODELS (where
# the model is written; default /tmp/selfrag-cpu-check-models).

set -u -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$here/out}"
mkdir -p "$out"
rounds="${SELFRAG_CPU_CHECK_ROUNDS:-3}"
blocks="${SELFRAG_CPU_CHECK_BLOCKS:-8}"
models="${SELFRAG_CPU_CHECK_MODELS:-/tmp/selfrag-cpu-check-models}"
threads_list="${SELFRAG_CPU_CHECK_THREADS:-2 $(nproc)}"
port=18573

describe_cpu() {
    echo "# cargo xtask cpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    cat "$here/BUILD" 2>/dev/null
    echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
    awk -F': *' '
        /^model name/ && !n {name = $2}
        /^vendor_id/ && !v {v = $2}
        /^cpu family/ && !f {f = $2}
        /^model\t/ && !m {m = $2}
        /^stepping/ && !s {s = $2}
        /^flags/ && !n {
            n = 1
            split($2, flags, " ")
            for (i in flags) have[flags[i]] = 1
        }
        END {
            printf "CPU: %s (%s family %s model %s stepping %s)\n", name, v, f, m, s
            line = "SIMD:"
            split("avx2 avx_vnni avx512f avx512bw avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_int8", want, " ")
            for (i = 1; i <= 9; i++) if (want[i] in have) line = line " " want[i]
            print line
        }' /proc/cpuinfo
    for level in /sys/devices/system/cpu/cpu0/cache/index*; do
        [ -r "$level/size" ] && echo "cache L$(cat "$level/level") $(cat "$level/type"): $(cat "$level/size")"
    done
}

# The peer: llama-server on the model with $1 threads, the prompt $rounds times.
peer() {
    local threads="$1" server_pid i
    "$bin/llama-server" -m "$gguf" -t "$threads" -tb "$threads" -c 1024 -b 512 -np 1 --port "$port" \
        --host 127.0.0.1 >"$out/llama-server-$threads.log" 2>&1 &
    server_pid=$!
    for i in $(seq 1 240); do
        if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; then
            break
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "llama-server stopped; its log:"
            tail -20 "$out/llama-server-$threads.log"
            return 1
        fi
        sleep 0.5
    done
    for i in $(seq 1 "$rounds"); do
        python3 - "$port" "$threads" "$i" <<'PY' || { kill "$server_pid"; return 1; }
import json, sys, urllib.request
port, threads, round_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ids = [1] + [300 + (i * 7919) % 31000 for i in range(1, 128)]
body = json.dumps({"prompt": ids, "n_predict": 65, "ignore_eos": True, "cache_prompt": False,
                   "temperature": 0.0, "top_k": 1, "samplers": ["top_k"]}).encode()
request = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=body,
                                 headers={"Content-Type": "application/json"})
timings = json.load(urllib.request.urlopen(request, timeout=600))["timings"]
print("cpu-check peer: " + json.dumps({"threads": threads, "round": round_,
      "prompt_tokens_per_s": timings["prompt_per_second"],
      "decode_tokens_per_s": timings["predicted_per_second"],
      "prompt_n": timings["prompt_n"], "predicted_n": timings["predicted_n"]}))
PY
    done
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null
    return 0
}

summarize() {
    python3 - "$out/cpu-check.txt" "$out/cpu-check.md" <<'PY'
import json, re, statistics, sys
ours, peers, loads = {}, {}, {}
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.search(r"(cpu-check(?: peer)?): threads=(\d+) (\{.*\})$", line.strip())
    if not m:
        continue
    kind, threads, record = m.group(1), int(m.group(2)), json.loads(m.group(3))
    if kind == "cpu-check peer":
        peers.setdefault(threads, []).append(record)
    elif "tiles" in record:
        ours.setdefault(threads, {}).setdefault(record["tiles"], []).append(record)
    else:
        loads[threads] = record
med = lambda runs, key: statistics.median(r[key] for r in runs)
rows = ["| threads | prefetch tiles | prompt, tokens/s | decode, tokens/s | prompt / llama.cpp | decode / llama.cpp |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |"]
for threads in sorted(ours):
    peer = peers.get(threads, [])
    pp = med(peer, "prompt_tokens_per_s") if peer else float("nan")
    pd = med(peer, "decode_tokens_per_s") if peer else float("nan")
    chosen = loads.get(threads, {}).get("prefetch_tiles")
    for tiles, runs in sorted(ours[threads].items()):
        p, d = med(runs, "prompt_tokens_per_s"), med(runs, "decode_tokens_per_s")
        mark = " (calibrated)" if tiles == chosen else ""
        rows.append(f"| {threads} | {tiles}{mark} | {p:.1f} | {d:.2f} | {p / pp:.2f}× | {d / pd:.2f}× |")
    rows.append(f"| {threads} | llama.cpp | {pp:.1f} | {pd:.2f} | | |")
notes = [f"- {t} threads: {loads[t].get('prefetch')}; kernels: {loads[t].get('kernels')}" for t in sorted(loads)]
open(sys.argv[2], "w").write("\n".join(rows) + "\n\n" + "\n".join(notes) + "\n")
print("\n".join(rows))
print("\n".join(notes))
PY
}

main() {
    local failed=0 threads
    describe_cpu
    bin="$(mktemp -d)"
    # The peer built with the build machine's instruction sets, unless this CPU lacks its
    # AVX-512: then the x86-64-v3 build (AVX2, FMA, F16C), as on CPUs without AVX-512.
    local server="llama-server"
    if grep -q 'GGML_AVX512=ON' "$here/BUILD" 2>/dev/null && ! grep -qw avx512f /proc/cpuinfo; then
        server="llama-server-x86-64-v3"
        echo "peer: the x86-64-v3 build (this CPU lacks AVX-512)"
    fi
    gunzip -c "$here/models.gz" >"$bin/models" && gunzip -c "$here/$server.gz" >"$bin/llama-server" \
        || { echo "cannot unpack the bundle"; return 1; }
    chmod +x "$bin/models" "$bin/llama-server"
    "$bin/llama-server" --version 2>&1 | head -3
    mkdir -p "$models"
    gguf="$models/llama2-7b-shape-$blocks-blocks-q4_k_m.gguf"
    for threads in $threads_list; do
        echo "== ours, $threads threads"
        RAYON_NUM_THREADS="$threads" SELFRAG_CPU_CHECK_MODEL="$gguf" SELFRAG_CPU_CHECK_BLOCKS="$blocks" \
            SELFRAG_CPU_CHECK_ROUNDS="$rounds" \
            "$bin/models" --ignored --exact cpu_timings::timings_of_this_cpu_by_prefetch_distance \
            --nocapture --test-threads 1 2>&1 | sed "s/cpu-check: /\ncpu-check: threads=$threads /" \
            | grep -v '^$' || failed=1
        echo "== llama.cpp, $threads threads"
        peer "$threads" | sed "s/cpu-check peer: /cpu-check peer: threads=$threads /" || failed=1
    done
    rm -rf "$bin"
    return "$failed"
}

main 2>&1 | tee "$out/cpu-check.txt"
status="${PIPESTATUS[0]}"
summarize 2>&1 | tee -a "$out/cpu-check.txt"
exit "$status"
