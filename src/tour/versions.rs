//! The CUDA driver and runtime versions, which cuda-rt does not wrap (yet): the two raw calls,
//! kept in this one corner.

use cuda_rt_sys as sys;

/// `major.minor` from CUDA's encoding `1000 * major + 10 * minor`.
fn decode(version: i32) -> (i32, i32) {
    (version / 1000, version % 1000 / 10)
}

/// The newest CUDA version the installed driver supports (`cudaDriverGetVersion`); `(0, 0)`
/// when no driver is installed.
///
/// # Errors
/// An error status of `cudaDriverGetVersion`.
pub fn driver_version() -> cuda_rt::Result<(i32, i32)> {
    let mut version = 0i32;
    // SAFETY: cudaDriverGetVersion writes one int through a valid pointer; it needs no device.
    let status = unsafe { sys::cudaDriverGetVersion(&mut version) };
    match cuda_rt::Error::from_status(status, "cudaDriverGetVersion") {
        Some(error) => Err(error),
        None => Ok(decode(version)),
    }
}

/// The version of the CUDA runtime linked into this program (`cudaRuntimeGetVersion`).
///
/// # Errors
/// An error status of `cudaRuntimeGetVersion`.
pub fn runtime_version() -> cuda_rt::Result<(i32, i32)> {
    let mut version = 0i32;
    // SAFETY: cudaRuntimeGetVersion writes one int through a valid pointer; it needs no device.
    let status = unsafe { sys::cudaRuntimeGetVersion(&mut version) };
    match cuda_rt::Error::from_status(status, "cudaRuntimeGetVersion") {
        Some(error) => Err(error),
        None => Ok(decode(version)),
    }
}

/// How cuda-rt-sys linked cudart into this program: `static` or `dynamic` (forwarded by the
/// root build script as `CUDA_RT_LINK_MODE`).
pub fn cudart_link_mode() -> &'static str {
    option_env!("CUDA_RT_LINK_MODE").unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_decode() {
        assert_eq!(super::decode(13000), (13, 0));
        assert_eq!(super::decode(12080), (12, 8));
    }
}
