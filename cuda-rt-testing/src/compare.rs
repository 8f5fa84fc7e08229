//! Comparators: how the output of the GPU is compared with the CPU's reference.
//!
//! | comparator | equal when | for |
//! |---|---|---|
//! | [`Exact`] | `==` | any `PartialEq` (NaN never equals NaN) |
//! | [`Bitwise`] | same bit patterns | [`Element`]s, arrays and pairs of them (NaN payloads and -0 count) |
//! | [`Ulps`] | within `n` units in the last place; NaN equals NaN | [`Float`]s |
//! | [`Tolerance`] | `abs(got - want) <= abs + rel * abs(want)`; NaN equals NaN | [`Float`]s |
//! | [`Permutation`] | the same multiset of bit patterns | [`Element`]s |
//! | [`Sorted`] | sorted in IEEE 754 total order and a permutation of the reference | [`Element`]s |
//! | [`StableByKey`] | sorted by key, a permutation of the reference's pairs, equal keys in the reference's order | `(key, value)` pairs |
//! | [`by`] | a predicate of yours holds for every pair of elements | anything |
//!
//! A comparator reports the first difference as a [`Mismatch`]; [`Compare::check`] turns it
//! into a [`Failure`] whose message shows a window of elements around it, not the whole output.

use crate::element::{BitEq, Element, Float};
use crate::failure::{debug_cut, Failure, FailureKind};
use std::cmp::Ordering;
use std::fmt::{self, Debug};

/// The first difference a comparator found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The index in the output of the first element that differs, when there is one.
    pub index: Option<usize>,
    /// How many elements differ, when the comparator counts them.
    pub differing: Option<usize>,
    /// What differs, in words.
    pub reason: String,
}

impl Mismatch {
    /// A difference at element `index`.
    pub fn at(index: usize, reason: impl Into<String>) -> Mismatch {
        Mismatch {
            index: Some(index),
            differing: None,
            reason: reason.into(),
        }
    }

