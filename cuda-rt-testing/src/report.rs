//! What a property run found: [`Verdict`], and for a failed run a [`Report`] of its failing
//! cases ([`CaseFailure`]), each with its smallest failing input and how to replay it.

use crate::failure::{FailureKind, Side};
use crate::policy;
use std::collections::BTreeMap;
use std::fmt;

/// The outcome of a property.
#[derive(Debug, Clone)]
#[must_use = "a verdict says whether the property held: call assert_passed()"]
pub enum Verdict {
    /// Every case passed.
    Passed {
        /// The number of cases run.
        cases: u32,
    },
    /// Nothing was checked in this process, and it said so: no GPU (and none required), or
    /// the property runs in another process (a child of the test that runs another property
    /// of the same test).
    Skipped {
        /// Why.
        reason: String,
    },
    /// At least one case failed.
    Failed(Report),
}

impl Verdict {
    /// Panics with the report when the property failed; returns for a pass or a skip.
    ///
    /// # Panics
    /// When the verdict is [`Verdict::Failed`]; the message is the [`Report`].
    #[track_caller]
    pub fn assert_passed(self) {
        if let Verdict::Failed(report) = self {
            panic!("{report}");
        }
    }

    /// The report of a failed property.
    pub fn report(&self) -> Option<&Report> {
        match self {
            Verdict::Failed(report) => Some(report),
            _ => None,
        }
    }

    /// Whether every case passed.
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Passed { .. })
    }
}

/// One failing case, after shrinking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseFailure {
    /// The case's number in the run (from 0).
    pub case: u32,
    /// What went wrong with the smallest failing input.
    pub kind: FailureKind,
    /// The message for people.
    pub message: String,
    /// Whether the case lost the process's CUDA context (a sticky error, or a crash).
    pub context_lost: bool,
    /// The smallest failing input (its `Debug`, cut to a readable length).
    pub input: String,
    /// The input's length in elements, when the case uploaded data.
    pub input_len: Option<usize>,
    /// The input as first generated, when shrinking changed it.
    pub original_input: Option<String>,
    /// The shrinking steps that failed (each a smaller input).
    pub shrink_steps: u32,
    /// The moves (`S` simplify, `C` complicate) from the generated input to the smallest
    /// failing one, for [`policy::REPLAY`].
    pub shrink_path: String,
    /// What else happened: shrinking stopped early, compute-sanitizer's findings, ...
    pub notes: Vec<String>,
}

impl CaseFailure {
    /// The one-line headline of the failure.
    pub fn headline(&self) -> String {
        let what = match &self.kind {
            FailureKind::Mismatch { index: Some(i) } => {
                format!("output differs from the reference at index {i}")
            }
            FailureKind::Mismatch { index: None } => {
                "output differs from the reference".to_string()
            }
            FailureKind::GuardBand {
                buffer,
                side,
                element,
            } => {
                let at = match side {
                    Side::Before => format!("{} before", element + 1),
                    Side::After => format!("{} past the end of", element + 1),
                };
                format!("out-of-bounds write: element {at} `{buffer}`")
            }
            FailureKind::InputModified { buffer, index } => {
                format!("input `{buffer}` written at element {index}")
            }
            FailureKind::Cuda { name, sticky: true } => {
                format!("{name} (sticky: the CUDA context is lost)")
            }
            FailureKind::Cuda {
                name,
                sticky: false,
            } => name.clone(),
            FailureKind::Panic => "panic".to_string(),
            FailureKind::Assertion => "assertion failed".to_string(),
            FailureKind::Error => "error".to_string(),
            FailureKind::Crash => "the process running the case died".to_string(),
        };
        match self.input_len {
            Some(n) => format!("case {}: {what} (input of {n} elements)", self.case),
            None => format!("case {}: {what}", self.case),
        }
    }

    /// The line that stands for this failure between a child process and its parent.
    pub(crate) fn encode(&self) -> String {
        let mut fields: Vec<(&str, String)> = vec![
            ("case", self.case.to_string()),
            ("message", self.message.clone()),
            ("lost", u8::from(self.context_lost).to_string()),
            ("input", self.input.clone()),
            ("steps", self.shrink_steps.to_string()),
            ("path", self.shrink_path.clone()),
        ];
        if let Some(n) = self.input_len {
            fields.push(("len", n.to_string()));
        }
        if let Some(original) = &self.original_input {
            fields.push(("original", original.clone()));
        }
        for (i, note) in self.notes.iter().enumerate() {
            fields.push(("note", format!("{i}:{note}")));
        }
        match &self.kind {
            FailureKind::Mismatch { index } => {
                fields.push(("kind", "mismatch".into()));
                if let Some(i) = index {
                    fields.push(("index", i.to_string()));
                }
            }
            FailureKind::GuardBand {
                buffer,
                side,
                element,
            } => {
                fields.push(("kind", "guard".into()));
                fields.push(("buffer", buffer.clone()));
                fields.push(("side", side.to_string()));
                fields.push(("element", element.to_string()));
            }
            FailureKind::InputModified { buffer, index } => {
                fields.push(("kind", "input".into()));
                fields.push(("buffer", buffer.clone()));
                fields.push(("index", index.to_string()));
            }
            FailureKind::Cuda { name, sticky } => {
                fields.push(("kind", "cuda".into()));
                fields.push(("name", name.clone()));
                fields.push(("sticky", u8::from(*sticky).to_string()));
            }
            FailureKind::Panic => fields.push(("kind", "panic".into())),
            FailureKind::Assertion => fields.push(("kind", "assertion".into())),
            FailureKind::Error => fields.push(("kind", "error".into())),
            FailureKind::Crash => fields.push(("kind", "crash".into())),
        }
        fields
            .iter()
            .map(|(k, v)| format!("{k}={}", escape(v)))
            .collect::<Vec<_>>()
            .join("\t")
    }

