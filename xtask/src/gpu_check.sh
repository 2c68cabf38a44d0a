#!/usr/bin/env bash
# `cargo xtask gpu-check`, the half that runs on the machine with the GPU: copied into
# `.gpu-check/run.sh` by `cargo xtask gpu-check build`, run from the repository root as
# `bash .gpu-check/run.sh`. It needs no Rust and no network: the test binary was built with
# the `cuda` feature against CUDA 13.0; the driver's libcuda.so.1 and CUDA 13's cuBLAS (with
# cuBLASLt) and cuRAND come from the machine (a CUDA 13 toolkit, or the nvidia-* CUDA 13
# wheels of its Python), libcudart from the bundle where the machine has none.
#
# Steps: the GPU and the libraries found; the parity tests (the tiny generators and embedder
# on the GPU against the CPU); the timings (the benchmark's 7B-shaped Q4_K_M generator and
# BERT-base: prompt, decode, K = 5 batched decode, a whole answer); the peer (peer.py: PyTorch
# on the same GPU with the same shapes and token ids, where the machine's Python has torch and
# transformers; its failure is reported, never hides ours). Everything printed goes to
# $OUT/gpu-check.txt (else .gpu-check/out/), the timings' tables to
# $OUT/gpu-check-timings.md. Without a GPU (a dry run) it says "no CUDA device", still runs
# what runs on the CPU (the parity tests' CPU halves, which then fail for want of the device,
# and the timings on the CPU with a 1-block model), and exits 1.
#
# Knobs: SELFRAG_GPU_CHECK_BLOCKS (default 32), SELFRAG_GPU_CHECK_ROUNDS (3),
# SELFRAG_GPU_CHECK_PASSAGES (1000), SELFRAG_GPU_CHECK_MODELS (where the written models are
# kept; default /tmp/selfrag-gpu-check-models), SELFRAG_CUDA_LIB (a folder searched first).

set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$here/out}"
mkdir -p "$out"

