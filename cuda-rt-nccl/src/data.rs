//! What NCCL moves and reduces: element types ([`DataType`]) and reductions ([`ReduceOp`]).

use crate::raw::{data_type, red_op, RawDataType, RawRedOp};
use cuda_rt::DeviceCopy;

mod private {
    pub trait Sealed {}
}

/// An element type NCCL knows (`ncclDataType_t`): `i8 u8 i32 u32 i64 u64 f32 f64`. Sealed.
pub trait DataType: DeviceCopy + private::Sealed {
    /// NCCL's name for the type.
    const RAW: RawDataType;
}

macro_rules! data_types {
    ($($t:ty => $raw:ident),* $(,)?) => {
        $(
            impl private::Sealed for $t {}
            impl DataType for $t {
                const RAW: RawDataType = data_type::$raw;
            }
        )*
    };
}

data_types!(i8 => I8, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// A reduction of a collective (`ncclRedOp_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `ncclSum`.
    Sum,
    /// `ncclProd`.
    Prod,
    /// `ncclMax`.
    Max,
    /// `ncclMin`.
    Min,
    /// `ncclAvg`: the sum divided by the number of ranks (integer division for integers).
    Avg,
}

impl ReduceOp {
    /// NCCL's name for the reduction.
    pub fn raw(self) -> RawRedOp {
        match self {
            ReduceOp::Sum => red_op::SUM,
            ReduceOp::Prod => red_op::PROD,
            ReduceOp::Max => red_op::MAX,
            ReduceOp::Min => red_op::MIN,
            ReduceOp::Avg => red_op::AVG,
        }
    }
}
