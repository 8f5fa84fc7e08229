// The architectures of the device images: included by build.rs (which compiles them) and by
// src/images.rs (which states them), so that both read the same numbers.

/// The compute capability [`MODULE_PTX`] is for (`80`: 8.0).
pub const MODULE_PTX_ARCH: u32 = 80;

/// The compute capability [`MODULE_CUBIN`] is for (`90`: 9.0).
pub const MODULE_CUBIN_ARCH: u32 = 90;
