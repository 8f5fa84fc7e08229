//! The kernels of cuda-rt's numbered lessons (`examples/`), compiled from `kernels/*.cu` by
//! `build.rs` and declared here once, as a crate of your own declares its kernels.
//!
//! Each declaration's `unsafe` is the promise that the kernel has these parameters and stays
//! within the memory it is given; each launch then needs no `unsafe`. Run a lesson with
//! `cargo run --release -p cuda-rt-lessons --example 06_chunks_on_streams` (or, in a copy of
//! this folder, `cargo run --release --example 06_chunks_on_streams`).

use cuda_rt::{kernels, ConditionHandle, Len, Ptr, PtrMut, Slice, SliceMut};

kernels! {
    /// `data[i] += value`, `repeat` times (wrapping): a kernel whose running time grows with
    /// `repeat` (`kernels/increment.cu`).
    pub unsafe fn increment(data: SliceMut<i32>, value: i32, repeat: u32);
    /// `y[i] = a * x[i] + y[i]` for `i < min(y.len(), x.len())` (`kernels/saxpy.cu`).
    pub unsafe fn saxpy(y: SliceMut<f32>, x: Slice<f32>, a: f32);
    /// The same with bare pointers and a count, as C++ code writes it: `y[i] = a * x[i] +
    /// y[i]` for `i < n` (`kernels/saxpy.cu`).
    pub unsafe fn saxpy_count(n: Len<i32>, a: f32, x: Ptr<f32>, y: PtrMut<f32>);
    /// One Jacobi step of the 1-D Laplace equation, `next[i] = (cur[i - 1] + cur[i + 1]) / 2`
    /// inside and the ends copied, over `min(next.len(), cur.len())` points; the largest change
    /// is folded into `change[0]` as the bits of an `f32` (`kernels/laplace.cu`).
    pub unsafe fn jacobi_step(next: SliceMut<f32>, cur: Slice<f32>, change: SliceMut<u32>);
    /// Sets `condition` to whether the last change (`state[0]`, `f32` bits, reset to zero) is
    /// above `tolerance` and fewer than `max_steps` decisions (`state[1]`, counted up) were
    /// made; one thread (`kernels/laplace.cu`).
    pub unsafe fn not_converged(
        state: SliceMut<u32>,
        tolerance: f32,
        max_steps: u32,
        condition: ConditionHandle,
    );
}
