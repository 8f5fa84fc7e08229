//! The C++ CUDA library `cpp/mylib` (`cpp/mylib/mylib.h`) from Rust: linked statically into the
//! test binary (built by build.rs without a runtime of its own, so it uses cuda-rt's), or loaded
//! with `dlopen` as one of its shared builds, each with a CUDA runtime of its own.

use cuda_rt_sys::{cudaError_t, cudaEvent_t, cudaKernel_t, cudaStream_t};
use std::ffi::{c_int, c_void, CStr, CString};
use std::path::PathBuf;

#[link(name = "cuda_rt_interop_mylib", kind = "static")]
unsafe extern "C" {
    /// `y[i] = fmaf(a, x[i], y[i])` for `i < n` on `stream`.
    pub fn mylib_saxpy(
        a: f32,
        x: *const f32,
        y: *mut f32,
        n: usize,
        stream: cudaStream_t,
    ) -> cudaError_t;
    /// `bins[v]` = count of `v` in `data[..n]` (256 bins, overwritten) on `stream`.
    pub fn mylib_histogram_u8(
        data: *const u8,
        n: usize,
        bins: *mut u32,
        stream: cudaStream_t,
    ) -> cudaError_t;
    /// Inclusive prefix sum (wrapping) of `n` values on `stream`; `input == out` allowed.
    pub fn mylib_inclusive_scan_u32(
        input: *const u32,
        out: *mut u32,
        n: usize,
        stream: cudaStream_t,
    ) -> cudaError_t;
    /// Queues a kernel that stores through an unmapped address: a sticky
    /// `cudaErrorIllegalAddress` once it runs.
    pub fn mylib_fault_illegal_address(stream: cudaStream_t) -> cudaError_t;
    fn mylib_probe_saxpy_kernel() -> *const c_void;
    fn mylib_probe_saxpy_cuda_kernel(kernel: *mut cudaKernel_t) -> cudaError_t;
    fn mylib_probe_launch_saxpy_shaped(
        kernel: *const c_void,
        a: f32,
        x: *const f32,
        y: *mut f32,
        n: usize,
        stream: cudaStream_t,
    ) -> cudaError_t;
    fn mylib_probe_bad_launch() -> cudaError_t;
    fn mylib_probe_get_last_error() -> cudaError_t;
    fn mylib_probe_peek_last_error() -> cudaError_t;
    fn mylib_probe_runtime_symbol() -> *const c_void;
    fn mylib_probe_runtime_version(version: *mut c_int) -> cudaError_t;
    fn mylib_probe_stream_create(stream: *mut cudaStream_t) -> cudaError_t;
    fn mylib_probe_stream_destroy(stream: cudaStream_t) -> cudaError_t;
    fn mylib_probe_stream_synchronize(stream: cudaStream_t) -> cudaError_t;
    fn mylib_probe_event_create(event: *mut cudaEvent_t) -> cudaError_t;
    fn mylib_probe_event_record(event: cudaEvent_t, stream: cudaStream_t) -> cudaError_t;
    fn mylib_probe_event_destroy(event: cudaEvent_t) -> cudaError_t;
    fn mylib_probe_malloc(ptr: *mut *mut c_void, bytes: usize) -> cudaError_t;
    fn mylib_probe_free(ptr: *mut c_void) -> cudaError_t;
    fn mylib_probe_memcpy(dst: *mut c_void, src: *const c_void, bytes: usize) -> cudaError_t;
    fn mylib_probe_device_reset() -> cudaError_t;
}

// libstdc++, which the C++ objects need (`__gxx_personality_v0`, guards of static locals).
#[link(name = "stdc++")]
unsafe extern "C" {}

