//! Code loaded at run time: a [`Library`] from PTX, cubin or fatbin bytes
//! (`cudaLibraryLoadData`), and its typed kernels.
//!
//! The runtime has these calls from CUDA 12.8 on: built against an older toolkit, cuda-rt has
//! no `module`.
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
    /// Loads a cubin, a fatbin or PTX (`cudaLibraryLoadData`): binary images are recognized by
    /// their magic numbers and passed as they are (after checking that the sizes their headers
    /// declare lie within `image`); anything else is PTX text, given a NUL byte on a copy when
    /// it has none.
    ///
    /// Broken code may be reported here or only by [`kernel`](Self::kernel), where the driver
    /// compiles (PTX) or reads a kernel first.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] for empty bytes and for a binary image shorter than its header
    /// says; CUDA errors: `cudaErrorInvalidPtx`, `cudaErrorUnsupportedPtxVersion` (PTX newer
    /// than the driver), `cudaErrorInvalidImage`, `cudaErrorNoKernelImageForDevice`, ...
    ///
    /// # Safety
    /// A binary image (cubin or fatbin) must be complete and well formed, as nvcc or ptxas
    /// wrote it (`include_bytes!` of a build output, say): the driver reads it without a length,
    /// trusting the offsets inside. PTX text carries no such risk ([`load_ptx`](Self::load_ptx)
    /// is safe).
    pub unsafe fn load(image: &[u8]) -> Result<Library> {
        const WHAT: &str = "Library::load";
        if image.is_empty() {
            return Err(Error::new(ErrorKind::OutOfRange, WHAT));
        }
        let binary = image.starts_with(&ELF_MAGIC) || image.starts_with(&FATBIN_MAGIC);
        if binary && !declared_sizes_fit(image) {
            return Err(Error::new(ErrorKind::OutOfRange, WHAT));
        }
        let text: Vec<u8>;
        let bytes = if binary || image.ends_with(&[0]) {
            image
        } else {
            text = [image, &[0]].concat();
            &text
        };
        // SAFETY: `bytes` is a binary image that the caller vouches for, or NUL-terminated
        // text, readable during the call (the driver copies what it keeps).
        let raw = unsafe { raw::library_load_data(bytes.as_ptr().cast::<c_void>()) }
            .map_err(|e| e.context(WHAT))?;
        Ok(Library {
            hold: Arc::new(LibraryHold { raw }),
        })
    }

    /// Loads PTX text (`cudaLibraryLoadData`), given a NUL byte on a copy when it has none.
    ///
    /// # Errors
    /// As for [`load`](Self::load).
    pub fn load_ptx(ptx: &str) -> Result<Library> {
        const WHAT: &str = "Library::load_ptx";
        if ptx.is_empty() {
            return Err(Error::new(ErrorKind::OutOfRange, WHAT));
        }
        let owned: String;
        let text = if ptx.ends_with('\0') {
            ptx
        } else {
            owned = format!("{ptx}\0");
            &owned
        };
        // SAFETY: NUL-terminated text (the driver reads up to the first NUL), readable during
        // the call; whatever the text says, it is parsed as PTX and rejected if malformed.
        let raw = unsafe { raw::library_load_data(text.as_ptr().cast::<c_void>()) }
            .map_err(|e| e.context(WHAT))?;
        Ok(Library {
            hold: Arc::new(LibraryHold { raw }),
        })
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

/// Whether the sizes a binary image's header declares lie within it: a fatbin's header and
/// payload, an ELF file's section and program header tables and its sections' contents.
fn declared_sizes_fit(image: &[u8]) -> bool {
    let len = image.len() as u64;
    let u16_at = |at: usize| {
        image
            .get(at..at + 2)
            .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
    };
    let u32_at = |at: usize| {
        image
            .get(at..at + 4)
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
    };
    let u64_at = |at: usize| {
        image
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0xff; 8])))
    };
    let within = |start: Option<u64>, size: Option<u64>| match (start, size) {
        (Some(s), Some(n)) => s.checked_add(n).is_some_and(|end| end <= len),
        _ => false,
    };
    if image.starts_with(&FATBIN_MAGIC) {
        // magic u32, version u16, header size u16, payload size u64.
        return within(u16_at(6), u64_at(8));
    }
    // ELF64, little-endian (cubins are): the header is 64 bytes.
    if image.len() < 64 || image[4] != 2 || image[5] != 1 {
        return false;
    }
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    let table = |off: Option<u64>, size: Option<u64>, count: Option<u64>| {
        within(off, size.zip(count).map(|(s, c)| s * c))
    };
    if !table(phoff, phentsize, phnum) || !table(shoff, shentsize, shnum) {
        return false;
    }
    let (Some(shoff), Some(shentsize), Some(shnum)) = (shoff, shentsize, shnum) else {
        return false;
    };
    (0..shnum).all(|i| {
        let at = (shoff + i * shentsize) as usize;
        // SHT_NOBITS (8) sections occupy no bytes of the file.
        let kind = u32_at(at + 4);
        kind == Some(8) || within(u64_at(at + 0x18), u64_at(at + 0x20))
    })
}

impl Drop for LibraryHold {
    fn drop(&mut self) {
        if crate::error::leak_if_in_callback("Library::drop") {
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

/// `cudaDeviceSynchronize` on every device (not [`Device::synchronize`](crate::Device::synchronize),
/// which would also take the calling thread's deferred error as its own).
fn synchronize_all_devices() -> Result<()> {
    for device in crate::Device::all()? {
        crate::device::with_current(device.ordinal(), || {
            // SAFETY: no preconditions.
            unsafe { raw::device_synchronize() }
        })?;
    }
    Ok(())
}