# Folders that may hold CUDA 13's libraries: a toolkit, the system's, Python's nvidia wheels,
# the build's own cache (on the machine that built the bundle), the bundle.
candidate_dirs() {
    local site
    echo "${SELFRAG_CUDA_LIB:-}"
    # The image's own path first (the driver may be a mount, /usr/local/nvidia, off ldconfig).
    echo "${LD_LIBRARY_PATH:-}" | tr ':' '\n'
    ls -d /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
        /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /opt/conda/lib 2>/dev/null
    for site in $(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
        echo "$site/nvidia/cu13/lib"
    done
    echo "$HOME/.cache/selfrag-desktop/cuda/13.0/nvidia/cu13/lib"
    echo "$here/lib"
}

# The folders that hold library $1, best first: the candidates, then a search of the disk (not
# of the bundle) where none has it.
find_lib() {
    local name="$1" dir found=""
    while read -r dir; do
        if [ -n "$dir" ] && [ -e "$dir/$name" ]; then
            echo "$dir"
            found=1
        fi
    done < <(candidate_dirs)
    [ -n "$found" ] && return 0
    timeout 30 find / -xdev \( -path /proc -o -path /sys -o -path "$here" \) -prune -o -name "$name" -print 2>/dev/null \
        | xargs -r -n1 dirname | grep .
}

# The folder of the NVIDIA driver's libcuda.so.1: the loader's, else one found on disk, never a
# copy of the build's stand-in (which exports `selfrag_libcuda_stand_in`).
find_driver() {
    local dir
    while read -r dir; do
        if [ -n "$dir" ] && ! grep -qa selfrag_libcuda_stand_in "$dir/libcuda.so.1"; then
            echo "$dir"
            return 0
        fi
    done < <(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF}' | xargs -r -n1 dirname; find_lib libcuda.so.1)
    return 1
}

main() {
    local no_device="" gpu="" failed=() dirs=() name dir
    echo "# cargo xtask gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    cat "$here/BUILD" 2>/dev/null
    echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
    grep -m1 'model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: /CPU: /'

    if command -v nvidia-smi >/dev/null 2>&1 \
        && gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1)" \
        && [ -n "$gpu" ]; then
        echo "GPU (name, driver, memory, compute capability): $gpu"
    else
        no_device="nvidia-smi found no GPU${gpu:+ ($gpu)}"
    fi

    if dir="$(find_driver)"; then
        echo "libcuda.so.1: $dir"
        dirs+=("$dir")
    else
        no_device="${no_device:+$no_device; }no libcuda.so.1 (no NVIDIA driver)"
        # The build's stand-in, so that the binary starts and says so itself.
        echo "libcuda.so.1: none; the build's stand-in, whose every call fails"
        dirs+=("$here/stub")
    fi
    # What the binary links (ldd below checks the rest), and cuBLAS's own cuBLASLt.
    for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10; do
        if dir="$(find_lib "$name" | head -n 1)" && [ -n "$dir" ]; then
            echo "$name: $dir"
            dirs+=("$dir")
        else
            echo "$name: NOT FOUND (install the CUDA 13 toolkit, or pip's nvidia-* CUDA 13 wheels, or set SELFRAG_CUDA_LIB)"
            failed+=("libraries")
        fi
    done
    # The binary travels gzipped; inflated outside the bundle, which may be read-only.
    local bin
    bin="$(mktemp -d "${TMPDIR:-/tmp}/selfrag-gpu-check.XXXXXX")/models"
    if ! gzip -dc "$here/models.gz" > "$bin" || ! chmod +x "$bin"; then
        echo "FAILED: cannot inflate $here/models.gz into $bin"
        return 1
    fi
    local path
    path="$(printf '%s\n' "${dirs[@]}" | awk '!seen[$0]++' | paste -sd: -)"
    export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if [ ${#failed[@]} -gt 0 ]; then
        echo "FAILED: the CUDA libraries the binary links are missing"
        return 1
    fi
    if ldd "$bin" | grep 'not found'; then
        echo "FAILED: the test binary cannot start"
        return 1
    fi
    [ -n "$no_device" ] && echo "no CUDA device: $no_device; running what runs on the CPU"
    # Candle's errors carry a backtrace where RUST_BACKTRACE is set: a panic's is enough.
    export RUST_LIB_BACKTRACE=0

    # Under CI=true a test that finds no GPU fails instead of logging a skip.
    echo
    echo "## parity: the tiny models on the GPU against the CPU"
    SECONDS=0
    if ! CI=true timeout 150 "$bin" gpu:: --test-threads=1 --nocapture; then
        failed+=("parity")
    fi
    echo "(parity: ${SECONDS} s)"

    echo
    echo "## timings: the benchmark's shapes"
    local models="${SELFRAG_GPU_CHECK_MODELS:-/tmp/selfrag-gpu-check-models}"
    SECONDS=0
    # The timings' tables, under the machine they were measured on.
    {
        echo "GPU (name, driver, memory, compute capability): ${gpu:-none ($no_device)}"
        echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/^model name[[:space:]]*: //')"
        cat "$here/BUILD" 2>/dev/null
    } > "$out/gpu-check-timings.md"
    # What the peer reads: our figures, and the token ids we fed.
    local figures="$out/gpu-check-figures.txt" ids="$out/gpu-check-ids.json"
    rm -f "$figures" "$ids"
    export SELFRAG_GPU_CHECK_FIGURES="$figures" SELFRAG_GPU_CHECK_IDS="$ids"
    if [ -z "$no_device" ]; then
        CI=true SELFRAG_GPU_CHECK_REPORT="$out/gpu-check-timings.md" SELFRAG_GPU_CHECK_MODELS="$models" \
            timeout 300 "$bin" gpu::timings --ignored --test-threads=1 --nocapture \
            || failed+=("timings")
    else
        echo "(no GPU: the timings' code on the CPU, with a 1-block model, 1 round and 16 passages)"
        CI=true SELFRAG_GPU_CHECK_DEVICE=cpu SELFRAG_GPU_CHECK_BLOCKS=1 SELFRAG_GPU_CHECK_ROUNDS=1 \
            SELFRAG_GPU_CHECK_PASSAGES=16 SELFRAG_GPU_CHECK_REPORT="$out/gpu-check-timings.md" \
            SELFRAG_GPU_CHECK_MODELS="$models-dry-run" \
            timeout 300 "$bin" gpu::timings --ignored --test-threads=1 --nocapture \
            || failed+=("timings (on the CPU)")
    fi
    echo "(timings: ${SECONDS} s)"

    # The peer after ours, so that nothing of it can slow or stop our figures. Its own
    # failures are noted apart: they say nothing of ours.
    echo
    echo "## peer: PyTorch on the same GPU"
    local peer_note=""
    SECONDS=0
    if [ ! -s "$ids" ]; then
        peer_note="not run: the timings wrote no token ids"
    elif ! command -v python3 >/dev/null 2>&1; then
        peer_note="not run: no python3"
    else
        local dry=()
        [ -n "$no_device" ] && dry=(--dry-run)
        timeout 180 python3 "$here/peer.py" --ids "$ids" --ours "$figures" \
            --table "$out/gpu-check-timings.md" ${dry[@]+"${dry[@]}"} \
            || peer_note="incomplete (exit $?; see above)"
    fi
    [ -n "$peer_note" ] && echo "peer: $peer_note"
    echo "(peer: ${SECONDS} s)"
    echo
    cat "$out/gpu-check-timings.md"

    echo
    if [ -n "$no_device" ]; then
        echo "gpu-check: no CUDA device: $no_device${failed[*]:+; failed: ${failed[*]}}"
        return 1
    fi
    if [ ${#failed[@]} -gt 0 ]; then
        echo "gpu-check: FAILED: ${failed[*]}${peer_note:+ (the peer: $peer_note)}"
        return 1
    fi
    echo "gpu-check: passed${peer_note:+ (the peer: $peer_note)}"
}

main "$@" 2>&1 | tee "$out/gpu-check.txt"
exit "${PIPESTATUS[0]}"