/// The entry points of one copy of mylib, and which CUDA runtime that copy uses.
#[derive(Clone, Copy)]
pub struct Mylib {
    /// Where this copy lives: "linked in", or the shared library's file name.
    pub name: &'static str,
    /// `mylib_saxpy`.
    pub saxpy: unsafe extern "C" fn(f32, *const f32, *mut f32, usize, cudaStream_t) -> cudaError_t,
    /// `mylib_fault_illegal_address`.
    pub fault_illegal_address: unsafe extern "C" fn(cudaStream_t) -> cudaError_t,
    /// `mylib_probe_saxpy_kernel`.
    pub saxpy_kernel: unsafe extern "C" fn() -> *const c_void,
    /// `mylib_probe_saxpy_cuda_kernel`.
    pub saxpy_cuda_kernel: unsafe extern "C" fn(*mut cudaKernel_t) -> cudaError_t,
    /// `mylib_probe_launch_saxpy_shaped`.
    pub launch_saxpy_shaped: unsafe extern "C" fn(
        *const c_void,
        f32,
        *const f32,
        *mut f32,
        usize,
        cudaStream_t,
    ) -> cudaError_t,
    /// `mylib_probe_bad_launch`.
    pub bad_launch: unsafe extern "C" fn() -> cudaError_t,
    /// `mylib_probe_get_last_error`.
    pub get_last_error: unsafe extern "C" fn() -> cudaError_t,
    /// `mylib_probe_peek_last_error`.
    pub peek_last_error: unsafe extern "C" fn() -> cudaError_t,
    /// `mylib_probe_runtime_symbol`.
    pub runtime_symbol: unsafe extern "C" fn() -> *const c_void,
    /// `mylib_probe_runtime_version`.
    pub runtime_version: unsafe extern "C" fn(*mut c_int) -> cudaError_t,
    /// `mylib_probe_stream_create`.
    pub stream_create: unsafe extern "C" fn(*mut cudaStream_t) -> cudaError_t,
    /// `mylib_probe_stream_destroy`.
    pub stream_destroy: unsafe extern "C" fn(cudaStream_t) -> cudaError_t,
    /// `mylib_probe_stream_synchronize`.
    pub stream_synchronize: unsafe extern "C" fn(cudaStream_t) -> cudaError_t,
    /// `mylib_probe_event_create`.
    pub event_create: unsafe extern "C" fn(*mut cudaEvent_t) -> cudaError_t,
    /// `mylib_probe_event_record`.
    pub event_record: unsafe extern "C" fn(cudaEvent_t, cudaStream_t) -> cudaError_t,
    /// `mylib_probe_event_destroy`.
    pub event_destroy: unsafe extern "C" fn(cudaEvent_t) -> cudaError_t,
    /// `mylib_probe_malloc`.
    pub malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> cudaError_t,
    /// `mylib_probe_free`.
    pub free: unsafe extern "C" fn(*mut c_void) -> cudaError_t,
    /// `mylib_probe_memcpy`.
    pub memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> cudaError_t,
    /// `mylib_probe_device_reset`.
    pub device_reset: unsafe extern "C" fn() -> cudaError_t,
}

/// How a copy of mylib gets its CUDA runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Linked into the test binary without a runtime: it uses cuda-rt's (static or dynamic).
    LinkedIn,
    /// `libmylib_own_static_cudart.so`: a private static copy of the runtime, symbols hidden.
    OwnStaticRuntime,
    /// `libmylib_shared_cudart.so`: `libcudart.so`.
    SharedRuntime,
}

impl Variant {
    /// All three.
    pub const ALL: [Variant; 3] = [
        Variant::LinkedIn,
        Variant::OwnStaticRuntime,
        Variant::SharedRuntime,
    ];

    /// The shared library's file name (`None` for [`Variant::LinkedIn`]).
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            Variant::LinkedIn => None,
            Variant::OwnStaticRuntime => Some("libmylib_own_static_cudart.so"),
            Variant::SharedRuntime => Some("libmylib_shared_cudart.so"),
        }
    }

    /// Whether this copy of mylib and the Rust side use the same CUDA runtime, given how
    /// cuda-rt-sys linked ours: only `libcudart.so` can be shared between two binaries.
    pub fn shares_our_runtime(self) -> bool {
        match self {
            Variant::LinkedIn => true,
            Variant::OwnStaticRuntime => false,
            Variant::SharedRuntime => rust_link_mode() == "dynamic",
        }
    }
}