    /// A difference of the whole output (a length, a multiset).
    pub fn whole(reason: impl Into<String>) -> Mismatch {
        Mismatch {
            index: None,
            differing: None,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)?;
        if let Some(i) = self.index {
            write!(f, " at index {i}")?;
        }
        if let Some(n) = self.differing {
            write!(f, " ({n} elements differ)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Mismatch {}

/// A way to compare an output with its reference.
pub trait Compare<T> {
    /// `Ok` when `got` matches `want`; otherwise the first difference.
    ///
    /// # Errors
    /// The [`Mismatch`] found.
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch>;

    /// [`compare`](Self::compare), with a mismatch turned into a [`Failure`] whose message
    /// shows the elements around it.
    ///
    /// # Errors
    /// A [`FailureKind::Mismatch`].
    fn check(&self, got: &[T], want: &[T]) -> Result<(), Failure>
    where
        T: Debug,
    {
        self.compare(got, want)
            .map_err(|m| render(&m, got, want, &Annotations::default()))
    }
}

/// What the window around a mismatch may show besides the output and the reference.
#[derive(Default)]
pub(crate) struct Annotations<'a> {
    /// The input element at an index, when input and output have the same length.
    pub(crate) input: Option<&'a dyn Fn(usize) -> String>,
    /// Whether the output element at an index still holds the poison written before the run.
    pub(crate) poisoned: Option<&'a dyn Fn(usize) -> bool>,
}

/// Elements shown on each side of a mismatch.
const WINDOW: usize = 4;

/// The failure of mismatch `m`: its reason, the lengths, and the elements around it.
pub(crate) fn render<T: Debug>(
    m: &Mismatch,
    got: &[T],
    want: &[T],
    notes: &Annotations<'_>,
) -> Failure {
    let mut text = format!(
        "output differs from the reference: {m}\n  output has {} elements, the reference {}",
        got.len(),
        want.len()
    );
    if let Some(i) = m.index {
        let lo = i.saturating_sub(WINDOW);
        let hi = (i + WINDOW + 1).min(got.len().max(want.len()));
        let cell = |v: Option<&T>| v.map_or_else(|| "-".to_string(), |v| debug_cut(v, 40));
        let mut rows = vec![[
            "index".to_string(),
            "input".to_string(),
            "reference".to_string(),
            "output".to_string(),
        ]];
        for j in lo..hi {
            let input = notes.input.map_or_else(String::new, |f| f(j));
            rows.push([j.to_string(), input, cell(want.get(j)), cell(got.get(j))]);
        }
        let show_input = notes.input.is_some();
        let widths: Vec<usize> = (0..4)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for (row, j) in rows
            .iter()
            .zip(std::iter::once(None).chain((lo..hi).map(Some)))
        {
            let marker = if j == Some(i) { ">" } else { " " };
            text.push_str(&format!("\n  {marker} {:>w$}", row[0], w = widths[0]));
            if show_input {
                text.push_str(&format!("  {:>w$}", row[1], w = widths[1]));
            }
            text.push_str(&format!(
                "  {:>w2$}  {:>w3$}",
                row[2],
                row[3],
                w2 = widths[2],
                w3 = widths[3]
            ));
            if let (Some(j), Some(poisoned)) = (j, notes.poisoned) {
                if j < got.len() && poisoned(j) {
                    text.push_str("  (still the poison: never written)");
                }
            }
        }
    }
    Failure::new(FailureKind::Mismatch { index: m.index }, text)
}

/// The first index where `same` fails, and how many do, as a [`Mismatch`] (lengths first).
fn elementwise<T>(
    got: &[T],
    want: &[T],
    what: &str,
    same: impl Fn(&T, &T) -> bool,
) -> Result<(), Mismatch> {
    if got.len() != want.len() {
        return Err(Mismatch::whole(format!(
            "lengths differ: output {}, reference {}",
            got.len(),
            want.len()
        )));
    }
    let mut differing = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| !same(g, w));
    match differing.next() {
        None => Ok(()),
        Some((i, _)) => Err(Mismatch {
            index: Some(i),
            differing: Some(1 + differing.count()),
            reason: format!("not {what}"),
        }),
    }
}

/// Equal by `==`. NaN never equals NaN: use [`Bitwise`], [`Ulps`] or [`Tolerance`] for floats.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exact;

impl<T: PartialEq> Compare<T> for Exact {
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch> {
        elementwise(got, want, "equal", |g, w| g == w)
    }
}

/// Equal bit for bit: `-0.0` differs from `+0.0`, NaNs must have the same payload. For floats
/// this is also equality in IEEE 754 total order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bitwise;

impl<T: BitEq> Compare<T> for Bitwise {
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch> {
        elementwise(got, want, "bitwise equal", |g, w| g.bit_eq(w))
    }
}

/// Whether two floats may be called equal whatever the distance: both NaN (any payloads), or
/// the same infinity; `None` when the distance decides.
fn float_classes_match<T: Float>(got: T, want: T) -> Option<bool> {
    match (got.is_nan_value(), want.is_nan_value()) {
        (true, true) => return Some(true),
        (true, false) | (false, true) => return Some(false),
        (false, false) => {}
    }
    if got.is_infinite_value() || want.is_infinite_value() {
        return Some(got.bits64() == want.bits64());
    }
    None
}

/// Floats within this many units in the last place (ULPs) of each other; NaN equals NaN (any
/// payload), an infinity only itself, `+0.0` equals `-0.0`.
#[derive(Debug, Clone, Copy)]
pub struct Ulps(pub u64);

impl<T: Float> Compare<T> for Ulps {
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch> {
        elementwise(got, want, &format!("within {} ULPs", self.0), |&g, &w| {
            float_classes_match(g, w).unwrap_or_else(|| g.ulps_between(w) <= self.0)
        })
    }
}

/// Floats with `abs(got - want) <= abs + rel * abs(want)`; NaN equals NaN (any payload), an
/// infinity only itself.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// The absolute tolerance.
    pub abs: f64,
    /// The tolerance relative to the reference's magnitude.
    pub rel: f64,
}

impl Tolerance {
    /// An absolute tolerance only.
    pub fn absolute(abs: f64) -> Tolerance {
        Tolerance { abs, rel: 0.0 }
    }

