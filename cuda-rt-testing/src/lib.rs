//! Property tests of GPU code against a CPU reference, on [cuda-rt](cuda_rt): "for every
//! input, my kernel computes what my CPU function computes", in a few lines, with the
//! failing input shrunk to the smallest one and shown around its first wrong element.
//!
//! And the policy every GPU test of the workspace follows: [`gpu`] skips a test loudly on a
//! machine without a GPU, and fails it instead when `CUDA_RT_REQUIRE_GPU=1`.
//!
//! # Requirements
//! A CUDA device to run the properties (without one they print `skipped <test>: no CUDA
//! device (...)` and pass having claimed nothing); cuda-rt's toolkit to build. The runner
//! re-runs the test binary in child processes (libtest's `--exact <test>`), so tests must use
//! libtest's harness. compute-sanitizer is optional (failing cases are replayed under it on
//! request).
//!
//! # Quick start
//! A kernel of your crate (`kernels/scale.cu`), written in the convention of cuda-rt's typed
//! launches (a buffer is a pointer and its length):
//! ```cuda
//! extern "C" __global__ void scale(uint32_t* out, size_t n, const uint32_t* in, size_t in_n,
//!                                  uint32_t k) {
//!     size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
//!     if (i < n && i < in_n) out[i] = in[i] * k;
//! }
//! ```
//! built by cuda-rt-build (`build.rs`, with `cuda-rt-build` as a build-dependency):
//! ```no_run
//! fn main() {
//!     cuda_rt_build::Build::new().file("kernels/scale.cu").compile("scale");
//! }
//! ```
//! and tested against the CPU for every input (in `tests/scale.rs`, inside a `#[test]`
//! function):
//! ```no_run
//! use cuda_rt::prelude::*;
//! use cuda_rt_testing::{compare::Exact, inputs};
//!
//! kernels! {
//!     /// `out[i] = in[i] * k` (wrapping), for `i < min(out.len(), in.len())`.
//!     unsafe fn scale(out: SliceMut<u32>, input: Slice<u32>, k: u32);
//! }
//!
//! cuda_rt_testing::check(
//!     // Lengths 0..=100 000, likely 0, 1, odd, 255, 256, 257; every distribution.
//!     inputs::data::<u32>(inputs::lengths(100_000, &[256])),
//!     |stream, input, output| {
//!         let config = LaunchConfig::for_len(input.len(), 256)?;
//!         scale()?.launch(stream, config, (output, input, 3))
//!     },
//!     |input| input.iter().map(|x| x.wrapping_mul(3)).collect(),
//!     Exact,
//! );
//! ```
//! A kernel that stops one element short fails with (the output was poisoned before the run,
//! and shrinking found the smallest input):
//! ```text
//! property 1 of `scale_matches_the_cpu` failed: 1 failing case, 3 of 48 cases passed (seed 0x..., 1 child process, 44 not run)
//!
//! case 3: output differs from the reference at index 0 (input of 1 elements)
//!   smallest failing input (after 14 shrinking steps): Data { len: 1, shrunk element-wise, values: [0] }
//!   | `output`: output differs from the reference: not equal at index 0 (1 elements differ)
//!   |   output has 1 elements, the reference 1
//!   |   index  input  reference      output
//!   | >     0      0          0  1515870810  (still the poison: never written)
//!   replay: CUDA_RT_TEST_SEED=0x... CUDA_RT_TEST_REPLAY=1:3:SSSCS... <test binary> --exact scale_matches_the_cpu --nocapture
//! ```
//!
//! # The map
//! | item | what |
//! |---|---|
//! | [`check`], [`check_in_place`], [`property`] | run a property, panic with its report when it fails |
//! | [`Check`] | the same with settings (cases, guard bands, poison, isolation, seed), returning a [`Verdict`]; [`Check::examples`] runs listed cases |
//! | [`Case`] | what the general form's closure gets: the stream, guarded inputs and poisoned outputs, downloads that check guard bands |
//! | [`inputs`] | proptest strategies: [`inputs::lengths`] around block and tile sizes, [`inputs::data`] in every [`inputs::Dist`], shrinking fast |
//! | [`compare`] | comparators: exact, bitwise, ULPs, tolerance, permutation, sorted, stable by key |
//! | [`GuardedBuffer`] | a device range between canary guard bands |
//! | [`Verdict`], [`Report`], [`CaseFailure`], [`Failure`] | what a run found, and why a case failed |
//! | [`Element`], [`Float`] | the primitives the strategies and comparators know |
//! | [`policy`] | [`gpu`] (skip or fail without a GPU) and the environment variables |
//!
//! # How a case runs
//! 1. The input is generated from the run's seed and the case's number, so that any case
//!    can be generated again, in another process or later ([`policy::REPLAY`]).
//! 2. [`check`] uploads it between guard bands (256 bytes of canary on each side, the range
//!    keeping `cudaMalloc`'s alignment), and allocates the output, as long as the CPU's
//!    result, between guard bands and filled with a poison byte.
//! 3. Your closure queues its work on the case's stream; the runner synchronizes it.
//! 4. The output's guard bands are checked (a write out of bounds is reported as one, with
//!    the element it hit), then the output is compared with the CPU's result, then the input
//!    is checked to be unchanged.
//! 5. A failing case is shrunk: proptest's moves, each run on the GPU, until no smaller input
//!    fails. The report gives the smallest input, the window around its first wrong element,
//!    and the command that replays it alone.
//!
//! Cases run in a child process of the test binary ([`Isolation`]): a case that loses the
//! CUDA context (an illegal address is sticky: every later CUDA call of the process fails) is
//! reported with its input, shrunk one fresh process per smaller input, and the remaining
//! cases run in a fresh child, so one fault does not fail every case after it, nor the other
//! tests of the binary. Under a sanitizer the cases run in the test's own process, where the
//! tool sees them. With `CUDA_RT_SANITIZE_FAILURES=1`, every failing case is replayed under
//! compute-sanitizer memcheck and racecheck, and their findings join the report.
//!
//! # Invariants
//! - A property never passes having checked nothing: without a GPU it says it was skipped
//!   (or fails, when one is required), and with one every case runs on it.
//! - An element the code under test does not write holds the poison, not a lucky value; a
//!   write out of bounds lands in the test's own guard band, never in other memory.
//! - A failure names the case, its smallest input, the first wrong element and its
//!   neighbours, never megabytes of numbers.

