//! The Rust side of the sort's C interface (`src/abi.rs`) equals a fresh bindgen generation
//! from `kernels/cuda_rt_sort.h`, the header the kernels are compiled with: structs, flags,
//! key modes and status-word constants are written once, in the header. Needs libclang at run
//! time (Debian: libclang-dev); without it the test says it was skipped, unless `CI` or
//! `CUDA_RT_SYS_REQUIRE_LIBCLANG=1` is set, where it fails.
//!
//! `CUDA_RT_UPDATE_SORT_ABI=1` writes the fresh generation instead of comparing
//! (`cargo xtask regen sort-abi`).
//!
//! The header also defines where the library's choices by size switch
//! (`CUDA_RT_SORT_*_KEYS`) and its block widths; a second test checks that the kernels'
//! planning switches exactly there, as the Rust side reads them (`ffi::choices`).

use std::path::Path;

/// The one bindgen configuration of the sort's interface.
fn generate(header: &Path, include_dir: &Path) -> Result<String, bindgen::BindgenError> {
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .clang_args(["-x", "c", "-std=c11"])
        .allowlist_type("CudaRtSort.*")
        .allowlist_var("CUDA_RT_SORT_.*")
        .allowlist_function("cuda_rt_kernels_(sort.*|merge_runs)")
        // Nothing but the items above: the runtime's types they name (cudaError_t,
        // cudaStream_t) come from cuda-rt-sys, generated from the same headers.
        .allowlist_recursively(false)
        .raw_line("use cuda_rt_sys::{cudaError_t, cudaStream_t};")
        .rust_target(bindgen::RustTarget::stable(82, 0).expect("a Rust version bindgen knows"))
        .rust_edition(bindgen::RustEdition::Edition2021)
        .derive_default(true)
        // Arguments hold pointers: no all-null default (and no unsafe zeroing in the output).
        .no_default("CudaRtSortArgs")
        .derive_debug(true)
        .derive_copy(true)
        .derive_eq(true)
        .derive_partialeq(true)
        .derive_hash(true)
        .layout_tests(true)
        .generate_comments(true)
        .use_core()
        .generate()?;
    Ok(bindings.to_string())
}

