//! Code loaded at run time on a GPU (`Library`), which needs a CUDA 12.8 runtime or newer
//! (`cudaLibraryLoadData`): the tests are in `library.rs`; against an older runtime one test
//! says why there is nothing to run.

#[cfg(cudart_ge = "12.8")]
mod library;

#[cfg(not(cudart_ge = "12.8"))]
#[test]
fn libraries_need_cuda_12_8() {
    println!(
        "skipped: loaded libraries (cuda_rt::Library) need a CUDA runtime of 12.8 or newer; \
         this build links CUDA {}",
        cuda_rt_sys::TOOLKIT_CUDART_VERSION
    );
}
