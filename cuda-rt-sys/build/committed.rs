//! The committed bindings: which ABI of `src/bindings.rs` serves which CUDA runtime versions.
//!
//! Shared by the build script (to choose an ABI), by the tests (to regenerate the chosen ABI's
//! bindings and compare) and by `scripts/update-bindings.sh` (to regenerate and merge them all).
//! One entry per ABI: minors that share every size, alignment and field offset of their named
//! types (except the `reserved` tails that later minors carve new fields out of) share an ABI,
//! generated from the newest of them. CUDA 12.9 grew
//! `cudaChildGraphNodeParams`; CUDA 13 minors grew `cudaKernelNodeParamsV2`,
//! `cudaHostNodeParamsV2`, `cudaMemsetParamsV2` and others: each minor that changed a size
//! starts an ABI.

/// One committed ABI.
#[derive(Debug, Clone, Copy)]
pub struct Committed {
    /// The ABI's name: the value of the `cuda_rt_sys_bindings` cfg that selects its items of
    /// `src/bindings.rs`.
    pub name: &'static str,
    /// The oldest `CUDART_VERSION` it serves.
    pub first: u32,
    /// The newest `CUDART_VERSION` whose headers were checked to have the same ABI.
    pub last: u32,
    /// The `CUDART_VERSION` of the headers it was generated from.
    pub source: u32,
    /// The PyPI wheels those headers come from: the runtime's, and the one with `crt/`
    /// (read by `scripts/update-bindings.sh`, which regenerates every ABI from them).
    pub source_wheels: [&'static str; 2],
}

/// Every committed ABI, oldest first (the order of the merge's inputs).
pub const COMMITTED: &[Committed] = &[
    Committed {
        name: "cuda_12_0",
        first: 12000,
        last: 12080,
        source: 12080,
        source_wheels: [
            "nvidia-cuda-runtime-cu12==12.8.90",
            "nvidia-cuda-nvcc-cu12==12.8.93",
        ],
    },
    Committed {
        name: "cuda_12_9",
        first: 12090,
        last: 12090,
        source: 12090,
        source_wheels: [
            "nvidia-cuda-runtime-cu12==12.9.79",
            "nvidia-cuda-nvcc-cu12==12.9.86",
        ],
    },
    Committed {
        name: "cuda_13_0",
        first: 13000,
        last: 13000,
        source: 13000,
        source_wheels: ["nvidia-cuda-runtime==13.0.96", "nvidia-cuda-crt==13.0.88"],
    },
    Committed {
        name: "cuda_13_1",
        first: 13010,
        last: 13010,
        source: 13010,
        source_wheels: ["nvidia-cuda-runtime==13.1.80", "nvidia-cuda-crt==13.1.80"],
    },
    Committed {
        name: "cuda_13_2",
        first: 13020,
        last: 13030,
        source: 13030,
        source_wheels: ["nvidia-cuda-runtime==13.3.29", "nvidia-cuda-crt==13.3.33"],
    },
    Committed {
        name: "cuda_13_4",
        first: 13040,
        last: 13050,
        source: 13050,
        source_wheels: ["nvidia-cuda-runtime==13.5.37", "nvidia-cuda-crt==13.5.37"],
    },
];

/// What serves `version`.
#[derive(Debug, Clone, Copy)]
pub enum Choice {
    /// An ABI checked against this version's headers.
    Exact(Committed),
    /// A newer minor than any checked: the newest ABI of its major. A newer minor may have
    /// grown a struct; what the bindings declare is what the older headers declared.
    NewerMinor(Committed),
}

/// The committed ABI for `version` (a `CUDART_VERSION`), or `None` for a major with none.
pub fn choose(version: u32) -> Option<Choice> {
    if let Some(c) = COMMITTED
        .iter()
        .find(|c| (c.first..=c.last).contains(&version))
    {
        return Some(Choice::Exact(*c));
    }
    COMMITTED
        .iter()
        .rev()
        .find(|c| c.first / 1000 == version / 1000 && version > c.last)
        .map(|c| Choice::NewerMinor(*c))
}

/// `13000` as `13.0`.
pub fn dotted(version: u32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}
