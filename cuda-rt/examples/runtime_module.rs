//! Port of the CUDA samples that load device code at run time (`vectorAddDrv`,
//! `matrixMulDrv`, ...: `cuModuleLoadData` then `cuModuleGetFunction`): a vector addition whose
//! kernel comes from PTX loaded while the program runs.
//!
//! ```text
//! cargo run --release -p cuda-runtime --example runtime_module
//! ```
//!
//! Those samples show that kernels need not be linked into the program: a module (PTX, a
//! cubin or a fatbin) is loaded, a kernel looked up by name and launched with its arguments as
//! an array of pointers. The port loads the PTX of `test-kernels/kernels/module.cu` (built by
//! `test-kernels/build.rs`, embedded as `cuda_rt_test_kernels::images::MODULE_PTX`) with
//! [`Library::load_ptx`]: the driver compiles it for the GPU it meets. [`Library::kernel`] looks a
//! kernel up *with its parameter list*, which is checked against the compiled kernel (the number
//! and sizes of its parameters), so the launch takes typed arguments instead of `void**`; that
//! the kernel stays within its buffers is the claim its `unsafe` makes. The kernel keeps the
//! library loaded for as long as it lives.

#[cfg(cudart_ge = "12.8")]
// The lessons' `common::main`: skip without a GPU, fail under CUDA_RT_REQUIRE_GPU=1.
#[path = "../../lessons/examples/common/mod.rs"]
mod common;

#[cfg(cudart_ge = "12.8")]
use cuda_rt::{prelude::*, LaunchConfig, Library, Slice, SliceMut};
#[cfg(cudart_ge = "12.8")]
use cuda_rt_test_kernels::images::{MODULE_PTX, MODULE_PTX_ARCH};
use std::process::ExitCode;

#[cfg(cudart_ge = "12.8")]
const ELEMENTS: usize = 50_000;

#[cfg(cudart_ge = "12.8")]
fn main() -> ExitCode {
    common::main("runtime_module", run)
}

/// Loaded libraries need `cudaLibraryLoadData`, which CUDA runtimes before 12.8 lack.
#[cfg(not(cudart_ge = "12.8"))]
fn main() -> ExitCode {
    println!(
        "runtime_module: skipped: loaded libraries need a CUDA runtime of 12.8 or newer; this \
         build links CUDA {}",
        cuda_rt_sys::TOOLKIT_CUDART_VERSION
    );
    ExitCode::SUCCESS
}

#[cfg(cudart_ge = "12.8")]
fn run() -> common::Result {
    let library = Library::load_ptx(MODULE_PTX)?;
    // SAFETY: `add_u64` of kernels/module.cu is `extern "C" __global__ void add_u64(uint64_t*
    // out, size_t n, const uint64_t* a, size_t an, const uint64_t* b, size_t bn)`, which writes
    // out[i] = a[i] + b[i] for i < min(n, an, bn) only, for any grid.
    let add = unsafe { library.kernel::<(SliceMut<u64>, Slice<u64>, Slice<u64>)>("add_u64") }?;
    let attributes = add.attributes()?;
    println!(
        "loaded add_u64 from PTX for compute_{MODULE_PTX_ARCH}: compiled by the driver for sm_{}, {} registers per thread",
        attributes.binary_version, attributes.num_regs
    );

    let a: Vec<u64> = (0..ELEMENTS as u64).map(|i| i * i).collect();
    let b: Vec<u64> = (0..ELEMENTS as u64).map(|i| u64::MAX - i).collect();
    let (device_a, device_b) = (DeviceBuffer::from_slice(&a)?, DeviceBuffer::from_slice(&b)?);
    let mut device_c = DeviceBuffer::<u64>::new(ELEMENTS)?;
    let stream = Stream::new()?;
    add.launch(
        &stream,
        LaunchConfig::for_len(ELEMENTS, 256)?,
        (&mut device_c, &device_a, &device_b),
    )?;
    let c = device_c.to_vec()?;
    for (i, ((x, y), sum)) in a.iter().zip(&b).zip(&c).enumerate() {
        if x.wrapping_add(*y) != *sum {
            return Err(format!("element {i}: {x} + {y} is not {sum}").into());
        }
    }
    Ok(())
}
