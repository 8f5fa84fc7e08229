//! A small progress bar on stderr, drawn only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// A progress bar for a step of `total` units of work. It draws itself on stderr (one line,
/// redrawn in place with `\r`) when stderr is a terminal and drawing is enabled, at most every
/// 50 ms; otherwise it does nothing. The line is cleared when the bar is dropped.
///
/// # Thread safety
/// `Send`, not shared: one thread advances it.
#[derive(Debug)]
pub struct Progress {
    label: String,
    total: u64,
    done: u64,
    enabled: bool,
    last_draw: Option<Instant>,
}

const WIDTH: usize = 30;

impl Progress {
    /// A bar labelled `label` for `total` units; drawn only if `allowed` and stderr is a tty.
    pub fn new(label: &str, total: u64, allowed: bool) -> Progress {
        let mut bar = Progress {
            label: label.to_owned(),
            total: total.max(1),
            done: 0,
            enabled: allowed && std::io::stderr().is_terminal(),
            last_draw: None,
        };
        bar.draw(true);
        bar
    }

    /// Records `units` more units of work done, and redraws if due.
    pub fn advance(&mut self, units: u64) {
        self.done = (self.done + units).min(self.total);
        self.draw(self.done == self.total);
    }

    /// The line the bar draws for `done` of `total`, e.g. `sort  [#####.....]  50%`.
    pub fn line(label: &str, done: u64, total: u64) -> String {
        let total = total.max(1);
        let filled = (done.min(total) as u128 * WIDTH as u128 / total as u128) as usize;
        format!(
            "{label} [{}{}] {:3}%",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            done.min(total) * 100 / total
        )
    }

    fn draw(&mut self, force: bool) {
        if !self.enabled {
            return;
        }
        let due = self
            .last_draw
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(50));
        if force || due {
            let mut err = std::io::stderr().lock();
            // A progress bar that cannot be drawn is not worth failing the program for.
            let _ = write!(
                err,
                "\r{}",
                Progress::line(&self.label, self.done, self.total)
            );
            let _ = err.flush();
            self.last_draw = Some(Instant::now());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.enabled {
            let mut err = std::io::stderr().lock();
            // Clears the bar's line; nothing to report if stderr is gone.
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_fills_in_proportion() {
        assert_eq!(
            Progress::line("x", 1, 2),
            format!("x [{}{}]  50%", "#".repeat(15), ".".repeat(15))
        );
        assert!(Progress::line("x", 9, 3).ends_with("100%"));
        assert!(Progress::line("x", 0, 0).ends_with("  0%"));
    }

    #[test]
    fn disabled_bar_does_nothing() {
        let mut bar = Progress::new("quiet", 10, false);
        bar.advance(20);
        assert_eq!(bar.done, 10);
    }
}