/// How cuda-rt-sys linked the runtime into this test binary: "static" or "dynamic".
pub fn rust_link_mode() -> &'static str {
    cuda_rt_interop_fixtures::LINK_MODE
}

impl Mylib {
    /// The copy linked into the test binary.
    pub fn linked_in() -> Mylib {
        Mylib {
            name: "linked in",
            saxpy: mylib_saxpy,
            fault_illegal_address: mylib_fault_illegal_address,
            saxpy_kernel: mylib_probe_saxpy_kernel,
            saxpy_cuda_kernel: mylib_probe_saxpy_cuda_kernel,
            launch_saxpy_shaped: mylib_probe_launch_saxpy_shaped,
            bad_launch: mylib_probe_bad_launch,
            get_last_error: mylib_probe_get_last_error,
            peek_last_error: mylib_probe_peek_last_error,
            runtime_symbol: mylib_probe_runtime_symbol,
            runtime_version: mylib_probe_runtime_version,
            stream_create: mylib_probe_stream_create,
            stream_destroy: mylib_probe_stream_destroy,
            stream_synchronize: mylib_probe_stream_synchronize,
            event_create: mylib_probe_event_create,
            event_record: mylib_probe_event_record,
            event_destroy: mylib_probe_event_destroy,
            malloc: mylib_probe_malloc,
            free: mylib_probe_free,
            memcpy: mylib_probe_memcpy,
            device_reset: mylib_probe_device_reset,
        }
    }

    /// The copy of `variant`: linked in, or loaded (`dlopen`, `RTLD_NOW | RTLD_LOCAL`, never
    /// unloaded: CUDA code is not meant to be unloaded while its runtime may still run).
    ///
    /// # Panics
    /// If the shared library cannot be found or loaded, or lacks a symbol.
    pub fn load(variant: Variant) -> Mylib {
        let Some(file) = variant.file_name() else {
            return Mylib::linked_in();
        };
        let path = shared_library_path(file);
        let c_path = CString::new(path.to_str().expect("UTF-8 path")).expect("no NUL");
        // SAFETY: a NUL-terminated path; loading runs the library's initializers (CUDA fatbin
        // registration), which have no preconditions.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlerror returns a NUL-terminated message after a failed dlopen.
            let why = unsafe { CStr::from_ptr(libc::dlerror()) }.to_string_lossy();
            panic!(
                "cannot load {}: {why} (for libmylib_shared_cudart.so, put the directory of the \
                 toolkit's libcudart.so.{} in LD_LIBRARY_PATH, e.g. /usr/local/cuda/lib64)",
                path.display(),
                cuda_rt_sys::TOOLKIT_CUDART_VERSION / 1000
            );
        }
        let symbol = |name: &str| -> *mut c_void {
            let c_name = CString::new(name).expect("no NUL");
            // SAFETY: a live handle and a NUL-terminated name.
            let address = unsafe { libc::dlsym(handle, c_name.as_ptr()) };
            assert!(!address.is_null(), "{} lacks {name}", path.display());
            address
        };
        // SAFETY: each symbol is the function mylib.h declares under that name, whose signature
        // the field's type spells; the library stays loaded for the process's lifetime.
        unsafe {
            Mylib {
                name: file,
                saxpy: as_fn(symbol("mylib_saxpy")),
                fault_illegal_address: as_fn(symbol("mylib_fault_illegal_address")),
                saxpy_kernel: as_fn(symbol("mylib_probe_saxpy_kernel")),
                saxpy_cuda_kernel: as_fn(symbol("mylib_probe_saxpy_cuda_kernel")),
                launch_saxpy_shaped: as_fn(symbol("mylib_probe_launch_saxpy_shaped")),
                bad_launch: as_fn(symbol("mylib_probe_bad_launch")),
                get_last_error: as_fn(symbol("mylib_probe_get_last_error")),
                peek_last_error: as_fn(symbol("mylib_probe_peek_last_error")),
                runtime_symbol: as_fn(symbol("mylib_probe_runtime_symbol")),
                runtime_version: as_fn(symbol("mylib_probe_runtime_version")),
                stream_create: as_fn(symbol("mylib_probe_stream_create")),
                stream_destroy: as_fn(symbol("mylib_probe_stream_destroy")),
                stream_synchronize: as_fn(symbol("mylib_probe_stream_synchronize")),
                event_create: as_fn(symbol("mylib_probe_event_create")),
                event_record: as_fn(symbol("mylib_probe_event_record")),
                event_destroy: as_fn(symbol("mylib_probe_event_destroy")),
                malloc: as_fn(symbol("mylib_probe_malloc")),
                free: as_fn(symbol("mylib_probe_free")),
                memcpy: as_fn(symbol("mylib_probe_memcpy")),
                device_reset: as_fn(symbol("mylib_probe_device_reset")),
            }
        }
    }
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `address` is a function whose signature `F` spells, alive as long as `F` is used.
unsafe fn as_fn<F: Copy>(address: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: same size (checked); a function pointer of the right type (the caller's contract).
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&address) }
}

