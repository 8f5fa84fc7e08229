//! cuda-rt (work in progress).