#[test]
fn committed_sort_abi_equals_a_fresh_generation() {
    let Some(include_dir) = option_env!("CUDA_RT_SORT_CUDA_INCLUDE") else {
        println!("skipped committed_sort_abi_equals_a_fresh_generation: built without a toolkit");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = root.join("kernels/cuda_rt_sort.h");
    if !Path::new(include_dir).join("cuda_runtime_api.h").is_file() || !header.is_file() {
        // Built elsewhere (e.g. staged for the GPU machine): the sources are not here.
        println!(
            "skipped committed_sort_abi_equals_a_fresh_generation: {} or the toolkit headers at \
             {include_dir} are not on this machine",
            header.display()
        );
        return;
    }
    let generated = cuda_rt_testing::generated::with_libclang(
        "committed_sort_abi_equals_a_fresh_generation",
        || generate(&header, Path::new(include_dir)),
    );
    let fresh = match generated {
        None => return,
        Some(Ok(text)) => text,
        Some(Err(e)) => panic!("bindgen failed on {}: {e}", header.display()),
    };
    let committed_path = root.join("src/abi.rs");
    if std::env::var("CUDA_RT_UPDATE_SORT_ABI").is_ok_and(|v| v == "1") {
        std::fs::write(&committed_path, &fresh).expect("write src/abi.rs");
        println!("wrote {}", committed_path.display());
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).expect("read src/abi.rs");
    cuda_rt_testing::generated::assert_committed_is_fresh(
        &fresh,
        &committed,
        "src/abi.rs (from kernels/cuda_rt_sort.h)",
        "`cargo xtask regen sort-abi`",
    );
}

/// The plans of sorts on either side of each threshold of `kernels/cuda_rt_sort.h`, computed
/// by the kernels' own planning (`cuda_rt_kernels_sort_layout`: host only, no GPU needed), for
/// 227 KiB of shared memory per block (an H100's), where every block fits.
#[test]
fn plans_switch_at_the_thresholds_of_the_header() {
    use cuda_rt_sort::ffi::{choices, flags};
    use cuda_rt_sort::raw::layout_with_limit;
    use cuda_rt_sort::{Cuts, Merge, SortKey, Strategy, TileWidth};

    const H100_BLOCK_SMEM: usize = 227 * 1024;
    let key = <u32 as SortKey>::FORMAT;
    let plan = |n: usize, strategy: Strategy| {
        layout_with_limit(n, key, 0, strategy, Some(H100_BLOCK_SMEM)).expect("a layout")
    };
    if plan(1, Strategy::AUTO).smem_limit as usize != H100_BLOCK_SMEM {
        println!(
            "skipped plans_switch_at_the_thresholds_of_the_header: this GPU's blocks have less \
             than 227 KiB of shared memory, so the plans differ"
        );
        return;
    }
    let field = |n: usize, strategy: Strategy, mask: u32| plan(n, strategy).flags & mask;
    let auto = Strategy::AUTO;
    let two_way = Strategy {
        merge: Merge::TwoWay(Cuts::Fused),
        ..Strategy::AUTO
    };

    let four_way = choices::FOUR_WAY_MIN_KEYS;
    assert_eq!(
        field(four_way - 1, auto, flags::CUTS_MASK),
        flags::CUTS_FUSED
    );
    assert_eq!(
        field(four_way, auto, flags::CUTS_MASK),
        flags::CUTS_FOUR_WAY
    );

    let device = choices::DEVICE_DRIVER_MIN_KEYS;
    assert_eq!(
        field(device - 1, two_way, flags::DRIVER_MASK),
        flags::DRIVER_HOST
    );
    // A build without the device-driven chain queues every sort from the host.
    let past_device = if cfg!(feature = "device-driven") {
        flags::DRIVER_DEVICE
    } else {
        flags::DRIVER_HOST
    };
    assert_eq!(field(device, two_way, flags::DRIVER_MASK), past_device);
    // Four-way sorts are queued from the host at every size.
    assert_eq!(field(device, auto, flags::DRIVER_MASK), flags::DRIVER_HOST);

    let narrow_tile = choices::NARROW_TILE_MAX_KEYS;
    assert_eq!(
        field(narrow_tile, two_way, flags::TILE_MASK),
        flags::TILE_NARROW
    );
    assert_eq!(
        field(narrow_tile + 1, two_way, flags::TILE_MASK),
        flags::TILE_WIDE
    );
    // Four-way sorts keep narrow tiles.
    assert_eq!(field(1 << 28, auto, flags::TILE_MASK), flags::TILE_NARROW);

    let narrow_merge = choices::NARROW_MERGE_MAX_KEYS;
    assert_eq!(
        field(narrow_merge, auto, flags::MERGE_MASK),
        flags::MERGE_NARROW
    );
    assert_eq!(
        field(narrow_merge + 1, auto, flags::MERGE_MASK),
        flags::MERGE_WIDE
    );

    // Tiles are threads × keys per thread: the widths' ratio is the header's.
    let tile = |width: TileWidth| {
        let strategy = Strategy {
            tile: width,
            ..two_way
        };
        plan(1, strategy).sort_tile
    };
    assert_eq!(
        tile(TileWidth::Wide) * choices::TILE_THREADS_NARROW,
        tile(TileWidth::Narrow) * choices::TILE_THREADS_WIDE
    );
    // A merge tile is one group's threads × keys per thread, and a narrow tile a power-of-two
    // number of merge tiles.
    let layout = plan(1, auto);
    assert_eq!(layout.merge_tile % choices::MERGE_GROUP_THREADS, 0);
    assert!((layout.sort_tile / layout.merge_tile).is_power_of_two());
}
