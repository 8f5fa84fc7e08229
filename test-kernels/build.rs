//! Compiles `kernels/*.cu` through cuda-rt-build, as relocatable device code (`smoke.cu`
//! launches a kernel from the device): a second library with device-side launches in every
//! test binary of the root package, beside the root package's own. And `kernels/module.cu`
//! into three device images for run-time loading (`src/images.rs`).

use cuda_rt_build::{Arch, Build, ImageKind};

mod image_archs {
    include!("src/image_archs.rs");
}

fn main() {
    // The images compile beside the library (whose device link runs one tool at a time).
    std::thread::scope(|scope| {
        scope.spawn(images);
        Build::new()
            .files([
                "kernels/affine.cu",
                "kernels/bench_empty.cu",
                "kernels/broken.cu",
                "kernels/conditional.cu",
                "kernels/faults.cu",
                "kernels/samples.cu",
                "kernels/smoke.cu",
                "kernels/typed.cu",
            ])
            .relocatable_device_code(true)
            .compile("cuda_rt_test_kernels");
    });
}

/// `kernels/module.cu` as PTX for compute_80, which the driver compiles for the GPU it meets
/// (newer than 8.0 on the H100: the JIT path); as a cubin for sm_90 (the H100's machine code);
/// as a fatbin for the architectures of CUDA_RT_ARCHS.
fn images() {
    let mut module = Build::new();
    module.file("kernels/module.cu");
    for (kind, arch) in [
        (ImageKind::Ptx, Some(Arch(image_archs::MODULE_PTX_ARCH))),
        (ImageKind::Cubin, Some(Arch(image_archs::MODULE_CUBIN_ARCH))),
        (ImageKind::Fatbin, None),
    ] {
        let made = match arch {
            Some(arch) => module.image_for_arch(kind, arch, "module"),
            None => module.image(kind, "module"),
        };
        if let Err(e) = made {
            eprintln!("error: building module.{}: {e}", kind.extension());
            std::process::exit(1);
        }
    }
}
