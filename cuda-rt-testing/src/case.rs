//! [`Case`]: what the code of one property case gets from the runner: a stream, and guarded,
//! poisoned device buffers that report out-of-bounds writes and unwritten elements.

use crate::compare::{render, Annotations, Compare};
use crate::failure::Failure;
use crate::guard::{GuardedBuffer, Guards};
use cuda_rt::{DeviceCopy, Stream, StreamFlags};
use std::fmt::Debug;

/// One case of a property: its stream (non-blocking, made for the case), and buffers laid out
/// by the runner's [`Guards`].
///
/// The runner synchronizes the stream after the case's code returns, and reports CUDA errors
/// met there, errors deferred during the case (by `Drop`s), panics, and a lost CUDA context, as
/// the case's failure.
///
/// # Examples
/// The general form of a property, [`Check::property`](crate::Check::property), with two
/// inputs and two outputs:
/// ```no_run
/// # fn launch_pair_kernel(_: &cuda_rt::Stream, _: &cuda_rt::DeviceView<'_, u32>, _: &cuda_rt::DeviceView<'_, u32>,
/// #     _: &mut cuda_rt::DeviceViewMut<'_, u32>, _: &mut cuda_rt::DeviceViewMut<'_, u32>) -> cuda_rt::Result<()> { Ok(()) }
/// use cuda_rt_testing::{compare::Exact, inputs, Check, Compare};
/// use proptest::prelude::*;
///
/// let pairs = (inputs::data::<u32>(inputs::lengths(10_000, &[256])), any::<u64>());
/// Check::new()
///     .property(pairs, |case, (a, seed)| {
///         let b: Vec<u32> = inputs::generate(inputs::Dist::Uniform, a.len(), *seed);
///         let (da, db) = (case.upload("a", a)?, case.upload("b", &b)?);
///         let mut min = case.output::<u32>("min", a.len())?;
///         let mut max = case.output::<u32>("max", a.len())?;
///         launch_pair_kernel(case.stream(), &da.view(), &db.view(), &mut min.view_mut(), &mut max.view_mut())?;
///         let want_min: Vec<u32> = a.iter().zip(&b).map(|(x, y)| *x.min(y)).collect();
///         let want_max: Vec<u32> = a.iter().zip(&b).map(|(x, y)| *x.max(y)).collect();
///         case.compare(&min, &want_min, &Exact)?;
///         case.compare(&max, &want_max, &Exact)?;
///         case.check_unchanged(&da)?;
///         case.check_unchanged(&db)
///     })
///     .assert_passed();
/// ```
#[derive(Debug)]
pub struct Case {
    /// `None` for properties of host code ([`Check::host_only`](crate::Check::host_only)).
    stream: Option<Stream>,
    guards: Guards,
    input_len: Option<usize>,
}

impl Case {
    /// A case with a new non-blocking stream (`cudaStreamCreateWithFlags`), or without a device.
    pub(crate) fn new(guards: Guards, device: bool) -> cuda_rt::Result<Case> {
        let stream = if device {
            Some(Stream::with_flags(StreamFlags::NON_BLOCKING)?)
        } else {
            None
        };
        Ok(Case {
            stream,
            guards,
            input_len: None,
        })
    }

    /// Whether the case has a device (it has unless the property is host-only).
    pub(crate) fn has_device(&self) -> bool {
        self.stream.is_some()
    }

    /// The case's stream.
    ///
    /// # Panics
    /// In a property of host code ([`Check::host_only`](crate::Check::host_only)), which has no
    /// device; so do the methods that make and read buffers.
    pub fn stream(&self) -> &Stream {
        self.stream
            .as_ref()
            .expect("Case::stream: this property runs without a device (Check::host_only)")
    }

    /// The layout and patterns of the case's guarded buffers.
    pub fn guards(&self) -> Guards {
        self.guards
    }

    /// The input length the report prints (the length of the first upload, unless
    /// [`record_len`](Self::record_len) said otherwise).
    pub(crate) fn input_len(&self) -> Option<usize> {
        self.input_len
    }

    /// Records the length of the case's input for the report (by default the length of the
    /// first upload).
    pub fn record_len(&mut self, len: usize) {
        self.input_len = Some(len);
    }

    /// Copies `data` to the device between guard bands ([`GuardedBuffer::from_slice`]).
    ///
    /// # Errors
    /// [`FailureKind::Cuda`](crate::FailureKind::Cuda) for errors of the allocation and copies.
    pub fn upload<T: DeviceCopy>(
        &mut self,
        name: &str,
        data: &[T],
    ) -> Result<GuardedBuffer<T>, Failure> {
        self.upload_at(name, data, 0)
    }

