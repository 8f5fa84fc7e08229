//! The launches of executable graphs in running scopes: which streams of which scopes each
//! executable was launched on (so that `GraphExec::synchronize` can wait for them while the
//! scope runs), and the key of a scope's last graph launch. Graphs list their launches here;
//! scopes remove theirs before returning.

use crate::raw::RawStream;
use std::sync::{Mutex, MutexGuard};

/// The streams that a [`GraphExec`] was launched on by scopes that have not returned yet.
///
/// An entry is added by the first launch of a scope on a stream (before the launch), and removed
/// by that scope before it returns (after it has waited for the stream), never by anyone else:
/// so every stream listed is live, as the scope borrows it, and a scope may rely on an entry it
/// added staying until it returns. [`GraphExec::synchronize`] waits for them, under the list's
/// lock, which keeps the scope from removing them (and returning) meanwhile.
#[derive(Debug, Default)]
pub(crate) struct ScopedLaunches {
    pub(crate) entries: Vec<ScopedLaunch>,
}

/// One stream of a running scope that a [`GraphExec`] was launched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScopedLaunch {
    /// The scope's identity (its address, unique while it runs).
    pub(crate) scope: usize,
    pub(crate) stream: RawStream,
    pub(crate) device: i32,
}

impl ScopedLaunches {
    /// Lists `launch` unless it is listed; says whether it was added.
    pub(crate) fn list(&mut self, launch: ScopedLaunch) -> bool {
        let known = self.entries.contains(&launch);
        if !known {
            self.entries.push(launch);
        }
        !known
    }

    /// Forgets the launches of a scope that has waited for its streams.
    pub(crate) fn forget_scope(&mut self, scope: usize) {
        self.entries.retain(|launch| launch.scope != scope);
    }
}

/// Locks a [`GraphExec`]'s launch state (a panic never happens while it is held, so a poisoned
/// lock guards consistent state).
pub(crate) fn lock_launches(launches: &Mutex<ScopedLaunches>) -> MutexGuard<'_, ScopedLaunches> {
    crate::context::lock(launches)
}

/// What a scope's graph launch was made with: the executable (its address), the stream and its
/// device. [`Scope::launch_graph`] remembers the key of its last launch that enlisted and
/// listed its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GraphLaunchKey {
    pub(crate) exec: *const (),
    pub(crate) stream: RawStream,
    pub(crate) device: i32,
}

impl GraphLaunchKey {
    /// Matches no launch (no executable lives at the null address).
    pub(crate) const NONE: GraphLaunchKey = GraphLaunchKey {
        exec: std::ptr::null(),
        stream: std::ptr::null_mut(),
        device: -1,
    };
}
