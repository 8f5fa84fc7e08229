//! The property runner: [`Check`] (its settings and its four forms), the case loop, shrinking,
//! and the roles a test process plays (the test itself, a child running cases, a replay).

use crate::case::Case;
use crate::compare::Compare;
use crate::failure::{debug_cut, Failure};
use crate::guard::Guards;
use crate::policy;
use crate::random::SplitMix64;
use crate::report::{CaseFailure, Report, Verdict};
use cuda_rt::{DeviceCopy, DeviceView, DeviceViewMut, Stream};
use proptest::strategy::{Just, Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::cell::Cell;
use std::fmt::Debug;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// Where the cases of a property run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// In a child process of the test binary, unless the process runs under a sanitizer (which
    /// must see the cases) or the test's name is unknown. The default.
    Auto,
    /// In a child process of the test binary (re-run with `--exact <test>`): a case that loses
    /// the CUDA context (a sticky error such as an illegal address) is reported with its input,
    /// and the remaining cases run in a fresh child. The test's own process never touches its
    /// context for the property.
    Process,
    /// In the test's own process: a lost context ends the property (and poisons every other
    /// test of the process).
    InProcess,
}

/// The settings of a property run, and its forms: [`check`](Check::check) (an output computed
/// from an input, against a CPU function), [`check_in_place`](Check::check_in_place),
/// [`property`](Check::property) (any code with the [`Case`]'s buffers) and
/// [`examples`](Check::examples) (listed cases instead of generated ones).
///
/// Each form checks for a GPU first ([`gpu`](crate::gpu): a loud skip, or a failure with
/// `CUDA_RT_REQUIRE_GPU=1`), runs its cases (in a child process by default, see
/// [`Isolation`]), shrinks the first failing case to the smallest input that still fails, and
/// returns a [`Verdict`]; the free functions [`check`](crate::check),
/// [`check_in_place`](crate::check_in_place) and [`property`](crate::property) panic with the
/// report instead. With `CUDA_RT_SANITIZE_FAILURES` set, each failing case is replayed under
/// compute-sanitizer and its findings are added to the report.
///
/// # Processes
/// With process isolation, the test function runs again in each child, so code before the
/// call runs in both processes: keep GPU work inside the closures. A test may run several
/// properties; each has its own children, and in a child the other properties return
/// [`Verdict::Skipped`].
///
/// # Examples
/// ```no_run
/// use cuda_rt::DeviceMemoryMut;
/// use cuda_rt_testing::{compare::Bitwise, inputs, Check};
/// // 16 cases, no guard bands, outputs poisoned with 0xFF (NaN for floats).
/// let verdict = Check::new().cases(16).guard_bytes(0).poison(Some(0xFF)).check(
///     inputs::data::<f32>(inputs::lengths(4096, &[256])),
///     |stream, input, output| output.copy_from_device_async(stream, input),
///     |input| input.to_vec(),
///     Bitwise,
/// );
/// verdict.assert_passed();
/// ```
#[derive(Debug, Clone)]
pub struct Check {
    cases: u32,
    guards: Guards,
    max_shrink_iters: u32,
    isolation: Isolation,
    seed: Option<u64>,
    max_processes: u32,
    sticky_shrink_runs: u32,
    device: bool,
    timeout: Option<Duration>,
}

impl Default for Check {
    fn default() -> Check {
        Check::new()
    }
}

/// A closure's error turned into a [`Failure`].
fn failure<E: Into<Failure>>(error: E) -> Failure {
    error.into()
}

impl Check {
    /// 48 cases, [`Guards::default`] (256-byte guard bands, outputs poisoned), up to 512
    /// shrinking steps, [`Isolation::Auto`], a random seed.
    pub fn new() -> Check {
        Check {
            cases: 48,
            guards: Guards::default(),
            max_shrink_iters: 512,
            isolation: Isolation::Auto,
            seed: None,
            max_processes: 16,
            sticky_shrink_runs: 24,
            device: true,
            timeout: None,
        }
    }

    /// The number of generated cases (`CUDA_RT_PROPTEST_CASES` overrides it).
    #[must_use]
    pub fn cases(mut self, cases: u32) -> Check {
        self.cases = cases;
        self
    }

    /// The guard bands and patterns of the [`Case`]'s buffers.
    #[must_use]
    pub fn guards(mut self, guards: Guards) -> Check {
        self.guards = guards;
        self
    }

    /// At least `bytes` of guard band on each side of every buffer (0: none).
    #[must_use]
    pub fn guard_bytes(mut self, bytes: usize) -> Check {
        self.guards.bytes = bytes;
        self
    }