#![warn(missing_docs)]
// The quick start shows a build script, whose `fn main` is the point.
#![allow(clippy::needless_doctest_main)]

mod case;
pub mod compare;
mod element;
mod failure;
pub mod generated;
mod guard;
pub mod inputs;
mod isolation;
pub mod policy;
mod random;
pub mod ranks;
mod report;
mod runner;
mod sanitizer;

pub use case::Case;
pub use compare::Compare;
pub use element::{BitEq, Element, Float};
pub use failure::{Failure, FailureKind, Side};
pub use guard::{GuardedBuffer, Guards};
pub use policy::{error_name, gpu, gpu_required, why_no_device, Gpu};
/// The proptest this crate builds on, for strategies of your own (`proptest::prelude::any`,
/// `prop_oneof!`, tuples) without a dependency of your own on a matching version.
pub use proptest;
pub use random::SplitMix64;
pub use report::{CaseFailure, Report, Verdict};
pub use runner::{Check, Isolation};

#[doc(hidden)]
pub use failure::__ensure_eq_message;

use cuda_rt::{DeviceCopy, DeviceView, DeviceViewMut, Stream};
use proptest::strategy::Strategy;
use std::fmt::Debug;

/// For every input of `inputs`, the output that `gpu` computes from it on the device equals
/// (by `comparator`) what `cpu` computes from it: [`Check::check`] with the default settings.
///
/// `gpu(stream, input, output)` queues its work on `stream`; `output` has the length of
/// `cpu`'s result. See the [crate docs](crate) for an example.
///
/// # Panics
/// When the property fails (the message is the [`Report`]); without a GPU when
/// `CUDA_RT_REQUIRE_GPU=1`.
#[track_caller]
pub fn check<V, T, U, G, E, C, R>(inputs: impl Strategy<Value = V>, gpu: G, cpu: C, comparator: R)
where
    V: AsRef<[T]> + Debug,
    T: DeviceCopy + Debug,
    U: DeviceCopy + Debug,
    G: Fn(&Stream, &DeviceView<'_, T>, &mut DeviceViewMut<'_, U>) -> Result<(), E>,
    E: Into<Failure>,
    C: Fn(&[T]) -> Vec<U>,
    R: Compare<U>,
{
    Check::new()
        .check(inputs, gpu, cpu, comparator)
        .assert_passed();
}

/// For every input of `inputs`, `gpu` turns it, in place on the device, into what `cpu`
/// computes from it: [`Check::check_in_place`] with the default settings.
///
/// # Examples
/// ```no_run
/// use cuda_rt_testing::{compare::Sorted, inputs};
/// # fn my_sort(_: &cuda_rt::Stream, _: &mut cuda_rt::DeviceViewMut<'_, f32>) -> cuda_rt::Result<()> { Ok(()) }
/// cuda_rt_testing::check_in_place(
///     inputs::data::<f32>(inputs::lengths(1 << 20, &[1024, 4096])),
///     |stream, keys| my_sort(stream, keys),
///     |keys| keys.to_vec(),   // Sorted compares with any permutation of the input
///     Sorted::ascending(),
/// );
/// ```
///
/// # Panics
/// As for [`check`].
#[track_caller]
pub fn check_in_place<V, T, G, E, C, R>(
    inputs: impl Strategy<Value = V>,
    gpu: G,
    cpu: C,
    comparator: R,
) where
    V: AsRef<[T]> + Debug,
    T: DeviceCopy + Debug,
    G: Fn(&Stream, &mut DeviceViewMut<'_, T>) -> Result<(), E>,
    E: Into<Failure>,
    C: Fn(&[T]) -> Vec<T>,
    R: Compare<T>,
{
    Check::new()
        .check_in_place(inputs, gpu, cpu, comparator)
        .assert_passed();
}

/// For every input of `inputs`, `test` returns `Ok`: the general form ([`Check::property`]),
/// for code with several buffers, or checks other than a comparison. `test` gets the
/// [`Case`] (its stream, guarded buffers) and the input; `?` turns any error into a
/// [`Failure`], and [`ensure!`]/[`ensure_eq!`] are its assertions.
///
/// # Examples
/// ```no_run
/// use cuda_rt::prelude::*;
/// use cuda_rt_testing::inputs;
///
/// cuda_rt_testing::property(inputs::data::<u8>(inputs::lengths(1 << 16, &[])), |case, data| {
///     let mut device = DeviceBuffer::from_slice(data)?;
///     device.set_bytes_async(case.stream(), 7)?;
///     cuda_rt_testing::ensure_eq!(device.to_vec()?, vec![7u8; data.len()]);
///     Ok(())
/// });
/// ```
///
/// # Panics
/// As for [`check`].
#[track_caller]
pub fn property<S, F>(inputs: S, test: F)
where
    S: Strategy,
    S::Value: Debug,
    F: Fn(&mut Case, &S::Value) -> Result<(), Failure>,
{
    Check::new().property(inputs, test).assert_passed();
}
