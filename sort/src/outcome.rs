//! The sort's outcome on the host: its device status word, brought back by a
//! [`StatusSlot`](cuda_rt::check::StatusSlot) (copied behind the sort, on its stream), decoded
//! here. Either cuda-rt's check decodes it and defers a failure to the thread that queued the
//! sort (that thread's next `synchronize()` reports it), or, when a caller waits for the sort
//! ([`SortWorkspace::sort_and_synchronize`](crate::SortWorkspace::sort_and_synchronize), the
//! future of [`SortWorkspace::sort_async`](crate::SortWorkspace::sort_async)), the word goes to
//! that caller, who returns the precise [`SortError`]; a caller that gives up waiting hands the
//! word back to the deferred path. In a captured graph a host node decodes it at every launch.
//! Every failure is reported exactly once.

use crate::SortError;

/// The error handed to cuda-rt for a sort whose device-side chain failed: `error` as a
/// [`cuda_rt::Error`], with context saying it is the device-side outcome of a sort.
pub(crate) fn device_side_error(error: SortError) -> cuda_rt::Error {
    cuda_rt::Error::from(error).context("sort: the device-side outcome (status word)")
}

/// Decodes a status word read after the sort's work completed: a failure as the error cuda-rt
/// defers. Calls no CUDA function (it runs inside cuda-rt's checks and graph host nodes).
pub(crate) fn decode(word: u32) -> cuda_rt::Result<()> {
    SortError::from_status_word(word).map_err(device_side_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi;

    #[test]
    fn a_failure_decodes_to_the_deferred_error_with_its_status() {
        let word = ffi::STATUS_LAUNCH_FAILED | (2 << ffi::STATUS_STAGE_SHIFT) | 7;
        let e = decode(word).unwrap_err();
        assert_eq!(e.code(), Some(7));
        assert_eq!(e.what(), "sort: the device-side outcome (status word)");
        assert!(decode(ffi::STATUS_DONE).is_ok());
        assert!(
            decode(ffi::STATUS_RUNNING).is_err(),
            "an unfinished chain is a failure"
        );
        assert!(decode(ffi::STATUS_SCRATCH_MISSING).is_err());
    }
}