    /// The byte outputs are filled with before the run (`None`: zero bytes).
    #[must_use]
    pub fn poison(mut self, poison: Option<u8>) -> Check {
        self.guards.poison = poison;
        self
    }

    /// At most this many runs while shrinking a failing case (0: no shrinking).
    #[must_use]
    pub fn max_shrink_iters(mut self, iterations: u32) -> Check {
        self.max_shrink_iters = iterations;
        self
    }

    /// Where the cases run (`CUDA_RT_TEST_ISOLATION` overrides it).
    #[must_use]
    pub fn isolation(mut self, isolation: Isolation) -> Check {
        self.isolation = isolation;
        self
    }

    /// The base seed (`CUDA_RT_TEST_SEED` overrides it); random by default.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Check {
        self.seed = Some(seed);
        self
    }

    /// At most this many child processes for the cases of a property: each case that loses
    /// the CUDA context costs one; the cases left when they are used up are not run (and
    /// reported as such).
    #[must_use]
    pub fn max_processes(mut self, processes: u32) -> Check {
        self.max_processes = processes.max(1);
        self
    }

    /// At most this many child processes to shrink a case that lost the CUDA context (each
    /// smaller input is tried in a fresh process); 0 reports it as generated.
    #[must_use]
    pub fn sticky_shrink_runs(mut self, runs: u32) -> Check {
        self.sticky_shrink_runs = runs;
        self
    }

    /// How long a child process may print nothing (start or finish no case) before it is
    /// killed as hung and its case reported (`CUDA_RT_TEST_TIMEOUT` overrides it; default 600 s).
    #[must_use]
    pub fn child_timeout(mut self, timeout: Duration) -> Check {
        self.timeout = Some(timeout);
        self
    }

    /// Runs the cases without a CUDA device: properties of host code (a CPU reference
    /// against a simpler one, a parser, ...) with the same shrinking, child processes and
    /// replays, on any machine. The [`Case`] has no stream then: [`Case::stream`] and the
    /// methods that make or read buffers panic.
    #[must_use]
    pub fn host_only(mut self) -> Check {
        self.device = false;
        self
    }

    /// The general form: for every input of `inputs`, `test` (with the case's stream and
    /// buffers) returns `Ok`.
    pub fn property<S, F>(&self, inputs: S, test: F) -> Verdict
    where
        S: Strategy,
        S::Value: Debug,
        F: Fn(&mut Case, &S::Value) -> Result<(), Failure>,
    {
        let cases = policy::cases_override().unwrap_or(self.cases);
        let tree = |case: u32, seed: u64| {
            inputs
                .new_tree(&mut case_runner(seed, case))
                .map_err(|reason| format!("generating the input: {reason}"))
        };
        self.execute(cases, &tree, &test)
    }

    /// [`property`](Self::property) over the listed `examples` instead of generated inputs:
    /// each runs once, in order (not shrunk; `CUDA_RT_PROPTEST_CASES` does not apply).
    pub fn examples<V, F>(&self, examples: Vec<V>, test: F) -> Verdict
    where
        V: Clone + Debug,
        F: Fn(&mut Case, &V) -> Result<(), Failure>,
    {
        let cases = u32::try_from(examples.len()).unwrap_or(u32::MAX);
        let tree = |case: u32, _seed: u64| {
            examples
                .get(case as usize)
                .map(|v| Just(v.clone()))
                .ok_or_else(|| format!("there is no example {case}"))
        };
        self.execute(cases, &tree, &test)
    }

    /// For every input of `inputs`, the output that `gpu` computes from it on the device
    /// equals (by `comparator`) what `cpu` computes from it on the host.
    ///
    /// Each case uploads the input between guard bands, allocates a poisoned output of the
    /// CPU result's length between guard bands, runs `gpu(stream, input, output)`, then checks
    /// the output's guard bands, compares the output with the CPU's, and checks that the
    /// input (and its guard bands) did not change. A mismatch shows the elements around the
    /// first difference (input, reference, output) and which of them were never written.
    pub fn check<V, T, U, G, E, C, R>(
        &self,
        inputs: impl Strategy<Value = V>,
        gpu: G,
        cpu: C,
        comparator: R,
    ) -> Verdict
    where
        V: AsRef<[T]> + Debug,
        T: DeviceCopy + Debug,
        U: DeviceCopy + Debug,
        G: Fn(&Stream, &DeviceView<'_, T>, &mut DeviceViewMut<'_, U>) -> Result<(), E>,
        E: Into<Failure>,
        C: Fn(&[T]) -> Vec<U>,
        R: Compare<U>,
    {
        self.property(inputs, |case, input| {
            let input = input.as_ref();
            let want = cpu(input);
            let source = case.upload("input", input)?;
            let mut output = case.output::<U>("output", want.len())?;
            gpu(case.stream(), &source.view(), &mut output.view_mut()).map_err(failure)?;
            case.stream().synchronize()?;
            case.compare_with_input(&output, &want, &comparator, Some(input))?;
            case.check_unchanged(&source)
        })
    }

    /// [`check`](Self::check) for code that works in place: `gpu(stream, data)` must turn the
    /// input into what `cpu` computes from it (same length). The guard bands around the data
    /// are checked, and the data is compared with the CPU's.
    pub fn check_in_place<V, T, G, E, C, R>(
        &self,
        inputs: impl Strategy<Value = V>,
        gpu: G,
        cpu: C,
        comparator: R,
    ) -> Verdict
    where
        V: AsRef<[T]> + Debug,
        T: DeviceCopy + Debug,
        G: Fn(&Stream, &mut DeviceViewMut<'_, T>) -> Result<(), E>,
        E: Into<Failure>,
        C: Fn(&[T]) -> Vec<T>,
        R: Compare<T>,
    {
        self.property(inputs, |case, input| {
            let input = input.as_ref();
            let want = cpu(input);
            let mut data = case.upload("data", input)?;
            gpu(case.stream(), &mut data.view_mut()).map_err(failure)?;
            case.stream().synchronize()?;
            case.compare_with_input(&data, &want, &comparator, Some(input))
        })
    }

    /// Runs property number `property` of the test in the role this process plays.
    fn execute<V: Debug, T: ValueTree<Value = V>>(
        &self,
        cases: u32,
        tree: &dyn Fn(u32, u64) -> Result<T, String>,
        body: &dyn Fn(&mut Case, &V) -> Result<(), Failure>,
    ) -> Verdict {
        let property = next_property();
        let child = std::env::var(policy::CHILD)
            .ok()
            .and_then(|v| parse_child(&v));
        let replay = std::env::var(policy::REPLAY).ok().map(|v| parse_replay(&v));
        let elsewhere = || Verdict::Skipped {
            reason: "another property of this test runs in this process".into(),
        };
        if child.is_some_and(|(p, _)| p != property) {
            return elsewhere();
        }
        let replay = match replay {
            Some(Ok(r)) if r.property != property => return elsewhere(),
            Some(Ok(r)) => Some(r),
            Some(Err(e)) => panic!("{}: {e}", policy::REPLAY),
            None => None,
        };
        let run = Run {
            check: self,
            test: policy::test_name(),
            property,
            cases,
            seed: policy::seed_override()
                .or(self.seed)
                .unwrap_or_else(random_seed),
            tree,
            body,
        };
        if child.is_none() && self.device && policy::gpu().is_none() {
            return Verdict::Skipped {
                reason: "no CUDA device".into(),
            };
        }
        let verdict = match (child, replay) {
            (Some(_), Some(r)) => run.replay(r.case, &r.path, true),
            (Some((_, first)), None) => run.in_process(first, true),
            (None, Some(r)) => run.replay(r.case, &r.path, false),
            (None, None) if self.in_child_processes(&run.test) => run.supervise(),
            (None, None) => run.in_process(0, false),
        };
        match (verdict, child) {
            // The parent reports what the child found (the child told it on stdout).
            (_, Some(_)) => Verdict::Skipped {
                reason: "the cases ran in this child process, and its parent reports them".into(),
            },
            (Verdict::Failed(mut report), None) => {
                crate::sanitizer::replay_failures(&run, &mut report);
                Verdict::Failed(report)
            }
            (verdict, None) => verdict,
        }
    }

    /// Whether the cases of the test `test` run in child processes.
    fn in_child_processes(&self, test: &str) -> bool {
        let wanted = match std::env::var(policy::ISOLATION).as_deref() {
            Ok("none" | "in-process") => false,
            Ok("process") => true,
            _ => match self.isolation {
                Isolation::InProcess => false,
                Isolation::Process => true,
                Isolation::Auto => !policy::under_sanitizer(),
            },
        };
        let named = !test.is_empty() && test != "main" && test != "<unnamed test>";
        if wanted && !named {
            policy::say(&format!(
                "cuda-rt-testing: the cases of `{test}` run in its own process: a child process needs \
                 the test's name, which is the name of the thread that runs it"
            ));
        }
        wanted && named
    }
}

