//! Large output buffers. A fresh multi-megabyte allocation is mapped by the OS page by
//! page on first touch; for a `[N, V]` gradient (hundreds of MB) the 4 KiB page faults
//! cost more than the arithmetic (measured with `bench/kernels.rs -- --parts`: the
//! log-prob backward into a fresh buffer took ~4× as long as the same pass in place, on
//! the 2-core VM). On Linux the buffer is advised to use transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`, 2 MiB pages, honoured when THP is in `madvise` or `always`
//! mode; harmless otherwise), 512× fewer faults.

/// Asks glibc's allocator to serve allocations up to 64 MiB from its heap and to keep up to
/// 256 MiB of freed memory there (`mallopt` `M_MMAP_THRESHOLD` / `M_TRIM_THRESHOLD`).
///
/// By default glibc maps every allocation above its mmap threshold (128 KiB at start,
/// raised only as blocks are freed) as fresh pages and unmaps it on free, so a training
/// step's many short-lived tensors of a few hundred KB pay a page fault per 4 KiB on first
/// touch, every step. Measured on the 2-core VM (`bench/kernels.rs`, three alternating
/// runs): GAE 256×512 at 0.32–0.36 ms per call against 0.36–0.58 ms with glibc's defaults
/// (its two 512 KB outputs are reused instead of faulted in); the same setting through
/// glibc's environment tunables gave the model bench's training 5–8% in one A/B. With it,
/// pre-faulting outputs (`MADV_POPULATE_WRITE`) only costs a system call: GAE went from
/// 0.14–0.20 ms to 0.05 ms in two of three alternating runs without it, so the outputs are
/// plain allocations. The cost is up to 256 MiB of freed memory kept mapped. Call once at
/// process start. Returns whether both settings took (false off glibc, where this is a
/// no-op, and when `ROLL_FLOW_DEFAULT_MALLOC` is set, which keeps glibc's defaults for A/B
/// measurements).
pub fn keep_freed_buffers_for_reuse() -> bool {
    if std::env::var_os("ROLL_FLOW_DEFAULT_MALLOC").is_some() {
        return false;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt takes the arena lock; it only changes allocation policy.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// A zeroed `Vec<f32>` of `len`, backed by huge pages where the OS allows.
pub(crate) fn zeroed(len: usize) -> Vec<f32> {
    let mut v = uninit(len);
    v.resize(len, 0.0);
    v
}

/// An empty `Vec<f32>` with capacity for `len`, backed by huge pages where the OS allows,
/// for a caller that writes every element (through `spare_capacity_mut`) before `set_len`:
/// a pass that zeroes 262 MB first costs as much as writing the result.
pub(crate) fn uninit(len: usize) -> Vec<f32> {
    let v: Vec<f32> = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    advise_huge_pages(&v);
    v
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(v: &Vec<f32>) {
    const HUGE_PAGE: usize = 2 << 20;
    let bytes = v.capacity() * size_of::<f32>();
    if bytes < 4 * HUGE_PAGE {
        return;
    }
    let start = v.as_ptr() as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE);
    let len = (start + bytes - aligned) / HUGE_PAGE * HUGE_PAGE;
    // SAFETY: [aligned, aligned + len) lies inside the vector's allocation, which nothing
    // else references; MADV_HUGEPAGE only changes how the OS backs the range, and a
    // failure (e.g. THP disabled) leaves it as it was.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}
