//! Misuses of the safe API that must not compile: each file of `tests/compile_fail/` is a
//! `compile_fail` doctest of this module, with the error code it must fail with (so that a case
//! failing for another reason, a typo say, does not pass). `cargo test -p cuda-runtime --doc` runs
//! them; nothing runs on a GPU.

/// One case: a unit struct whose documentation is the file as a `compile_fail` example.
macro_rules! case {
    ($name:ident, $code:literal, $file:literal) => {
        #[doc = concat!(
                                            "```compile_fail,", $code, "\n",
                                            include_str!(concat!("../tests/compile_fail/", $file)),
                                            "\n```"
                                        )]
        #[allow(dead_code, non_camel_case_types)]
        pub struct $name;
    };
}

case!(callback_not_send, "E0277", "callback_not_send.rs");
case!(callback_not_static, "E0373", "callback_not_static.rs");
case!(
    capture_stream_used_during_capture,
    "E0502",
    "capture_stream_used_during_capture.rs"
);
case!(
    condition_escapes_builder,
    "E0521",
    "condition_escapes_builder.rs"
);
case!(
    condition_of_a_capture_in_a_builder,
    "E0521",
    "condition_of_a_capture_in_a_builder.rs"
);
case!(
    current_device_guard_not_send,
    "E0277",
    "current_device_guard_not_send.rs"
);
case!(
    captured_handle_escapes,
    "E0521",
    "captured_handle_escapes.rs"
);
case!(
    device_graph_launched_from_host_while_bound,
    "E0502",
    "device_graph_launched_from_host_while_bound.rs"
);
case!(
    device_graph_stage_lent_while_bound,
    "E0499",
    "device_graph_stage_lent_while_bound.rs"
);
case!(
    graph_borrowing_launched_outside_scope,
    "E0373",
    "graph_borrowing_launched_outside_scope.rs"
);
case!(
    graph_exec_frees_buffer,
    "E0505",
    "graph_exec_frees_buffer.rs"
);
case!(
    graph_outlives_device_buffer,
    "E0597",
    "graph_outlives_device_buffer.rs"
);
case!(
    host_written_while_graph_reads,
    "E0502",
    "host_written_while_graph_reads.rs"
);
// Loaded libraries need a CUDA 12.8 runtime (`cudaLibraryLoadData`).
#[cfg(cudart_ge = "12.8")]
case!(
    graph_outlives_its_kernel,
    "E0505",
    "graph_outlives_its_kernel.rs"
);
case!(
    graph_node_escapes_builder,
    "E0521",
    "graph_node_escapes_builder.rs"
);
case!(
    host_node_borrow_dies_before_graph,
    "E0597",
    "host_node_borrow_dies_before_graph.rs"
);
case!(
    launch_mutably_while_borrowed,
    "E0502",
    "launch_mutably_while_borrowed.rs"
);
case!(
    launch_read_only_for_mutable,
    "E0277",
    "launch_read_only_for_mutable.rs"
);
case!(not_device_copy, "E0277", "not_device_copy.rs");
case!(
    pinned_used_while_in_flight,
    "E0382",
    "pinned_used_while_in_flight.rs"
);
case!(
    registered_host_unregistered_during_copy,
    "E0597",
    "registered_host_unregistered_during_copy.rs"
);
case!(
    registered_read_only_download_destination,
    "E0596",
    "registered_read_only_download_destination.rs"
);
case!(
    registered_read_only_written,
    "E0594",
    "registered_read_only_written.rs"
);
case!(
    scope_borrow_local_of_closure,
    "E0597",
    "scope_borrow_local_of_closure.rs"
);
case!(
    scope_drop_host_during_upload,
    "E0597",
    "scope_drop_host_during_upload.rs"
);
case!(scope_handle_escapes, "E0521", "scope_handle_escapes.rs");
case!(scope_handle_to_thread, "E0277", "scope_handle_to_thread.rs");
case!(
    scope_mutate_host_during_upload,
    "E0502",
    "scope_mutate_host_during_upload.rs"
);
case!(
    scope_read_host_during_download,
    "E0502",
    "scope_read_host_during_download.rs"
);
case!(
    scope_register_local_of_closure,
    "E0597",
    "scope_register_local_of_closure.rs"
);
case!(
    scope_registered_slice_escapes,
    "E0521",
    "scope_registered_slice_escapes.rs"
);
case!(
    scope_registered_vec_reallocated,
    "E0499",
    "scope_registered_vec_reallocated.rs"
);
case!(
    scope_stream_dropped_inside,
    "E0597",
    "scope_stream_dropped_inside.rs"
);
case!(
    scoped_callback_borrows_closure_local,
    "E0373",
    "scoped_callback_borrows_closure_local.rs"
);
case!(
    scoped_callback_not_send,
    "E0277",
    "scoped_callback_not_send.rs"
);
case!(
    stage_lent_while_graph_launched,
    "E0502",
    "stage_lent_while_graph_launched.rs"
);
case!(
    stream_ref_outlives_stream,
    "E0597",
    "stream_ref_outlives_stream.rs"
);
case!(
    two_graphs_write_one_buffer,
    "E0499",
    "two_graphs_write_one_buffer.rs"
);
case!(view_aliasing_mutable, "E0499", "view_aliasing_mutable.rs");
case!(view_escapes_scope, "E0521", "view_escapes_scope.rs");
case!(view_outlives_buffer, "E0597", "view_outlives_buffer.rs");
case!(view_read_only_written, "E0599", "view_read_only_written.rs");
case!(
    pending_future_buffer_used_before_handed_back,
    "E0382",
    "pending_future_buffer_used_before_handed_back.rs"
);
case!(
    event_future_outlives_event,
    "E0505",
    "event_future_outlives_event.rs"
);