thread_local! {
    /// The number of properties the test on this thread has started (libtest gives each test
    /// a thread of its own).
    static PROPERTIES: Cell<u32> = const { Cell::new(0) };
}

/// The number of the property the test starts now (from 1).
fn next_property() -> u32 {
    PROPERTIES.with(|count| {
        count.set(count.get() + 1);
        count.get()
    })
}

/// A seed from the clock and the process id.
fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    SplitMix64::new(nanos ^ (u64::from(std::process::id()) << 32)).next_u64()
}

/// The proptest runner whose random numbers generate case `case` of a run with base seed `seed`.
fn case_runner(seed: u64, case: u32) -> TestRunner {
    let mut mix = SplitMix64::new(seed ^ u64::from(case).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&mix.next_u64().to_le_bytes());
    }
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// `property:first case` of [`policy::CHILD`].
fn parse_child(text: &str) -> Option<(u32, u32)> {
    let (property, first) = text.split_once(':')?;
    Some((property.parse().ok()?, first.parse().ok()?))
}

/// A case to replay: [`policy::REPLAY`]'s `property:case[:path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Replay {
    property: u32,
    case: u32,
    path: String,
}

fn parse_replay(text: &str) -> Result<Replay, String> {
    let mut parts = text.trim().splitn(3, ':');
    let bad = || format!("`{text}` is not property:case[:path] (path of S and C)");
    let property = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let case = parts.next().and_then(|c| c.parse().ok()).ok_or_else(bad)?;
    let path = parts.next().unwrap_or("").to_string();
    if !path.chars().all(|c| c == 'S' || c == 'C') {
        return Err(bad());
    }
    Ok(Replay {
        property,
        case,
        path,
    })
}