    /// [`upload`](Self::upload) at element `offset` past the 256-byte alignment of the
    /// allocation: for code that must work on unaligned data (a slice of a larger buffer).
    ///
    /// # Errors
    /// As for [`upload`](Self::upload).
    pub fn upload_at<T: DeviceCopy>(
        &mut self,
        name: &str,
        data: &[T],
        offset: usize,
    ) -> Result<GuardedBuffer<T>, Failure> {
        self.input_len.get_or_insert(data.len());
        GuardedBuffer::from_slice(name, data, offset, self.guards, self.stream())
            .map_err(|e| Failure::from(e).context(&format!("uploading `{name}`")))
    }

    /// An output of `len` elements between guard bands, poisoned ([`GuardedBuffer::poisoned`]).
    ///
    /// # Errors
    /// As for [`upload`](Self::upload).
    pub fn output<T: DeviceCopy>(
        &self,
        name: &str,
        len: usize,
    ) -> Result<GuardedBuffer<T>, Failure> {
        self.output_at(name, len, 0)
    }

    /// [`output`](Self::output) at element `offset` past the 256-byte alignment of the
    /// allocation ([`GuardedBuffer::poisoned_at`]).
    ///
    /// # Errors
    /// As for [`upload`](Self::upload).
    pub fn output_at<T: DeviceCopy>(
        &self,
        name: &str,
        len: usize,
        offset: usize,
    ) -> Result<GuardedBuffer<T>, Failure> {
        GuardedBuffer::poisoned_at(name, len, offset, self.guards, self.stream())
            .map_err(|e| Failure::from(e).context(&format!("allocating `{name}`")))
    }

    /// Checks the guard bands of `buffer` and returns its elements, after the work queued on
    /// it ([`GuardedBuffer::download`]).
    ///
    /// # Errors
    /// [`FailureKind::GuardBand`](crate::FailureKind::GuardBand) or a CUDA error.
    pub fn download<T: DeviceCopy>(&self, buffer: &GuardedBuffer<T>) -> Result<Vec<T>, Failure> {
        buffer.download(self.stream())
    }

    /// Checks that an input's guard bands and elements are as uploaded
    /// ([`GuardedBuffer::check_unchanged`]).
    ///
    /// # Errors
    /// [`FailureKind::GuardBand`](crate::FailureKind::GuardBand),
    /// [`FailureKind::InputModified`](crate::FailureKind::InputModified) or a CUDA error.
    pub fn check_unchanged<T: DeviceCopy>(&self, buffer: &GuardedBuffer<T>) -> Result<(), Failure> {
        buffer.check_unchanged(self.stream())
    }

    /// Downloads `output` (checking its guard bands) and compares it with `want`; a mismatch
    /// shows the elements around the first difference, and says which of them still hold the
    /// poison (never written).
    ///
    /// # Errors
    /// [`FailureKind::GuardBand`](crate::FailureKind::GuardBand),
    /// [`FailureKind::Mismatch`](crate::FailureKind::Mismatch) or a CUDA error.
    pub fn compare<T: DeviceCopy + Debug, C: Compare<T> + ?Sized>(
        &self,
        output: &GuardedBuffer<T>,
        want: &[T],
        comparator: &C,
    ) -> Result<(), Failure> {
        self.compare_with_input::<T, T, C>(output, want, comparator, None)
    }

    /// [`compare`](Self::compare), showing the input's elements beside the output's when the
    /// two have the same length.
    pub(crate) fn compare_with_input<I: Debug, T: DeviceCopy + Debug, C: Compare<T> + ?Sized>(
        &self,
        output: &GuardedBuffer<T>,
        want: &[T],
        comparator: &C,
        input: Option<&[I]>,
    ) -> Result<(), Failure> {
        let (got, bytes) = output.download_with_bytes(self.stream())?;
        let Err(mismatch) = comparator.compare(&got, want) else {
            return Ok(());
        };
        let show_input = |i: usize| -> String {
            input
                .and_then(|v| v.get(i))
                .map_or_else(String::new, |x| crate::failure::debug_cut(x, 40))
        };
        let poisoned = |i: usize| output.holds_poison(&bytes, i);
        let same_length = input.is_some_and(|v| v.len() == got.len());
        let notes = Annotations {
            input: same_length.then_some(&show_input as &dyn Fn(usize) -> String),
            poisoned: Some(&poisoned),
        };
        Err(render(&mismatch, &got, want, &notes).context(&format!("`{}`", output.name())))
    }
}
