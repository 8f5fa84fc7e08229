//! Code loaded at run time: a [`Library`] from PTX, cubin or fatbin bytes
//! (`cudaLibraryLoadData`), and its typed kernels.
//!
//! PTX is compiled by the driver for the device it runs on (just in time), so a library built
//! as PTX for an older architecture runs on newer GPUs; cubin runs on the architecture it was
//! built for; a fatbin carries several of both and the driver picks.
//!
//! # Examples
//! ```no_run
//! use cuda_rt::{DeviceBuffer, Library, LaunchConfig, SliceMut, Stream};
//! const PTX: &str = "..."; // e.g. include_str!(concat!(env!("OUT_DIR"), "/fill.ptx"))
//! let library = Library::load_ptx(PTX)?;
//! // SAFETY: `fill` is `extern "C" __global__ void fill(unsigned* out, size_t n, unsigned v)`,
//! // which writes `out[i] = v` for `i < n` only.
//! let fill = unsafe { library.kernel::<(SliceMut<u32>, u32)>("fill") }?;
//! let stream = Stream::new()?;
//! let mut out = DeviceBuffer::<u32>::zeroed(1000)?;
//! fill.launch(&stream, LaunchConfig::for_items(1000, 256), (&mut out, 7))?;
//! assert_eq!(out.to_vec()?, vec![7; 1000]);
//! # Ok::<(), cuda_rt::Error>(())
//! ```

use crate::error::{defer, defer_result, Error, ErrorKind, Result};
use crate::kernel::{Kernel, KernelParams};
use crate::raw::{self, RawLibrary};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// Code loaded at run time (`cudaLibrary_t`), for all devices of the process.
///
/// Unloaded (`cudaLibraryUnload`) when the library and every [`Kernel`] taken from it are
/// dropped; that last drop first waits until every device is idle
/// (`cudaDeviceSynchronize`), since a kernel of the library may still be running.
///
/// # Thread safety
/// `Send + Sync`; its kernels may be launched from any thread.
#[derive(Debug, Clone)]
pub struct Library {
    hold: Arc<LibraryHold>,
}

#[derive(Debug)]
struct LibraryHold {
    raw: RawLibrary,
}

// SAFETY: a library handle may be used from any thread (the runtime API is thread-safe);
// nothing of it is mutated after loading.
unsafe impl Send for LibraryHold {}
// SAFETY: as above.
unsafe impl Sync for LibraryHold {}

/// The first bytes of an ELF image (a cubin).
const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
/// The first bytes of a fatbin (`0xBA55ED50`, little-endian).
const FATBIN_MAGIC: [u8; 4] = [0x50, 0xed, 0x55, 0xba];

impl Library {
    /// Loads a cubin, a fatbin or PTX (`cudaLibraryLoadData`). PTX need not end with a NUL
    /// byte (one is appended on a copy when missing); binary images are passed as they are.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] for empty bytes; CUDA errors: `cudaErrorInvalidPtx`,
    /// `cudaErrorUnsupportedPtxVersion` (PTX newer than the driver), `cudaErrorInvalidImage`,
    /// `cudaErrorNoKernelImageForDevice`, ...
    pub fn load(image: &[u8]) -> Result<Library> {
        const WHAT: &str = "Library::load";
        if image.is_empty() {
            return Err(Error::new(ErrorKind::OutOfRange, WHAT));
        }
        let binary = image.starts_with(&ELF_MAGIC) || image.starts_with(&FATBIN_MAGIC);
        let text: Vec<u8>;
        let bytes = if binary || image.ends_with(&[0]) {
            image
        } else {
            text = [image, &[0]].concat();
            &text
        };
        // SAFETY: `bytes` is a binary image or NUL-terminated text, readable during the call (the
        // driver copies what it keeps); a malformed image is reported by the call.
        let raw = unsafe { raw::library_load_data(bytes.as_ptr().cast::<c_void>()) }
            .map_err(|e| e.context(WHAT))?;
        Ok(Library {
            hold: Arc::new(LibraryHold { raw }),
        })
    }

    /// Loads PTX text (`cudaLibraryLoadData`); see [`load`](Self::load).
    ///
    /// # Errors
    /// As for [`load`](Self::load).
    pub fn load_ptx(ptx: &str) -> Result<Library> {
        Library::load(ptx.as_bytes())
    }

    /// The typed handle of the kernel named `name` (`cudaLibraryGetKernel`; the mangled name
    /// for a C++ kernel, the plain name for an `extern "C"` one), checked against `P` like
    /// [`Kernel::from_raw`]. The kernel keeps the library loaded.
    ///
    /// # Errors
    /// `cudaErrorSymbolNotFound` when there is no such kernel (also for a name with a NUL
    /// byte); [`ErrorKind::KernelSignature`] when `P` does not match.
    ///
    /// # Safety
    /// The claim of [`Kernel::from_raw`]: the kernel's parameters are those of `P`, and it
    /// accesses memory only through its `Slice`/`SliceMut` parameters, within their lengths.
    pub unsafe fn kernel<P: KernelParams>(&self, name: &str) -> Result<Kernel<P>> {
        const WHAT: &str = "Library::kernel";
        let name = CString::new(name)
            .map_err(|_| Error::cuda(raw::status::SYMBOL_NOT_FOUND, "cudaLibraryGetKernel"))
            .map_err(|e| e.context(WHAT))?;
        // SAFETY: our live library.
        let kernel = unsafe { raw::library_get_kernel(self.hold.raw, &name) }
            .map_err(|e| e.context(WHAT))?;
        let owner: Arc<dyn std::any::Any + Send + Sync> = self.hold.clone();
        // SAFETY: a kernel handle of the library, which `owner` keeps loaded; CUDA takes a
        // `cudaKernel_t` wherever it takes a kernel's address; the caller's claim on `P`.
        unsafe { Kernel::with_owner(kernel.cast_const().cast(), Some(owner)) }
            .map_err(|e| e.context(WHAT))
    }

    /// The raw library handle, valid while `self` lives.
    pub fn as_raw(&self) -> RawLibrary {
        self.hold.raw
    }
}

impl Drop for LibraryHold {
    fn drop(&mut self) {
        if crate::callback::leak_if_in_callback("Library::drop") {
            return;
        }
        // A kernel of the library may still run on any device: wait for all of them first.
        if let Err(e) = synchronize_all_devices() {
            // The code may still be in use: keep it loaded (leaked) rather than unload it.
            defer(e.context("Library::drop"));
            return;
        }
        // SAFETY: our live library; no kernel of it runs (all devices are idle) and none can be
        // launched (every Kernel holding it is gone).
        defer_result(
            unsafe { raw::library_unload(self.raw) }.map_err(|e| e.context("Library::drop")),
        );
    }
}

fn synchronize_all_devices() -> Result<()> {
    // SAFETY: no preconditions.
    let count = unsafe { raw::get_device_count() }?;
    for device in 0..count {
        crate::device::with_current(device, || {
            // SAFETY: no preconditions.
            unsafe { raw::device_synchronize() }
        })?;
    }
    Ok(())
}