/// Applies the shrinking moves `path` to `tree`.
pub(crate) fn follow<T: ValueTree>(tree: &mut T, path: &str) -> Result<(), String> {
    for (i, step) in path.chars().enumerate() {
        let moved = match step {
            'S' => tree.simplify(),
            'C' => tree.complicate(),
            other => return Err(format!("{other:?} is no shrinking move")),
        };
        if !moved {
            return Err(format!(
                "the input cannot follow the shrinking path at move {i}"
            ));
        }
    }
    Ok(())
}

/// Writes one line of the protocol between a child process and its parent.
pub(crate) fn emit(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let written =
        writeln!(stdout, "{}{line}", crate::isolation::PROTOCOL).and_then(|()| stdout.flush());
    if written.is_err() {
        // The parent is gone; the child's exit tells nothing to anyone.
    }
}

/// Tells the parent that this child's cases are over; a child whose CUDA context is lost then
/// exits at once, with status 0 (the parent reads the outcome from the protocol), instead of
/// returning through the test harness. The thread that ran such cases can hang in its exit,
/// inside the driver (seen on an H100, driver 580: the exiting thread waits in a destructor of
/// the driver for a driver thread that spins forever), and the parent would wait for it.
fn end_child(context_lost: bool) {
    emit("end");
    if context_lost {
        use std::io::Write;
        // Flushing can only fail if the parent is gone, and then nobody reads.
        let _ = std::io::stderr().flush();
        std::process::exit(0);
    }
}

/// How one run of a case went.
pub(crate) enum Outcome {
    Pass,
    Fail {
        failure: Failure,
        context_lost: bool,
        input_len: Option<usize>,
    },
}

/// Whether the process's CUDA context is lost: after draining the errors deferred on this
/// thread, a device synchronize fails with a sticky error.
fn context_lost() -> bool {
    for _ in 0..1024 {
        if cuda_rt::take_deferred_error().is_none() {
            break;
        }
    }
    match cuda_rt::Device::current().and_then(cuda_rt::Device::synchronize) {
        Ok(()) => false,
        Err(e) => e.is_sticky(),
    }
}

/// One property of one test, in this process.
pub(crate) struct Run<'a, V, T> {
    pub(crate) check: &'a Check,
    pub(crate) test: String,
    pub(crate) property: u32,
    pub(crate) cases: u32,
    pub(crate) seed: u64,
    pub(crate) tree: &'a dyn Fn(u32, u64) -> Result<T, String>,
    pub(crate) body: &'a dyn Fn(&mut Case, &V) -> Result<(), Failure>,
}

