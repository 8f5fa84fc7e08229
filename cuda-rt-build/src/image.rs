//! Device images for run-time loading: what each [`ImageKind`] holds, and the nvcc flags that
//! make it.

use crate::arch::{gencode_flags, names, Archs};
use crate::Error;

/// What a device image ([`Build::image`](crate::Build::image)) holds; each is one nvcc mode
/// over one `.cu` file, and each loads with `cuda_rt::Library::load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// PTX text for one virtual architecture (`nvcc -ptx`, `NAME.ptx`): the driver compiles it
    /// when it is loaded (just in time), for the GPU it runs on, of that architecture or any
    /// newer one. By default for the oldest architecture of `CUDA_RT_ARCHS`.
    Ptx,
    /// Machine code for one real architecture (`nvcc -cubin`, `NAME.cubin`, an ELF file): loads
    /// on GPUs of the same major and the same or a newer minor version (`sm_80` on 8.6, not on
    /// 9.0). By default for the one machine-code architecture of `CUDA_RT_ARCHS` (an error when
    /// it names several, or none).
    Cubin,
    /// A fat binary (`nvcc -fatbin`, `NAME.fatbin`): machine code and PTX as `CUDA_RT_ARCHS`
    /// asks, like [`gencode_flags`] (the driver picks the machine code of the GPU, or compiles
    /// the PTX for a newer one).
    Fatbin,
}

impl ImageKind {
    /// The file name extension: `ptx`, `cubin` or `fatbin`.
    pub fn extension(self) -> &'static str {
        match self {
            ImageKind::Ptx => "ptx",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbin => "fatbin",
        }
    }

    /// nvcc's flag for the mode: `-ptx`, `-cubin` or `-fatbin`.
    pub(crate) fn mode_flag(self) -> &'static str {
        match self {
            ImageKind::Ptx => "-ptx",
            ImageKind::Cubin => "-cubin",
            ImageKind::Fatbin => "-fatbin",
        }
    }
}

/// The architecture flags of an image of `kind` for `archs` (the build's architectures, or the
/// one the caller picked):
/// - PTX: `--gpu-architecture=compute_XX` of the oldest, machine code or PTX (its PTX runs
///   there and on every newer GPU);
/// - cubin: `-gencode=arch=compute_XX,code=sm_XX` of the only machine-code architecture;
/// - fatbin: [`gencode_flags`] of all.
///
/// # Errors
/// A cubin for several machine-code architectures (it holds one) or none (PTX only), and no
/// architecture at all.
pub(crate) fn arch_flags(kind: ImageKind, archs: &Archs) -> Result<Vec<String>, Error> {
    let Some(oldest) = archs.oldest() else {
        return Err(Error::new("a device image needs an architecture"));
    };
    Ok(match kind {
        ImageKind::Ptx => vec![format!("--gpu-architecture=compute_{}", oldest.0)],
        ImageKind::Cubin => match archs.sass.as_slice() {
            [arch] => vec![format!("-gencode=arch=compute_{0},code=sm_{0}", arch.0)],
            [] => {
                return Err(Error::new(format!(
                    "a cubin holds machine code, and CUDA_RT_ARCHS asks for PTX only ({}): \
                     pick an architecture with Build::image_for_arch, or build PTX \
                     (ImageKind::Ptx)",
                    names(&archs.ptx)
                )))
            }
            several => {
                return Err(Error::new(format!(
                    "a cubin holds machine code for one architecture, and CUDA_RT_ARCHS names \
                     several ({}): pick one with Build::image_for_arch, or build a fatbin \
                     (ImageKind::Fatbin) for all of them",
                    names(several)
                )))
            }
        },
        ImageKind::Fatbin => gencode_flags(archs),
    })
}

/// Checks that `name` is a plain file name stem (the image lands at `$OUT_DIR/NAME.EXT`).
pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
        return Err(Error::new(format!(
            "image name {name:?}: write a plain file name without extension (\"kernels\" \
             becomes $OUT_DIR/kernels.ptx)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Arch;

    fn sass_ptx(sass: &[u32], ptx: &[u32]) -> Archs {
        Archs {
            sass: sass.iter().copied().map(Arch).collect(),
            ptx: ptx.iter().copied().map(Arch).collect(),
        }
    }

    #[test]
    fn ptx_is_for_the_oldest_architecture() {
        assert_eq!(
            arch_flags(ImageKind::Ptx, &sass_ptx(&[80, 90], &[90])).unwrap(),
            ["--gpu-architecture=compute_80"]
        );
        assert_eq!(
            arch_flags(ImageKind::Ptx, &sass_ptx(&[90], &[80])).unwrap(),
            ["--gpu-architecture=compute_80"]
        );
        assert_eq!(
            arch_flags(ImageKind::Ptx, &sass_ptx(&[], &[80])).unwrap(),
            ["--gpu-architecture=compute_80"]
        );
    }

    #[test]
    fn a_cubin_is_for_exactly_one_machine_code_architecture() {
        assert_eq!(
            arch_flags(ImageKind::Cubin, &sass_ptx(&[90], &[90])).unwrap(),
            ["-gencode=arch=compute_90,code=sm_90"]
        );
        assert_eq!(
            arch_flags(ImageKind::Cubin, &sass_ptx(&[90], &[80])).unwrap(),
            ["-gencode=arch=compute_90,code=sm_90"]
        );
        let e = arch_flags(ImageKind::Cubin, &sass_ptx(&[80, 90], &[90])).unwrap_err();
        assert!(e.to_string().contains("several (80, 90)"), "{e}");
        assert!(e.to_string().contains("Build::image_for_arch"), "{e}");
        let e = arch_flags(ImageKind::Cubin, &sass_ptx(&[], &[80])).unwrap_err();
        assert!(e.to_string().contains("PTX only (80)"), "{e}");
    }

    #[test]
    fn a_fatbin_has_what_the_architectures_ask_for() {
        let archs = sass_ptx(&[80, 90], &[90]);
        assert_eq!(
            arch_flags(ImageKind::Fatbin, &archs).unwrap(),
            gencode_flags(&archs)
        );
        assert_eq!(
            arch_flags(ImageKind::Fatbin, &sass_ptx(&[90], &[90])).unwrap(),
            [
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_90,code=compute_90"
            ]
        );
        assert_eq!(
            arch_flags(ImageKind::Fatbin, &sass_ptx(&[], &[80])).unwrap(),
            ["-gencode=arch=compute_80,code=compute_80"]
        );
    }

    #[test]
    fn no_architecture_is_an_error() {
        for kind in [ImageKind::Ptx, ImageKind::Cubin, ImageKind::Fatbin] {
            assert!(arch_flags(kind, &Archs::default()).is_err());
        }
    }

    #[test]
    fn modes_and_extensions() {
        assert_eq!(ImageKind::Ptx.mode_flag(), "-ptx");
        assert_eq!(ImageKind::Cubin.mode_flag(), "-cubin");
        assert_eq!(ImageKind::Fatbin.mode_flag(), "-fatbin");
        assert_eq!(
            [ImageKind::Ptx, ImageKind::Cubin, ImageKind::Fatbin].map(ImageKind::extension),
            ["ptx", "cubin", "fatbin"]
        );
    }

    #[test]
    fn names_are_plain_file_names() {
        assert!(check_name("module").is_ok());
        assert!(check_name("module.sm90").is_ok());
        for bad in ["", ".", "..", "a/b", "a\\b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
