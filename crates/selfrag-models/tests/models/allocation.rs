//! A global allocator for this test binary that records, per thread, the largest single
//! allocation and the bytes held (allocated minus freed). So a test can assert that loading a
//! corrupt file never asked for gigabytes (with overcommit, such an allocation can succeed and
//! go unnoticed until it is touched), and how much memory a loaded model holds.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // `const` and `Cell<usize>`: no lazy initialisation and no destructor, so the allocator can
    // touch it at any time, also while the thread is being set up or torn down.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|largest| {
        if size > largest.get() {
            largest.set(size);
        }
    });
    held(size as isize);
}

fn held(delta: isize) {
    let _ = HELD.try_with(|held| held.set(held.get() + delta));
}

/// The system allocator, plus the per-thread record of the largest request.
pub struct Tracking;

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// `note` only writes a thread-local integer and never allocates.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        held(-(layout.size() as isize));
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        held(-(layout.size() as isize));
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Runs `f` and returns its result with the largest single allocation it made on this thread.
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LARGEST.with(|largest| largest.replace(0));
    let value = f();
    let during = LARGEST.with(|largest| largest.replace(before.max(largest.get())));
    (value, during)
}

/// Runs `f` and returns its result with the bytes this thread allocated during `f` and had not
/// freed when it returned (what the result holds, if `f` allocates only on this thread).
pub fn bytes_held<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let before = HELD.with(Cell::get);
    let value = f();
    (value, HELD.with(Cell::get) - before)
}
