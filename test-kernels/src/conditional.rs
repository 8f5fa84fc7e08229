//! Typed declarations of the kernels of `kernels/conditional.cu`, which set the conditions of
//! conditional graph nodes and launch graphs from the device.

use cuda_rt::{kernels, ConditionHandle, DeviceGraphHandle, Slice, SliceMut};

kernels! {
    /// One step of a loop: `state[0]` (steps left) goes down by one unless it is zero,
    /// `state[1]` (steps taken) up by one, and the condition becomes whether steps are left
    /// (zero when `state` has fewer than two elements). Sets the condition from one thread.
    pub unsafe fn cuda_rt_cond_count_down(state: SliceMut<u32>, condition: ConditionHandle);
    /// Sets the condition to `value`, from one thread.
    pub unsafe fn cuda_rt_cond_set(condition: ConditionHandle, value: u32);
    /// Sets the condition to `data[0]` (zero when `data` is empty), from one thread.
    pub unsafe fn cuda_rt_cond_set_from(data: Slice<u32>, condition: ConditionHandle);
    /// Launches `graph` from the device: fire-and-forget (`mode` 0), as a tail launch (1) or
    /// as a sibling of the launching graph (2); `status[0]` gets the launch's `cudaError_t`
    /// (when `status` is not empty). One thread.
    pub unsafe fn cuda_rt_cond_launch_graph(
        status: SliceMut<u32>,
        graph: DeviceGraphHandle,
        mode: u32,
    );
    /// One pass of a loop that a device-launchable graph runs by relaunching itself:
    /// `state[1]` (passes run) goes up by one; while `state[0]` (passes left) is not zero, it
    /// goes down by one and the kernel's own graph is queued again as a tail launch
    /// (`cudaGetCurrentGraphExec`); a failed relaunch's `cudaError_t` goes to `state[2]`.
    /// Nothing when `state` has fewer than three elements. One thread.
    pub unsafe fn cuda_rt_cond_relaunch_self(state: SliceMut<u32>);
    /// Writes the GPU's global timer (nanoseconds) to `out[0]` (nothing when `out` is empty).
    /// One thread.
    pub unsafe fn cuda_rt_cond_stamp(out: SliceMut<u64>);
}