/// Where a shared build of mylib is: `$CUDA_RT_INTEROP_LIB_DIR`, else next to the test binary
/// (binaries staged for another machine carry the libraries along), else build.rs's `OUT_DIR`.
pub fn shared_library_path(file: &str) -> PathBuf {
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("CUDA_RT_INTEROP_LIB_DIR") {
        candidates.push(PathBuf::from(dir).join(file));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        candidates.push(dir.join(file));
    }
    candidates.push(PathBuf::from(cuda_rt_interop_fixtures::OUT_DIR).join(file));
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| panic!("{file} not found; looked at {candidates:?}"))
}

/// The file of the loaded object (executable or shared library) that contains `address`.
pub fn object_of(address: *const c_void) -> String {
    // SAFETY: dladdr only reads the loader's tables; Dl_info is plain data.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid for writes.
    let found = unsafe { libc::dladdr(address, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return "<unknown>".into();
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned()
}

/// The name of a CUDA status (`cudaErrorIllegalAddress`).
pub fn status_name(status: cudaError_t) -> String {
    cuda_rt_testing::error_name(status)
}

/// A stream, an allocation and an event that one copy of mylib created and owns (the C++ side's
/// handles, for tests where cuda-rt borrows them).
pub struct CppHandles {
    lib: Mylib,
    /// mylib's stream.
    pub stream: cudaStream_t,
    /// mylib's device allocation.
    pub ptr: *mut c_void,
    /// mylib's event.
    pub event: cudaEvent_t,
}

impl CppHandles {
    /// Creates the three through `lib` (`bytes` of device memory); panics on an error.
    pub fn new(lib: Mylib, bytes: usize) -> CppHandles {
        let mut handles = CppHandles {
            lib,
            stream: std::ptr::null_mut(),
            ptr: std::ptr::null_mut(),
            event: std::ptr::null_mut(),
        };
        // SAFETY: each call writes one handle through a valid pointer.
        unsafe {
            expect_success((lib.stream_create)(&mut handles.stream), "stream_create");
            expect_success((lib.malloc)(&mut handles.ptr, bytes), "malloc");
            expect_success((lib.event_create)(&mut handles.event), "event_create");
        }
        handles
    }

    /// Synchronizes the stream, then destroys the three through mylib; panics on an error.
    ///
    /// # Safety
    /// Nothing may use the handles any more (views that borrowed them have ended).
    pub unsafe fn destroy(self) {
        let lib = self.lib;
        // SAFETY: mylib's live handles, unused from here on (the caller's promise).
        unsafe {
            expect_success((lib.stream_synchronize)(self.stream), "stream_synchronize");
            expect_success((lib.event_destroy)(self.event), "event_destroy");
            expect_success((lib.free)(self.ptr), "free");
            expect_success((lib.stream_destroy)(self.stream), "stream_destroy");
        }
    }
}

fn expect_success(status: cudaError_t, call: &str) {
    assert_eq!(
        status,
        cuda_rt_sys::cudaSuccess,
        "{call}: {}",
        status_name(status)
    );
}
