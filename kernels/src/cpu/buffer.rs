//! Large output buffers. A fresh multi-megabyte allocation is mapped by the OS page by
//! page on first touch; for a `[N, V]` gradient (hundreds of MB) the 4 KiB page faults
//! cost more than the arithmetic (measured with `bench/kernels.rs -- --parts`: the
//! log-prob backward into a fresh buffer took ~4× as long as the same pass in place, on
//! the 2-core VM). On Linux the buffer is advised to use transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`, 2 MiB pages, honoured when THP is in `madvise` or `always`
//! mode; harmless otherwise), 512× fewer faults.

/// A zeroed `Vec<f32>` of `len`, backed by huge pages where the OS allows.
pub(crate) fn zeroed(len: usize) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    advise_huge_pages(&v);
    v.resize(len, 0.0);
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