    /// The failure [`encode`](Self::encode) wrote; `None` for a line that is not one.
    pub(crate) fn decode(line: &str) -> Option<CaseFailure> {
        let mut fields: BTreeMap<&str, String> = BTreeMap::new();
        let mut notes = Vec::new();
        for field in line.split('\t') {
            let (key, value) = field.split_once('=')?;
            let value = unescape(value);
            if key == "note" {
                let (_, note) = value.split_once(':')?;
                notes.push(note.to_string());
            } else {
                fields.insert(key, value);
            }
        }
        let number = |key: &str| fields.get(key).and_then(|v| v.parse::<usize>().ok());
        let text = |key: &str| fields.get(key).cloned().unwrap_or_default();
        let kind = match fields.get("kind")?.as_str() {
            "mismatch" => FailureKind::Mismatch {
                index: number("index"),
            },
            "guard" => FailureKind::GuardBand {
                buffer: text("buffer"),
                side: if text("side") == "before" {
                    Side::Before
                } else {
                    Side::After
                },
                element: number("element")?,
            },
            "input" => FailureKind::InputModified {
                buffer: text("buffer"),
                index: number("index")?,
            },
            "cuda" => FailureKind::Cuda {
                name: text("name"),
                sticky: text("sticky") == "1",
            },
            "panic" => FailureKind::Panic,
            "assertion" => FailureKind::Assertion,
            "error" => FailureKind::Error,
            _ => FailureKind::Crash,
        };
        Some(CaseFailure {
            case: fields.get("case")?.parse().ok()?,
            kind,
            message: text("message"),
            context_lost: text("lost") == "1",
            input: text("input"),
            input_len: number("len"),
            original_input: fields.get("original").cloned(),
            shrink_steps: fields
                .get("steps")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            shrink_path: text("path"),
            notes,
        })
    }
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The failed run of a property: which cases failed, with what, and how to replay them.
#[derive(Debug, Clone)]
pub struct Report {
    /// The test (libtest's name for it).
    pub test: String,
    /// Which property of the test (from 1, in the order the test runs them).
    pub property: u32,
    /// The base seed of the run ([`policy::SEED`] replays it).
    pub seed: u64,
    /// The number of cases the run was to have.
    pub cases: u32,
    /// The number of cases that passed.
    pub passed: u32,
    /// The failing cases, in the order they were found.
    pub failures: Vec<CaseFailure>,
    /// Cases not run: after a failure (a property stops at its first ordinary failure), or
    /// when the CUDA context was lost in-process or too many child processes were needed.
    pub not_run: u32,
    /// Child processes used (0 when the cases ran in the test's own process).
    pub processes: u32,
}

impl Report {
    /// The first failing case.
    pub fn first(&self) -> &CaseFailure {
        &self.failures[0]
    }

    /// The command line that replays `failure` (its smallest input) alone.
    pub fn replay_command(&self, failure: &CaseFailure) -> String {
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "<test binary>".into());
        let path = if failure.shrink_path.is_empty() {
            String::new()
        } else {
            format!(":{}", failure.shrink_path)
        };
        format!(
            "{}={:#x} {}={}:{}{path} {exe} --exact {} --nocapture",
            policy::SEED,
            self.seed,
            policy::REPLAY,
            self.property,
            failure.case,
            self.test
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.failures.len() == 1 { "" } else { "s" };
        write!(
            f,
            "property {} of `{}` failed: {} failing case{plural}, {} of {} cases passed (seed {:#x}",
            self.property,
            self.test,
            self.failures.len(),
            self.passed,
            self.cases,
            self.seed
        )?;
        match self.processes {
            0 => {}
            1 => write!(f, ", 1 child process")?,
            n => write!(f, ", {n} child processes")?,
        }
        if self.not_run > 0 {
            write!(f, ", {} not run", self.not_run)?;
        }
        writeln!(f, ")")?;
        for failure in &self.failures {
            writeln!(f, "\n{}", failure.headline())?;
            if failure.shrink_steps > 0 {
                writeln!(
                    f,
                    "  smallest failing input (after {} shrinking steps): {}",
                    failure.shrink_steps, failure.input
                )?;
            } else {
                writeln!(f, "  failing input: {}", failure.input)?;
            }
            if let Some(original) = &failure.original_input {
                writeln!(f, "  first failing input: {original}")?;
            }
            for line in failure.message.lines() {
                writeln!(f, "  | {line}")?;
            }
            for note in &failure.notes {
                for (i, line) in note.lines().enumerate() {
                    let lead = if i == 0 { "note:" } else { "  " };
                    writeln!(f, "  {lead} {line}")?;
                }
            }
            writeln!(f, "  replay: {}", self.replay_command(failure))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_survive_the_line_protocol() {
        let failure = CaseFailure {
            case: 17,
            kind: FailureKind::GuardBand {
                buffer: "out\tput".into(),
                side: Side::After,
                element: 0,
            },
            message: "line one\nline\\two".into(),
            context_lost: true,
            input: "Data { len: 3 }".into(),
            input_len: Some(3),
            original_input: Some("Data { len: 4000 }".into()),
            shrink_steps: 9,
            shrink_path: "SSCS".into(),
            notes: vec!["a: b".into(), "c".into()],
        };
        let line = failure.encode();
        assert!(!line.contains('\n'));
        assert_eq!(CaseFailure::decode(&line), Some(failure));
        let plain = CaseFailure {
            kind: FailureKind::Mismatch { index: None },
            input_len: None,
            original_input: None,
            notes: Vec::new(),
            ..CaseFailure::decode(&line).unwrap()
        };
        assert_eq!(CaseFailure::decode(&plain.encode()), Some(plain));
    }
}