    /// A relative tolerance only.
    pub fn relative(rel: f64) -> Tolerance {
        Tolerance { abs: 0.0, rel }
    }
}

impl<T: Float> Compare<T> for Tolerance {
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch> {
        let what = format!("within {} + {} * |reference|", self.abs, self.rel);
        elementwise(got, want, &what, |&g, &w| {
            float_classes_match(g, w).unwrap_or_else(|| {
                let (g, w) = (g.to_f64(), w.to_f64());
                (g - w).abs() <= self.abs + self.rel * w.abs()
            })
        })
    }
}

/// Elements equal when a predicate of yours says so ([`by`]).
#[derive(Clone, Copy)]
pub struct By<F>(F);

/// Elements equal when `same(got, want)` holds, e.g. `by(|g: &f32, w: &f32| (g - w).abs() < 1e-3)`.
pub fn by<T, F: Fn(&T, &T) -> bool>(same: F) -> By<F> {
    By(same)
}

impl<F> Debug for By<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("By(<predicate>)")
    }
}

impl<T, F: Fn(&T, &T) -> bool> Compare<T> for By<F> {
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch> {
        elementwise(got, want, "equal by the predicate", &self.0)
    }
}

/// The same multiset of bit patterns, in any order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Permutation;

impl<T: Element> Compare<T> for Permutation {
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch> {
        if got.len() != want.len() {
            return Err(Mismatch::whole(format!(
                "lengths differ: output {}, reference {}",
                got.len(),
                want.len()
            )));
        }
        let sorted = |v: &[T]| {
            let mut bits: Vec<(T, u64)> = v.iter().map(|&x| (x, x.bits64())).collect();
            bits.sort_by(|a, b| a.0.total_order(&b.0).then(a.1.cmp(&b.1)));
            bits
        };
        let (g, w) = (sorted(got), sorted(want));
        let Some(k) = (0..g.len()).find(|&k| g[k].1 != w[k].1) else {
            return Ok(());
        };
        // The smaller of the two values is over-represented where it appears.
        let value = if g[k].0.total_order(&w[k].0).then(g[k].1.cmp(&w[k].1)) == Ordering::Less {
            g[k].0
        } else {
            w[k].0
        };
        let count = |v: &[T]| v.iter().filter(|x| x.bits64() == value.bits64()).count();
        let (in_got, in_want) = (count(got), count(want));
        let reason = format!(
            "not a permutation of the reference: {value:?} occurs {in_got} times in the \
             output, {in_want} times in the reference"
        );
        Err(
            match got.iter().position(|x| x.bits64() == value.bits64()) {
                Some(i) if in_got > in_want => Mismatch::at(i, reason),
                _ => Mismatch::whole(reason),
            },
        )
    }
}

/// Sorted in IEEE 754 total order (ascending or descending) and a permutation of the
/// reference, which may be in any order (the input itself will do).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sorted {
    /// Descending instead of ascending.
    pub descending: bool,
}

impl Sorted {
    /// Ascending order.
    pub fn ascending() -> Sorted {
        Sorted { descending: false }
    }

    /// Descending order.
    pub fn descending() -> Sorted {
        Sorted { descending: true }
    }

    fn in_order<T: Element>(&self, a: &T, b: &T) -> bool {
        let order = a.total_order(b);
        if self.descending {
            order.is_ge()
        } else {
            order.is_le()
        }
    }

    fn direction(&self) -> &'static str {
        if self.descending {
            "descending"
        } else {
            "ascending"
        }
    }
}

