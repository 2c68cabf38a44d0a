//! The extraction worker's memory limit, the same on every OS: [`WorkerHeap`], a global allocator
//! that counts the bytes the worker holds and ends it with [`HEAP_LIMIT_EXIT`] before an
//! allocation would take it past the limit its parent set ([`HEAP_LIMIT_ENV`]).
//!
//! An rlimit on the child needs `unsafe` before `exec` (forbidden here) or a helper program
//! (Linux's `prlimit`, which macOS and Windows lack), and macOS does not enforce `RLIMIT_AS` at
//! all. Counting in the allocator needs nothing from the OS: every parser here is Rust, so every
//! byte a decompression bomb inflates passes through it. In a process that is not a worker the
//! limit is off and each allocation costs one relaxed load more than the system allocator.

// The one `unsafe` here is the `GlobalAlloc` contract itself: every call is passed on to
// `System` with the caller's own arguments, and the counting around it touches no pointer.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

/// Set by the parent to the most bytes of heap the worker may hold.
pub const HEAP_LIMIT_ENV: &str = "SELFRAG_WORKER_HEAP_LIMIT";

/// Exit code of a worker that reached its heap limit.
pub const HEAP_LIMIT_EXIT: i32 = 4;

/// The limit while it is off (not a worker, or the limit was reached and the worker is exiting).
const OFF: isize = isize::MAX;

static LIMIT: AtomicIsize = AtomicIsize::new(OFF);
/// Bytes allocated minus bytes freed since the limit was set (what was freed of the heap held
/// before then makes it a little low, never high).
static HELD: AtomicIsize = AtomicIsize::new(0);
/// Set when an allocation of exactly [`PROBE`] bytes was counted: proof that this allocator is
/// the global one. (Comparing `HELD` before and after would race with other threads' frees.)
static PROBED: AtomicBool = AtomicBool::new(false);
/// An allocation size nothing else asks for (a prime just under 64 KiB).
const PROBE: usize = 65_521;

/// The global allocator of every binary that can be an extraction worker:
///
/// ```ignore
/// #[global_allocator]
/// static HEAP: selfrag_index::worker::WorkerHeap = selfrag_index::worker::WorkerHeap;
/// ```
///
/// A worker whose binary lacks it refuses to parse (see [`WorkerHeap::limit_from_env`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerHeap;

impl WorkerHeap {
    /// Sets the limit the parent gave in [`HEAP_LIMIT_ENV`], if any. [`super::main_if_worker`]
    /// calls it; a worker binary that allocates before that calls it first. An error when the
    /// limit is malformed or this binary's global allocator is not [`WorkerHeap`].
    pub fn limit_from_env() -> Result<(), String> {
        let Some(value) = std::env::var_os(HEAP_LIMIT_ENV) else {
            return Ok(());
        };
        let bytes = value
            .to_str()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("{HEAP_LIMIT_ENV}={value:?} is not a number of bytes"))?;
        limit(bytes)
    }
}

/// Turns the limit on at `bytes`, after checking that allocations are counted at all.
fn limit(bytes: u64) -> Result<(), String> {
    let bytes = isize::try_from(bytes).unwrap_or(OFF - 1);
    HELD.store(0, Relaxed);
    LIMIT.store(bytes, Relaxed);
    let probe: Vec<u8> = Vec::with_capacity(PROBE);
    drop(std::hint::black_box(probe));
    if PROBED.load(Relaxed) {
        Ok(())
    } else {
        LIMIT.store(OFF, Relaxed);
        Err(
            "this program's global allocator is not selfrag_index::worker::WorkerHeap, so the \
             worker's memory limit cannot hold; parsing is refused (a build defect: declare \
             WorkerHeap as #[global_allocator] in the binary's main.rs)"
                .into(),
        )
    }
}

/// Counts `bytes` about to be allocated; past the limit the worker exits instead.
fn take(bytes: usize) {
    let limit = LIMIT.load(Relaxed);
    if limit == OFF {
        return;
    }
    if bytes == PROBE {
        PROBED.store(true, Relaxed);
    }
    let bytes = isize::try_from(bytes).unwrap_or(OFF);
    let held = HELD.fetch_add(bytes, Relaxed).saturating_add(bytes);
    // Only the first thread past the limit exits; what exiting allocates is no longer counted.
    if held > limit && LIMIT.swap(OFF, Relaxed) != OFF {
        std::process::exit(HEAP_LIMIT_EXIT);
    }
}

fn give_back(bytes: usize) {
    if LIMIT.load(Relaxed) != OFF {
        HELD.fetch_sub(isize::try_from(bytes).unwrap_or(0), Relaxed);
    }
}

// SAFETY: each method forwards its arguments unchanged to `System`, which upholds the contract;
// `take` and `give_back` only update counters.
unsafe impl GlobalAlloc for WorkerHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        give_back(layout.size());
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            take(new_size - layout.size());
        } else {
            give_back(layout.size() - new_size);
        }
        // SAFETY: the caller's pointer, layout and size, as `GlobalAlloc::realloc` requires.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unit tests' binary keeps the system allocator: the limit must refuse to pretend.
    #[test]
    fn a_binary_without_the_worker_heap_is_told_so() {
        let err = limit(1 << 30).unwrap_err();
        assert!(err.contains("WorkerHeap"), "{err}");
        assert_eq!(LIMIT.load(Relaxed), OFF);
    }
}
