//! Why a case failed: [`Failure`], its [`FailureKind`], and the `ensure!` assertions that
//! return one.

use std::any::Any;
use std::fmt;

/// What went wrong in a case, in the terms the report uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The output differs from the CPU reference; `index` is the first differing element, when
    /// the comparison has one (a permutation check has none).
    Mismatch {
        /// The first element that differs.
        index: Option<usize>,
    },
    /// An element of a guard band changed: the code wrote outside the range it was given.
    GuardBand {
        /// The buffer (`"output"`, or the name given to [`Case::upload`](crate::Case::upload)).
        buffer: String,
        /// Before or after the range.
        side: Side,
        /// The first changed guard element, counted from the range: 0 is the element right
        /// after its end (or right before its start).
        element: usize,
    },
    /// A buffer the code only reads was written.
    InputModified {
        /// The buffer's name.
        buffer: String,
        /// The first changed element.
        index: usize,
    },
    /// A CUDA call failed.
    Cuda {
        /// The status name (`cudaErrorIllegalAddress`) or cuda-rt's error kind.
        name: String,
        /// Whether the error is sticky: the process's CUDA context is lost.
        sticky: bool,
    },
    /// The code under test, or the CPU reference, panicked.
    Panic,
    /// An assertion of the test ([`ensure!`](crate::ensure), [`ensure_eq!`](crate::ensure_eq)).
    Assertion,
    /// Another error returned by the code under test (its `Display` is the message).
    Error,
    /// The process that ran the case died or hung (a crash, a timeout, a lost CUDA context
    /// that ended it).
    Crash,
}

/// A side of a guarded range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The guard band before the range.
    Before,
    /// The guard band after the range.
    After,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Before => "before",
            Side::After => "after",
        })
    }
}

/// Why a case failed: a [`FailureKind`] and a message for people.
///
/// The closures of the runner return `Result<_, Failure>`. Any error type converts into it
/// with `?`: a [`cuda_rt::Error`] becomes [`FailureKind::Cuda`] (sticky or not), a
/// [`Mismatch`](crate::compare::Mismatch) becomes [`FailureKind::Mismatch`], anything else
/// [`FailureKind::Error`]. (`Failure` itself is not a `std::error::Error`, which is what makes
/// that conversion possible.)
#[derive(Clone, PartialEq, Eq)]
pub struct Failure {
    kind: FailureKind,
    message: String,
}

impl Failure {
    /// A failure of `kind` described by `message`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }

    /// A failed assertion ([`FailureKind::Assertion`]).
    pub fn assertion(message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::Assertion, message)
    }

    /// What went wrong.
    pub fn kind(&self) -> &FailureKind {
        &self.kind
    }

    /// The message for people.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the failure is a sticky CUDA error (the context is lost).
    pub fn is_sticky(&self) -> bool {
        matches!(self.kind, FailureKind::Cuda { sticky: true, .. })
    }

    /// The failure of a panic, from its payload.
    pub(crate) fn from_panic(payload: &(dyn Any + Send)) -> Failure {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic with a payload that is not a string".into());
        Failure::new(FailureKind::Panic, format!("panicked: {message}"))
    }

    /// The same failure, its message preceded by `context`.
    #[must_use]
    pub fn context(mut self, context: &str) -> Failure {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Failure {
    fn from(error: E) -> Failure {
        let any: &dyn Any = &error;
        if let Some(e) = any.downcast_ref::<cuda_rt::Error>() {
            return Failure::new(
                FailureKind::Cuda {
                    name: e.name().to_string(),
                    sticky: e.is_sticky(),
                },
                e.to_string(),
            );
        }
        if let Some(m) = any.downcast_ref::<crate::compare::Mismatch>() {
            return Failure::new(FailureKind::Mismatch { index: m.index }, m.to_string());
        }
        Failure::new(FailureKind::Error, error.to_string())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

/// `Debug` of a value, cut to `max` characters (a report must not print megabytes).
pub(crate) fn debug_cut(value: &dyn fmt::Debug, max: usize) -> String {
    let text = format!("{value:?}");
    cut(text, max)
}

/// `text` cut to `max` characters, saying how long it was.
pub(crate) fn cut(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        return text;
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept} ... ({} characters)", text.chars().count())
}

/// Returns a [`Failure`] of kind [`FailureKind::Assertion`] from the enclosing function unless
/// the condition holds, like `assert!` (with an optional message in `format!` syntax).
///
/// # Examples
/// ```
/// fn case(n: usize) -> Result<(), cuda_rt_testing::Failure> {
///     cuda_rt_testing::ensure!(n % 2 == 0, "{n} is odd");
///     Ok(())
/// }
/// assert!(case(3).is_err());
/// ```
#[macro_export]
macro_rules! ensure {
    ($cond:expr $(,)?) => {
        if !$cond {
            return ::core::result::Result::Err($crate::Failure::assertion(::std::format!(
                "assertion failed: {} at {}:{}",
                ::core::stringify!($cond),
                ::core::file!(),
                ::core::line!()
            )));
        }
    };
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return ::core::result::Result::Err($crate::Failure::assertion(::std::format!(
                "{} at {}:{}",
                ::std::format_args!($($message)+),
                ::core::file!(),
                ::core::line!()
            )));
        }
    };
}

/// Returns a [`Failure`] of kind [`FailureKind::Assertion`] from the enclosing function unless
/// the two values are equal, like `assert_eq!`; long values are cut in the message. For
/// slices of output, a comparator ([`Compare::check`](crate::Compare::check)) says more.
///
/// # Examples
/// ```
/// fn case(x: u32) -> Result<(), cuda_rt_testing::Failure> {
///     cuda_rt_testing::ensure_eq!(x.count_ones(), 1, "{x} is not a power of two");
///     Ok(())
/// }
/// assert!(case(8).is_ok());
/// assert!(case(6).is_err());
/// ```
#[macro_export]
macro_rules! ensure_eq {
    ($left:expr, $right:expr $(,)?) => {
        $crate::ensure_eq!($left, $right, "values differ")
    };
    ($left:expr, $right:expr, $($message:tt)+) => {
        match (&$left, &$right) {
            (left, right) => {
                if !(*left == *right) {
                    return ::core::result::Result::Err($crate::Failure::assertion(
                        $crate::__ensure_eq_message(
                            left,
                            right,
                            ::std::format!($($message)+),
                            ::core::file!(),
                            ::core::line!(),
                        ),
                    ));
                }
            }
        }
    };
}

/// The message of [`ensure_eq!`].
#[doc(hidden)]
pub fn __ensure_eq_message(
    left: &dyn fmt::Debug,
    right: &dyn fmt::Debug,
    message: String,
    file: &str,
    line: u32,
) -> String {
    format!(
        "{message} at {file}:{line}\n  left: {}\n right: {}",
        debug_cut(left, 400),
        debug_cut(right, 400)
    )
}
