//! The element types the input strategies generate and the comparators understand: the integer
//! and floating-point primitives, through [`Element`] (bit patterns, IEEE 754 total order,
//! special values, shrinking) and [`Float`] (distances in ULPs, tolerances).

use cuda_rt::DeviceCopy;
use std::cmp::Ordering;
use std::fmt::Debug;

/// A primitive number as test data: generated from random bits, compared bit for bit or in
/// IEEE 754 total order, with the values that break code (extremes, NaNs, zeros, subnormals),
/// and shrunk toward zero.
///
/// Implemented for `u8`, `u16`, `u32`, `u64`, `i8`, `i16`, `i32`, `i64`, `f32` and `f64`.
///
/// # Examples
/// ```
/// use cuda_rt_testing::Element;
/// assert_eq!((-0.0f32).bits64(), 0x8000_0000);
/// assert!((-0.0f32).total_order(&0.0).is_lt());
/// assert!(f32::specials().iter().any(|x| x.is_nan()));
/// ```
pub trait Element: DeviceCopy + Debug + PartialEq + BitEq + Send + Sync {
    /// The bit pattern, zero-extended to 64 bits.
    fn bits64(self) -> u64;
    /// The value of the low bits of `bits`.
    fn from_bits64(bits: u64) -> Self;
    /// The order of [`Ord`] for integers; for floats IEEE 754 `totalOrder`:
    /// `-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN`, NaNs ordered by payload.
    fn total_order(&self, other: &Self) -> Ordering;
    /// A small value: `x` for integers (wrapping), `x - 8` for floats (so that negative
    /// values and zero occur).
    fn from_small(x: u32) -> Self;
    /// The values that break code: MIN, MAX, 0, ±1 and their neighbours for integers; NaNs with
    /// payloads (quiet, signalling, negative), ±0, ±inf, subnormals, MIN_POSITIVE, MAX, MIN
    /// and ±1 for floats.
    fn specials() -> Vec<Self>;
    /// The value as a sign and a magnitude that shrinking moves toward zero (for floats the
    /// magnitude is the bit pattern without its sign, so that NaNs and infinities shrink to
    /// finite values, and those toward 0).
    fn to_magnitude(self) -> (bool, u128);
    /// The inverse of [`to_magnitude`](Self::to_magnitude) for magnitudes at most the one it
    /// returned.
    fn from_magnitude(negative: bool, magnitude: u128) -> Self;
}

/// A floating-point [`Element`]: distances in units in the last place, and conversion to `f64`
/// for tolerances.
pub trait Float: Element {
    /// Whether the value is a NaN.
    fn is_nan_value(self) -> bool;
    /// Whether the value is ±infinity.
    fn is_infinite_value(self) -> bool;
    /// The value as an `f64` (exact for `f32` and `f64`).
    fn to_f64(self) -> f64;
    /// The number of representable values between `self` and `other` (0 when equal; +0 and -0
    /// are equal here). Both must be finite.
    fn ulps_between(self, other: Self) -> u64;
}

macro_rules! unsigned_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn bits64(self) -> u64 {
                u64::from(self)
            }
            fn from_bits64(bits: u64) -> Self {
                bits as $t
            }
            fn total_order(&self, other: &Self) -> Ordering {
                self.cmp(other)
            }
            fn from_small(x: u32) -> Self {
                x as $t
            }
            fn specials() -> Vec<Self> {
                vec![0, 1, 2, <$t>::MAX, <$t>::MAX - 1, <$t>::MAX / 2, <$t>::MAX / 2 + 1]
            }
            fn to_magnitude(self) -> (bool, u128) {
                (false, u128::from(self))
            }
            fn from_magnitude(_negative: bool, magnitude: u128) -> Self {
                magnitude as $t
            }
        }
    )*};
}
unsigned_element!(u8, u16, u32, u64);

macro_rules! signed_element {
    ($($t:ty => $u:ty),*) => {$(
        impl Element for $t {
            fn bits64(self) -> u64 {
                u64::from(self as $u)
            }
            fn from_bits64(bits: u64) -> Self {
                bits as $u as $t
            }
            fn total_order(&self, other: &Self) -> Ordering {
                self.cmp(other)
            }
            fn from_small(x: u32) -> Self {
                x as $t
            }
            fn specials() -> Vec<Self> {
                vec![0, 1, -1, <$t>::MIN, <$t>::MIN + 1, <$t>::MAX, <$t>::MAX - 1]
            }
            fn to_magnitude(self) -> (bool, u128) {
                (self < 0, u128::from(self.unsigned_abs()))
            }
            fn from_magnitude(negative: bool, magnitude: u128) -> Self {
                // Magnitudes never exceed the starting one, so MIN's magnitude wraps back to
                // MIN and every other fits.
                let value = magnitude as $u as $t;
                if negative {
                    value.wrapping_neg()
                } else {
                    value
                }
            }
        }
    )*};
}
signed_element!(i8 => u8, i16 => u16, i32 => u32, i64 => u64);