impl<V: Debug, T: ValueTree<Value = V>> Run<'_, V, T> {
    /// The value tree of case `case`.
    pub(crate) fn tree(&self, case: u32) -> Result<T, String> {
        (self.tree)(case, self.seed)
    }

    pub(crate) fn max_processes(&self) -> u32 {
        self.check.max_processes
    }

    pub(crate) fn sticky_shrink_runs(&self) -> u32 {
        self.check.sticky_shrink_runs
    }

    /// How long a child may print nothing.
    pub(crate) fn child_timeout(&self) -> Duration {
        policy::child_timeout()
            .or(self.check.timeout)
            .unwrap_or(Duration::from_secs(600))
    }

    /// The input as the report prints it.
    pub(crate) fn describe(value: &V) -> String {
        debug_cut(value, 1500)
    }

    /// Runs the case's code once on `value`.
    fn run_once(&self, value: &V) -> Outcome {
        let mut case = match Case::new(self.check.guards, self.check.device) {
            Ok(case) => case,
            Err(e) => {
                return Outcome::Fail {
                    context_lost: e.is_sticky() || context_lost(),
                    failure: Failure::from(e).context("creating the case's stream"),
                    input_len: None,
                }
            }
        };
        let body = AssertUnwindSafe(|| (self.body)(&mut case, value));
        let mut result = match catch_unwind(body) {
            Ok(result) => result,
            Err(payload) => Err(Failure::from_panic(&*payload)),
        };
        if result.is_ok() && case.has_device() {
            // Work the case left queued belongs to it, and so do its errors.
            if let Err(e) = case.stream().synchronize() {
                result = Err(Failure::from(e).context("synchronizing the case's stream"));
            }
        }
        let input_len = case.input_len();
        drop(case);
        if result.is_ok() {
            if let Some(e) = cuda_rt::take_deferred_error() {
                result = Err(Failure::from(e).context("an error deferred during the case"));
            }
        }
        match result {
            Ok(()) => Outcome::Pass,
            Err(failure) => Outcome::Fail {
                context_lost: failure.is_sticky() || (self.check.device && context_lost()),
                failure,
                input_len,
            },
        }
    }

    /// The record of a failure of case `case` with input `value`.
    fn record(
        case: u32,
        value: &V,
        failure: Failure,
        context_lost: bool,
        input_len: Option<usize>,
    ) -> CaseFailure {
        record(
            case,
            Self::describe(value),
            failure,
            context_lost,
            input_len,
        )
    }

    /// Shrinks failing case `case` in this process, from `first` (its failure on
    /// `tree.current()`), as proptest does: simplify after a failure, complicate after a pass,
    /// until neither moves or the budget is spent. Stops at a lost context.
    fn shrink(&self, case: u32, mut tree: T, first: CaseFailure) -> CaseFailure {
        let mut minimal = first;
        let original = minimal.input.clone();
        let mut path = String::new();
        let mut runs = 0;
        if self.check.max_shrink_iters > 0 && tree.simplify() {
            path.push('S');
            loop {
                if runs >= self.check.max_shrink_iters {
                    minimal.notes.push(format!(
                        "shrinking stopped after {runs} runs (Check::max_shrink_iters)"
                    ));
                    break;
                }
                runs += 1;
                let value = tree.current();
                match self.run_once(&value) {
                    Outcome::Pass => {
                        if !tree.complicate() {
                            break;
                        }
                        path.push('C');
                    }
                    Outcome::Fail {
                        failure,
                        context_lost,
                        input_len,
                    } => {
                        let notes = std::mem::take(&mut minimal.notes);
                        let steps = minimal.shrink_steps + 1;
                        minimal = Self::record(case, &value, failure, context_lost, input_len);
                        minimal.notes = notes;
                        minimal.shrink_steps = steps;
                        minimal.shrink_path.clone_from(&path);
                        if context_lost {
                            minimal.notes.push(
                                "shrinking stopped here: this input lost the CUDA context".into(),
                            );
                            break;
                        }
                        if !tree.simplify() {
                            break;
                        }
                        path.push('S');
                    }
                }
            }
        }
        if minimal.input != original {
            minimal.original_input = Some(original);
        }
        minimal
    }

    /// Runs cases `first..` in this process; with `protocol`, as a child that tells its parent
    /// about each case. Stops at the first failure.
    pub(crate) fn in_process(&self, first: u32, protocol: bool) -> Verdict {
        let mut passed = 0;
        let mut failures = Vec::new();
        let mut not_run = 0;
        for case in first..self.cases {
            if protocol {
                emit(&format!("case {case}"));
            }
            let tree = match self.tree(case) {
                Ok(tree) => tree,
                Err(reason) => {
                    let input = "<not generated>".to_string();
                    failures.push(record(case, input, Failure::assertion(reason), false, None));
                    not_run = self.cases - case - 1;
                    break;
                }
            };
            let value = tree.current();
            match self.run_once(&value) {
                Outcome::Pass => {
                    passed += 1;
                    if protocol {
                        emit(&format!("pass {case}"));
                    }
                }
                Outcome::Fail {
                    failure,
                    context_lost,
                    input_len,
                } => {
                    let record = Self::record(case, &value, failure, context_lost, input_len);
                    let record = if context_lost {
                        record
                    } else {
                        self.shrink(case, tree, record)
                    };
                    let mut record = record;
                    if record.context_lost && !protocol {
                        record.notes.push("the CUDA context of this process is lost: the remaining cases were not run".into());
                    }
                    if protocol {
                        emit(&format!("failure {}", record.encode()));
                    }
                    failures.push(record);
                    not_run = self.cases - case - 1;
                    break;
                }
            }
        }
        if protocol {
            end_child(failures.iter().any(|f| f.context_lost));
        }
        self.verdict(passed, failures, not_run, 0)
    }

    /// Runs case `case` alone, shrunk along `path`; with `protocol`, as a child telling its
    /// parent.
    pub(crate) fn replay(&self, case: u32, path: &str, protocol: bool) -> Verdict {
        let outcome = self.tree(case).and_then(|mut tree| {
            follow(&mut tree, path)?;
            Ok(tree.current())
        });
        let value = match outcome {
            Ok(value) => value,
            Err(reason) => panic!(
                "replaying case {case} of property {}: {reason}",
                self.property
            ),
        };
        if protocol {
            emit(&format!("case {case}"));
        } else {
            policy::say(&format!(
                "cuda-rt-testing: replaying case {case} (path {path:?}): {}",
                Self::describe(&value)
            ));
        }
        let mut lost = false;
        let verdict = match self.run_once(&value) {
            Outcome::Pass => {
                if protocol {
                    emit(&format!("pass {case}"));
                }
                self.verdict(1, Vec::new(), 0, 0)
            }
            Outcome::Fail {
                failure,
                context_lost,
                input_len,
            } => {
                let mut record = Self::record(case, &value, failure, context_lost, input_len);
                record.shrink_path = path.to_string();
                if protocol {
                    emit(&format!("failure {}", record.encode()));
                }
                lost = context_lost;
                self.verdict(0, vec![record], 0, 0)
            }
        };
        if protocol {
            end_child(lost);
        }
        verdict
    }

    pub(crate) fn verdict(
        &self,
        passed: u32,
        failures: Vec<CaseFailure>,
        not_run: u32,
        processes: u32,
    ) -> Verdict {
        if failures.is_empty() && not_run == 0 {
            return Verdict::Passed { cases: passed };
        }
        Verdict::Failed(Report {
            test: self.test.clone(),
            property: self.property,
            seed: self.seed,
            cases: self.cases,
            passed,
            failures,
            not_run,
            processes,
        })
    }
}

