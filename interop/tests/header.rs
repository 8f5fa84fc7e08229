//! `include/cuda_rt.h` is what cbindgen generates from the exports (`cbindgen.toml`), every
//! function it declares is a global symbol of `libcuda_rt_interop.a`, and it compiles as C11,
//! C++17 and CUDA. None of it needs a GPU.
//!
//! `CUDA_RT_UPDATE_HEADER=1` rewrites the committed header instead of comparing
//! (`cargo xtask regen header`).

#[path = "common/tools.rs"]
mod tools;
use std::path::{Path, PathBuf};
use std::process::Command;
use tools::{nvcc, staticlib, tool};

/// This package's folder: where it was built, or `interop/` of the current directory (binaries
/// staged for another machine run from the checkout's root there).
fn interop_dir() -> Option<PathBuf> {
    [
        PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        PathBuf::from("interop"),
    ]
    .into_iter()
    .find(|dir| dir.join("cbindgen.toml").is_file() && dir.join("src/lib.rs").is_file())
}

fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped {test}: {why}");
}

/// The header as cbindgen generates it from `src/` now.
fn generated(dir: &Path) -> String {
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn header_is_generated_from_the_exports() {
    const TEST: &str = "header_is_generated_from_the_exports";
    let Some(dir) = interop_dir() else {
        return skip(TEST, "interop/ sources not found here");
    };
    let fresh = generated(&dir);
    let path = dir.join("include/cuda_rt.h");
    if std::env::var_os("CUDA_RT_UPDATE_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &fresh).unwrap();
        println!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(fresh.lines().count()));
        panic!(
            "{} differs from cbindgen's output from src/ (first at line {}: committed {:?}, \
             generated {:?}); run `cargo xtask regen header`",
            path.display(),
            first + 1,
            committed.lines().nth(first).unwrap_or("<end>"),
            fresh.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

/// The function names the header declares: identifiers `cuda_rt_*` followed by `(`, outside
/// comments.
fn declared_functions(header: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = header;
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("comment closed") + start + 2;
        rest = &rest[end..];
    }
    code.push_str(rest);
    let mut names = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find("cuda_rt_") {
        let start = at + found;
        let len = code[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(code.len() - start);
        if code[start + len..].trim_start().starts_with('(') {
            names.push(code[start..start + len].to_string());
        }
        at = start + len;
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_declared_function_is_exported_by_the_static_library() {
    const TEST: &str = "every_declared_function_is_exported_by_the_static_library";
    let Some(dir) = interop_dir() else {
        return skip(TEST, "interop/ sources not found here");
    };
    let header = std::fs::read_to_string(dir.join("include/cuda_rt.h")).unwrap();
    let declared = declared_functions(&header);
    assert!(
        declared.len() >= 12,
        "the header declares too few functions: {declared:?}"
    );
    assert!(header.contains(&format!(
        "#define CUDA_RT_INTEROP_ABI_VERSION {}",
        cuda_rt_interop::CUDA_RT_INTEROP_ABI_VERSION
    )));
    let Some(lib) = staticlib() else {
        return skip(
            TEST,
            "libcuda_rt_interop.a is neither beside this test binary nor its deps/ folder",
        );
    };
    let nm = std::env::var("NM").unwrap_or_else(|_| "nm".into());
    let Ok(output) = Command::new(&nm)
        .args(["--defined-only", "--extern-only"])
        .arg(&lib)
        .output()
    else {
        return skip(TEST, "no nm here (set NM)");
    };
    assert!(output.status.success(), "{nm} failed on {}", lib.display());
    let symbols = String::from_utf8_lossy(&output.stdout);
    let global_text: std::collections::HashSet<&str> = symbols
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().rev();
            let name = fields.next()?;
            (fields.next()? == "T").then_some(name)
        })
        .collect();
    let missing: Vec<&String> = declared
        .iter()
        .filter(|f| !global_text.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "declared in cuda_rt.h but not a global function of {}: {missing:?}",
        lib.display()
    );
}

/// The CUDA headers: the build's, or those of the toolkit of [`nvcc`].
fn toolkit_include() -> Option<PathBuf> {
    let build = PathBuf::from(cuda_rt_interop_fixtures::TOOLKIT_INCLUDE);
    let local = nvcc().and_then(|nvcc| {
        Some(
            nvcc.canonicalize()
                .ok()?
                .parent()?
                .parent()?
                .join("include"),
        )
    });
    std::iter::once(build)
        .chain(local)
        .find(|dir| dir.join("cuda_runtime_api.h").is_file())
}

fn compile_ok(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A translation unit that uses every kind of declaration of the header.
const USES_HEADER: &str = "#include \"cuda_rt.h\"\n\
    static cudaError_t use(cuda_rt_sort_workspace* w, void* keys, void* values, size_t n,\n\
                           cudaStream_t s) {\n\
        cuda_rt_key_type key = CUDA_RT_KEY_F64;\n\
        cuda_rt_order order = CUDA_RT_ORDER_DESCENDING;\n\
        cudaError_t e = cuda_rt_sort_async(w, keys, values, n, key, 16, order, s);\n\
        if (e != cudaSuccess) return e;\n\
        return cuda_rt_interop_abi_version() == CUDA_RT_INTEROP_ABI_VERSION\n\
            ? cuda_rt_sort_status(w) : cudaErrorUnknown;\n\
    }\n\
    cudaError_t (*keep)(cuda_rt_sort_workspace*, void*, void*, size_t, cudaStream_t) = use;\n";

#[test]
fn header_compiles_as_c11_cpp17_and_cuda() {
    const TEST: &str = "header_compiles_as_c11_cpp17_and_cuda";
    let (Some(include), Some(dir)) = (toolkit_include(), interop_dir()) else {
        return skip(
            TEST,
            "no CUDA headers on this machine (neither the build's nor a local toolkit's)",
        );
    };
    let scratch =
        std::env::temp_dir().join(format!("cuda-rt-interop-header-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut compilers = 0;
    for (compiler, language, standard, file) in [
        ("gcc", "c", "-std=c11", "uses_header.c"),
        ("g++", "c++", "-std=c++17", "uses_header.cpp"),
    ] {
        let Some(cc) = tool(Path::new(compiler)) else {
            skip(TEST, &format!("no {compiler} here"));
            continue;
        };
        let source = scratch.join(file);
        std::fs::write(&source, USES_HEADER).unwrap();
        compile_ok(
            Command::new(cc)
                .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic"])
                .args(["-x", language, standard, "-I"])
                .arg(&include)
                .arg("-I")
                .arg(dir.join("include"))
                .arg(&source),
        );
        compilers += 1;
    }
    if let Some(nvcc) = nvcc() {
        let source = scratch.join("uses_header.cu");
        std::fs::write(
            &source,
            format!("{USES_HEADER}__global__ void k(uint32_t* p) {{ p[0] = CUDA_RT_KEY_U32; }}\n"),
        )
        .unwrap();
        compile_ok(
            Command::new(nvcc)
                .args(["-std=c++17", "-c", "-Werror", "all-warnings", "-I"])
                .arg(dir.join("include"))
                .arg(&source)
                .arg("-o")
                .arg(scratch.join("uses_header.o")),
        );
        compilers += 1;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if compilers == 0 {
        skip(TEST, "no C, C++ or CUDA compiler here");
    }
}
