//! The binary's memory allocator: mimalloc, with glibc's malloc one environment variable
//! away for A/B measurements.
//!
//! Why: a training step makes and drops thousands of tensors of a few KB to a few MB on
//! several threads. glibc hands big blocks back to the OS and gives each thread's arena
//! fresh pages, so about a fifth of a CPU step went to page faults and zeroing pages in the
//! kernel (`perf` on the default pipeline), even with its mmap and trim thresholds raised
//! (`roll_flow::kernels::cpu::keep_freed_buffers_for_reuse`, what this binary did before).
//! mimalloc keeps freed pages per thread for reuse: the default pipeline's first 30 steps
//! ran 1.22x faster than with glibc as tuned before (`cargo bench --bench
//! pipeline_allocator`), its whole 500-step run 1.11x, with the same metrics
//! (bench/history/allocator.md). ripgrep makes the same kind of choice in its binary (jemalloc on musl).
//!
//! mimalloc still hands pages it has not reused for 10 ms back to the OS (its
//! `purge_delay`), and a step's big activations come back as fresh pages the kernel must
//! zero: `clear_page_erms` was 17% of a profile of a StarPO run with long chats. The
//! binary turns purging off (`purge_delay` -1), so the process keeps its peak working set
//! and reuses it; `MIMALLOC_PURGE_DELAY`, when set, still decides: 1000 (ms) gave 5-21%
//! lower peaks for about 5% more time, 0 9-33% lower for 43-65% more
//! (bench/history/allocator.md, "mimalloc's purge delay").
//!
//! `ROLL_FLOW_SYSTEM_MALLOC=1` (any value) selects glibc's malloc, with the raised
//! thresholds; add `ROLL_FLOW_DEFAULT_MALLOC=1` for glibc's own defaults. These are the
//! baselines of that benchmark. The choice is made once, at the first allocation, by
//! reading the variable with `getenv` (which allocates nothing), and never changes
//! afterwards, so every block is freed by the allocator that made it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// The environment variable that selects the system allocator (NUL-terminated for
/// `getenv`).
const SYSTEM_SWITCH: &[u8] = b"ROLL_FLOW_SYSTEM_MALLOC\0";

/// mimalloc's own variable for its purge delay (NUL-terminated for `getenv`).
const PURGE_DELAY_VARIABLE: &[u8] = b"MIMALLOC_PURGE_DELAY\0";

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (15 in both v2 and v3; the sys
/// crate names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

const UNDECIDED: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;

/// mimalloc unless `ROLL_FLOW_SYSTEM_MALLOC` is set when the process starts.
pub struct BinaryAllocator {
    choice: AtomicU8,
}

impl BinaryAllocator {
    pub const fn new() -> Self {
        BinaryAllocator {
            choice: AtomicU8::new(UNDECIDED),
        }
    }

    /// Whether this process allocates with the system allocator (glibc's malloc).
    pub fn uses_system(&self) -> bool {
        let mut choice = self.choice.load(Ordering::Relaxed);
        if choice == UNDECIDED {
            // SAFETY: a NUL-terminated name; getenv only reads the environment. Threads
            // racing here read the same variable and store the same answer.
            let set = unsafe { !libc::getenv(SYSTEM_SWITCH.as_ptr().cast()).is_null() };
            choice = if set { SYSTEM } else { MIMALLOC };
            if choice == MIMALLOC {
                keep_freed_pages();
            }
            self.choice.store(choice, Ordering::Relaxed);
        }
        choice == SYSTEM
    }

    /// The allocator every call goes to.
    fn chosen(&self) -> &'static dyn GlobalAlloc {
        if self.uses_system() {
            &System
        } else {
            &mimalloc::MiMalloc
        }
    }
}

/// Turns mimalloc's purging off unless `MIMALLOC_PURGE_DELAY` is set. Allocates nothing:
/// `mi_option_set` only stores the value.
fn keep_freed_pages() {
    // SAFETY: a NUL-terminated name; getenv only reads the environment.
    let user_set = unsafe { !libc::getenv(PURGE_DELAY_VARIABLE.as_ptr().cast()).is_null() };
    if !user_set {
        // SAFETY: a valid option id and value; the call writes one option slot.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

impl Default for BinaryAllocator {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call goes to one of two sound allocators, the same one for the life of the
// process (the choice is fixed before the first block is handed out).
unsafe impl GlobalAlloc for BinaryAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.chosen().alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.chosen().alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.chosen().dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.chosen().realloc(ptr, layout, new_size)
    }
}