impl<T: Element> Compare<T> for Sorted {
    fn compare(&self, got: &[T], want: &[T]) -> Result<(), Mismatch> {
        if let Some(i) = (1..got.len()).find(|&i| !self.in_order(&got[i - 1], &got[i])) {
            return Err(Mismatch::at(
                i,
                format!("not sorted ({}, IEEE 754 total order)", self.direction()),
            ));
        }
        Permutation.compare(got, want)
    }
}

/// Pairs `(key, value)` sorted by key (IEEE 754 total order, ascending or descending), that are
/// a permutation of the reference's pairs, where pairs of equal keys (equal bit patterns) keep
/// the order they have in the reference: the result of a stable sort by key of the reference,
/// which may be the input itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct StableByKey {
    /// Descending instead of ascending.
    pub descending: bool,
}

impl StableByKey {
    /// Ascending keys.
    pub fn ascending() -> StableByKey {
        StableByKey { descending: false }
    }

    /// Descending keys.
    pub fn descending() -> StableByKey {
        StableByKey { descending: true }
    }
}

/// Groups of equal keys longer than this are not searched for the reason of a value mismatch.
const GROUP_SEARCH_MAX: usize = 4096;

impl<K: Element, V: PartialEq> Compare<(K, V)> for StableByKey {
    fn compare(&self, got: &[(K, V)], want: &[(K, V)]) -> Result<(), Mismatch> {
        let sorted = Sorted {
            descending: self.descending,
        };
        if got.len() != want.len() {
            return Err(Mismatch::whole(format!(
                "lengths differ: output {}, reference {}",
                got.len(),
                want.len()
            )));
        }
        if let Some(i) = (1..got.len()).find(|&i| !sorted.in_order(&got[i - 1].0, &got[i].0)) {
            return Err(Mismatch::at(
                i,
                format!(
                    "not sorted by key ({}, IEEE 754 total order)",
                    sorted.direction()
                ),
            ));
        }
        let mut order: Vec<usize> = (0..want.len()).collect();
        if self.descending {
            order.sort_by(|&a, &b| want[b].0.total_order(&want[a].0));
        } else {
            order.sort_by(|&a, &b| want[a].0.total_order(&want[b].0));
        }
        let expected = |i: usize| &want[order[i]];
        let Some(i) = (0..got.len())
            .find(|&i| got[i].0.bits64() != expected(i).0.bits64() || got[i].1 != expected(i).1)
        else {
            return Ok(());
        };
        if got[i].0.bits64() != expected(i).0.bits64() {
            return Err(Mismatch::at(
                i,
                "keys are not a permutation of the reference's keys",
            ));
        }
        // The group of keys equal to this one.
        let key = got[i].0.bits64();
        let start = (0..i)
            .rev()
            .take_while(|&j| got[j].0.bits64() == key)
            .last()
            .unwrap_or(i);
        let end = (i..got.len())
            .take_while(|&j| got[j].0.bits64() == key)
            .last()
            .unwrap_or(i)
            + 1;
        let reason = if end - start > GROUP_SEARCH_MAX {
            "a value differs within a group of equal keys (out of the reference's order, or not \
             a value of the reference)"
        } else {
            let mut unmatched: Vec<&V> = (start..end).map(|j| &expected(j).1).collect();
            let permuted =
                (start..end).all(|j| match unmatched.iter().position(|v| **v == got[j].1) {
                    Some(p) => {
                        unmatched.swap_remove(p);
                        true
                    }
                    None => false,
                });
            if permuted {
                "equal keys out of the reference's order (not stable)"
            } else {
                "values are not those of the reference's pairs"
            }
        };
        Err(Mismatch::at(i, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_compare_by_bits_ulps_and_tolerance() {
        let nan_a = f32::from_bits(0x7fc0_0001);
        assert!(Bitwise.compare(&[0.0f32], &[-0.0]).is_err());
        assert!(Bitwise.compare(&[nan_a], &[f32::NAN]).is_err());
        assert!(Exact.compare(&[f32::NAN], &[f32::NAN]).is_err());
        assert!(Ulps(0).compare(&[nan_a, 0.0], &[f32::NAN, -0.0]).is_ok());
        assert!(Ulps(1)
            .compare(&[1.0f32], &[f32::from_bits(0x3f80_0001)])
            .is_ok());
        assert!(Ulps(1)
            .compare(&[1.0f32], &[f32::from_bits(0x3f80_0002)])
            .is_err());
        assert!(Ulps(100).compare(&[f32::INFINITY], &[f32::MAX]).is_err());
        let t = Tolerance {
            abs: 0.1,
            rel: 0.01,
        };
        assert!(t.compare(&[100.5f64], &[100.0]).is_ok());
        assert!(t.compare(&[101.5f64], &[100.0]).is_err());
        let m = Bitwise.compare(&[1u8, 2, 3, 4], &[1, 0, 3, 0]).unwrap_err();
        assert_eq!((m.index, m.differing), (Some(1), Some(2)));
    }

    #[test]
    fn permutations_and_sortedness() {
        assert!(Permutation.compare(&[3u32, 1, 2], &[1, 2, 3]).is_ok());
        let m = Permutation.compare(&[3u32, 3, 2], &[1, 2, 3]).unwrap_err();
        assert!(m.reason.contains("occurs"), "{m}");
        assert!(Sorted::ascending()
            .compare(&[1i16, 2, 3], &[3, 1, 2])
            .is_ok());
        assert_eq!(
            Sorted::descending()
                .compare(&[3i16, 1, 2], &[3, 1, 2])
                .unwrap_err()
                .index,
            Some(2)
        );
        let floats = [f32::NEG_INFINITY, -0.0, 0.0, f32::NAN];
        assert!(Sorted::ascending()
            .compare(&floats, &[f32::NAN, 0.0, -0.0, f32::NEG_INFINITY])
            .is_ok());
    }

    #[test]
    fn stability_is_checked_and_explained() {
        let input = [(2u32, 'a'), (1, 'b'), (2, 'c'), (1, 'd')];
        let stable = [(1u32, 'b'), (1, 'd'), (2, 'a'), (2, 'c')];
        assert!(StableByKey::ascending().compare(&stable, &input).is_ok());
        let unstable = [(1u32, 'd'), (1, 'b'), (2, 'a'), (2, 'c')];
        let m = StableByKey::ascending()
            .compare(&unstable, &input)
            .unwrap_err();
        assert_eq!(m.index, Some(0));
        assert!(m.reason.contains("not stable"), "{m}");
        let wrong = [(1u32, 'b'), (1, 'x'), (2, 'a'), (2, 'c')];
        let m = StableByKey::ascending()
            .compare(&wrong, &input)
            .unwrap_err();
        assert!(m.reason.contains("not those"), "{m}");
        let unsorted = [(2u32, 'a'), (1, 'b'), (1, 'd'), (2, 'c')];
        assert_eq!(
            StableByKey::ascending()
                .compare(&unsorted, &input)
                .unwrap_err()
                .index,
            Some(1)
        );
        let descending = [(2u32, 'a'), (2, 'c'), (1, 'b'), (1, 'd')];
        assert!(StableByKey::descending()
            .compare(&descending, &input)
            .is_ok());
    }

    #[test]
    fn mismatches_render_a_window_not_the_whole_output() {
        let want: Vec<u32> = (0..100_000).collect();
        let mut got = want.clone();
        got[50_000] = 7;
        let failure = Exact.check(&got, &want).unwrap_err();
        let text = failure.message();
        assert_eq!(
            failure.kind(),
            &FailureKind::Mismatch {
                index: Some(50_000)
            }
        );
        assert!(text.contains("> 50000"), "{text}");
        assert!(text.contains("49996") && text.contains("50004"), "{text}");
        assert!(!text.contains("49995") && !text.contains("50005"), "{text}");
    }
}
