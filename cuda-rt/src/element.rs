//! Element types: what may be copied byte for byte between host and device ([`DeviceCopy`]),
//! and the arithmetic of element counts that every kind of memory shares. Device memory
//! ([`crate::memory`]) and page-locked host memory ([`crate::pinned`]) both build on it.

use crate::error::{Error, ErrorKind, Result};
use std::mem::size_of;

/// Types whose values may be copied byte for byte between host and device memory.
///
/// # Safety
/// Implement it only for types that are:
/// - `Copy`, with no `Drop` and no ownership of anything (no `Box`, `Vec`, references whose
///   lifetime matters...);
/// - valid for **every** bit pattern of their size: device memory fresh from `cudaMalloc`, set
///   by `cudaMemset` to any byte, or written by a kernel is read back as `T` without checks.
///   So no `bool`, `char`, references, `NonZero*`, enums or types with such fields; padding
///   bytes are fine;
/// - free of interior mutability (no `Cell`, atomics or other `UnsafeCell`): the device reads
///   host data through shared borrows, which must not change under it;
/// - aligned to at most 256 bytes (the alignment of `cudaMalloc`).
///
/// It is implemented for the integer and floating-point primitives and for arrays of
/// `DeviceCopy` types. A `#[repr(C)]` struct of such fields may implement it:
///
/// ```
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Particle { position: [f32; 3], id: u32 }
/// // SAFETY: repr(C), fields are DeviceCopy, every bit pattern is a valid Particle.
/// unsafe impl cuda_rt::DeviceCopy for Particle {}
/// ```
pub unsafe trait DeviceCopy: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => {
        $(
            // SAFETY: a primitive number: Copy, every bit pattern valid, alignment <= 16.
            unsafe impl DeviceCopy for $t {}
        )*
    };
}
device_copy!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
// SAFETY: an array of DeviceCopy values is Copy, valid for every bit pattern, aligned like T.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

/// Bytes of `len` elements of `T`.
pub(crate) fn bytes_of<T>(len: usize, what: &'static str) -> Result<usize> {
    len.checked_mul(size_of::<T>())
        .ok_or_else(|| Error::new(ErrorKind::SizeOverflow, what))
}

pub(crate) fn check_len(expected: usize, actual: usize, what: &'static str) -> Result<()> {
    if expected == actual {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::LengthMismatch { expected, actual },
            what,
        ))
    }
}