macro_rules! float_element {
    ($($t:ty => $u:ty, $sign:expr, $specials:expr),*) => {$(
        impl Element for $t {
            fn bits64(self) -> u64 {
                u64::from(self.to_bits())
            }
            fn from_bits64(bits: u64) -> Self {
                <$t>::from_bits(bits as $u)
            }
            fn total_order(&self, other: &Self) -> Ordering {
                self.total_cmp(other)
            }
            fn from_small(x: u32) -> Self {
                x as $t - 8.0
            }
            fn specials() -> Vec<Self> {
                $specials.into_iter().map(<$t>::from_bits).collect()
            }
            fn to_magnitude(self) -> (bool, u128) {
                let bits = self.to_bits();
                (bits & $sign != 0, u128::from(bits & !$sign))
            }
            fn from_magnitude(negative: bool, magnitude: u128) -> Self {
                let sign = if negative { $sign } else { 0 };
                <$t>::from_bits(sign | magnitude as $u)
            }
        }

        impl Float for $t {
            fn is_nan_value(self) -> bool {
                self.is_nan()
            }
            fn is_infinite_value(self) -> bool {
                self.is_infinite()
            }
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
            fn ulps_between(self, other: Self) -> u64 {
                // Sign and magnitude onto a line of integers where consecutive values are
                // consecutive floats (+0 and -0 both at 0).
                fn line(x: $t) -> i128 {
                    let bits = x.to_bits();
                    let magnitude = i128::from(bits & !$sign);
                    if bits & $sign != 0 { -magnitude } else { magnitude }
                }
                (line(self) - line(other)).unsigned_abs() as u64
            }
        }
    )*};
}
float_element!(
    f32 => u32, 0x8000_0000u32, [
        0x7fc0_0000u32, // quiet NaN
        0xffc0_0000,    // negative quiet NaN
        0x7f80_0001,    // signalling NaN, smallest payload
        0xffc0_1234,    // negative NaN with a payload
        0x7fff_ffff,    // NaN, largest payload
        0x7f80_0000,    // +inf
        0xff80_0000,    // -inf
        0x0000_0000,    // +0
        0x8000_0000,    // -0
        0x0000_0001,    // smallest subnormal
        0x8000_0001,    // smallest negative subnormal
        0x007f_ffff,    // largest subnormal
        0x0080_0000,    // MIN_POSITIVE
        0x7f7f_ffff,    // MAX
        0xff7f_ffff,    // MIN
        0x3f80_0000,    // 1
        0xbf80_0000,    // -1
    ]
);
float_element!(
    f64 => u64, 0x8000_0000_0000_0000u64, [
        0x7ff8_0000_0000_0000u64,
        0xfff8_0000_0000_0000,
        0x7ff0_0000_0000_0001,
        0xfff8_0000_0000_1234,
        0x7fff_ffff_ffff_ffff,
        0x7ff0_0000_0000_0000,
        0xfff0_0000_0000_0000,
        0x0000_0000_0000_0000,
        0x8000_0000_0000_0000,
        0x0000_0000_0000_0001,
        0x8000_0000_0000_0001,
        0x000f_ffff_ffff_ffff,
        0x0010_0000_0000_0000,
        0x7fef_ffff_ffff_ffff,
        0xffef_ffff_ffff_ffff,
        0x3ff0_0000_0000_0000,
        0xbff0_0000_0000_0000,
    ]
);

/// Values compared bit for bit: [`Element`]s, arrays and pairs of them. What the
/// [`Bitwise`](crate::compare::Bitwise) comparator needs.
pub trait BitEq {
    /// Whether the two values have the same bit patterns (element by element).
    fn bit_eq(&self, other: &Self) -> bool;
}

macro_rules! bit_eq_elements {
    ($($t:ty),*) => {$(
        impl BitEq for $t {
            fn bit_eq(&self, other: &Self) -> bool {
                self.bits64() == other.bits64()
            }
        }
    )*};
}
bit_eq_elements!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

impl<T: BitEq, const N: usize> BitEq for [T; N] {
    fn bit_eq(&self, other: &Self) -> bool {
        self.iter().zip(other).all(|(a, b)| a.bit_eq(b))
    }
}

impl<A: BitEq, B: BitEq> BitEq for (A, B) {
    fn bit_eq(&self, other: &Self) -> bool {
        self.0.bit_eq(&other.0) && self.1.bit_eq(&other.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T: Element>() {
        for x in T::specials() {
            let (negative, magnitude) = x.to_magnitude();
            assert_eq!(T::from_magnitude(negative, magnitude).bits64(), x.bits64());
            assert_eq!(T::from_bits64(x.bits64()).bits64(), x.bits64());
        }
    }

    #[test]
    fn magnitudes_and_bits_round_trip() {
        round_trips::<u8>();
        round_trips::<u64>();
        round_trips::<i8>();
        round_trips::<i64>();
        round_trips::<f32>();
        round_trips::<f64>();
    }

    #[test]
    fn floats_order_totally_and_count_ulps() {
        assert!(f32::NAN.total_order(&f32::INFINITY).is_gt());
        assert!((-f32::NAN).total_order(&f32::NEG_INFINITY).is_lt());
        assert_eq!(0.0f32.ulps_between(-0.0), 0);
        assert_eq!(1.0f32.ulps_between(f32::from_bits(0x3f80_0002)), 2);
        assert_eq!(
            f32::from_bits(1).ulps_between(f32::from_bits(0x8000_0001)),
            2
        );
        assert_eq!((-1.0f64).ulps_between(-1.0), 0);
    }

    #[test]
    fn signed_bits_are_zero_extended() {
        assert_eq!((-1i8).bits64(), 0xff);
        assert_eq!(i16::from_bits64(0xffff), -1);
        assert_eq!(i64::MIN.to_magnitude(), (true, 1u128 << 63));
        assert_eq!(i64::from_magnitude(true, 1u128 << 63), i64::MIN);
        assert_eq!(i8::from_magnitude(true, 5), -5);
    }
}