/// The record of a failure of case `case` with the input described by `input`.
pub(crate) fn record(
    case: u32,
    input: String,
    failure: Failure,
    context_lost: bool,
    input_len: Option<usize>,
) -> CaseFailure {
    CaseFailure {
        case,
        kind: failure.kind().clone(),
        message: failure.message().to_string(),
        context_lost,
        input,
        input_len,
        original_input: None,
        shrink_steps: 0,
        shrink_path: String::new(),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_parse() {
        assert_eq!(
            parse_replay("2:17:SSC"),
            Ok(Replay {
                property: 2,
                case: 17,
                path: "SSC".into()
            })
        );
        assert_eq!(parse_replay("1:0").map(|r| r.path), Ok(String::new()));
        assert!(parse_replay("1:x").is_err());
        assert!(parse_replay("1:2:SX").is_err());
        assert_eq!(parse_child("3:12"), Some((3, 12)));
    }

    #[test]
    fn cases_are_generated_the_same_from_the_same_seed() {
        let strategy = crate::inputs::data::<u32>(crate::inputs::lengths(1000, &[64]));
        let a = strategy.new_tree(&mut case_runner(7, 3)).unwrap().current();
        let b = strategy.new_tree(&mut case_runner(7, 3)).unwrap().current();
        let c = strategy.new_tree(&mut case_runner(7, 4)).unwrap().current();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
