//! The supervisor run in-process on the test thread (which therefore outlives the child, as
//! PR_SET_PDEATHSIG requires), with a gate that answers as told.

use super::procinfo::group_has_live_member;
use super::stop::StopRequest;
use super::supervise::{supervise_reaching, supervise_with, Reach};
use super::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Answer(Result<bool, String>);

impl Gate for Answer {
    fn register(
        &self,
        gate: &serde_json::Value,
        nonce: &str,
        pid: u32,
        pid_start: u64,
    ) -> Result<bool, String> {
        assert_eq!(gate, &serde_json::json!({"lane": "a", "attempt": 1}));
        assert_eq!(nonce, "n-1");
        assert_eq!(pid, std::process::id());
        assert_eq!(pid_start_time(pid), Some(pid_start));
        self.0.clone()
    }
}

const YES: Answer = Answer(Ok(true));

fn spec_for(cwd: &Path, argv: &[&str], timeout_ms: u64, grace_ms: u64) -> ActivitySpec {
    let env = BTreeMap::from([(
        "PATH".to_owned(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
    )]);
    ActivitySpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.to_owned(),
        env,
        timeout_ms,
        grace_ms,
        nonce: "n-1".into(),
        gate: serde_json::json!({"lane": "a", "attempt": 1}),
        stdin: None,
        inherit_prefixes: Vec::new(),
        env_templates: BTreeMap::new(),
        confine: None,
        discard: Vec::new(),
    }
}

fn sh(cwd: &Path, script: &str, timeout_ms: u64, grace_ms: u64) -> ActivitySpec {
    spec_for(cwd, &["sh", "-c", script], timeout_ms, grace_ms)
}

/// Write the spec and supervise it to the end; returns the exit code and the outcome.
fn run(dir: &Path, spec: &ActivitySpec, gate: &dyn Gate) -> (i32, Option<Outcome>) {
    write_json(&dir.join(files::SPEC), spec).unwrap();
    let code = supervise_with(dir, gate, &StopRequest::default(), Reach::Group);
    (code, read_outcome(dir))
}

fn finished(spec: &ActivitySpec, dir: &Path) -> Outcome {
    let (code, outcome) = run(dir, spec, &YES);
    assert_eq!(
        code,
        0,
        "log: {:?}",
        fs::read_to_string(dir.join(files::LOG))
    );
    outcome.expect("outcome.json")
}

/// A bound on waiting for what a test waits on, far beyond any load: it only keeps a broken test
/// from hanging.
const GIVE_UP: Duration = Duration::from_secs(120);

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + GIVE_UP;
    while !done() {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn exit_code_and_output_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = sh(
        d,
        "echo out; echo err >&2; printf partial >&2; exit 3",
        10_000,
        200,
    );
    let outcome = finished(&spec, d);
    assert_eq!(outcome.nonce, "n-1");
    assert_eq!((outcome.exit_code, outcome.signal), (Some(3), None));
    assert!(!outcome.timed_out && !outcome.stopped && outcome.spawn_error.is_none());
    assert_eq!(
        outcome.stdout,
        StreamSummary {
            bytes: 4,
            lines: 1,
            truncated: false
        }
    );
    assert_eq!(
        outcome.stderr,
        StreamSummary {
            bytes: 11,
            lines: 2,
            truncated: false
        }
    );
    assert_eq!(fs::read(d.join(files::STDOUT)).unwrap(), b"out\n");
    assert_eq!(fs::read(d.join(files::STDERR)).unwrap(), b"err\npartial");
    for f in [
        files::STDOUT,
        files::STDERR,
        files::OUTCOME,
        files::SUPERVISOR,
    ] {
        assert_eq!(mode(&d.join(f)), 0o600, "{f}");
    }
    let record: SupervisorRecord =
        serde_json::from_slice(&fs::read(d.join(files::SUPERVISOR)).unwrap()).unwrap();
    assert_eq!(record.pid, std::process::id());
    assert_eq!(record.nonce, "n-1");
}

#[test]
fn the_environment_is_exactly_the_specs_and_cwd_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let work = d.join("work");
    fs::create_dir(&work).unwrap();
    let mut spec = sh(&work, "env | sort; pwd", 10_000, 200);
    spec.env.insert("ICED_TEST_VALUE".into(), "x y".into());
    finished(&spec, d);
    let out = fs::read_to_string(d.join(files::STDOUT)).unwrap();
    assert!(out.contains("ICED_TEST_VALUE=x y\n"), "{out}");
    assert!(
        !out.contains("CARGO"),
        "the test's own environment leaked: {out}"
    );
    assert!(out.ends_with(&format!("{}\n", work.display())), "{out}");
}

#[test]
fn a_child_killed_by_a_signal_has_no_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = finished(&sh(dir.path(), "kill -TERM $$", 10_000, 200), dir.path());
    assert_eq!((outcome.exit_code, outcome.signal), (None, Some(15)));
    assert!(!outcome.timed_out);
}

#[test]
fn a_missing_program_is_a_spawn_error_with_an_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = spec_for(d, &["iced-test-no-such-program", "x"], 10_000, 200);
    let outcome = finished(&spec, d);
    assert_eq!((outcome.exit_code, outcome.signal), (None, None));
    let error = outcome.spawn_error.expect("spawn_error");
    assert!(error.contains("iced-test-no-such-program"), "{error}");
    assert_eq!(fs::read(d.join(files::STDOUT)).unwrap(), b"");
    assert_eq!(outcome.stdout, StreamSummary::default());

    let outcome = finished(&spec_for(d, &[], 10_000, 200), d);
    assert!(outcome.spawn_error.is_some());
}

/// Runs `script` past a 300 ms timeout (grace 200 ms); the script writes its pid, which is its
/// process group, to `pgid`. Returns the outcome and that group.
fn time_out(script: &str) -> (Outcome, u32) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = sh(d, &format!("echo $$ > pgid; {script}"), 300, 200);
    let started = Instant::now();
    let outcome = finished(&spec, d);
    let elapsed = started.elapsed();
    assert!(outcome.timed_out && !outcome.stopped, "{outcome:?}");
    assert!(outcome.duration_ms >= 300, "{outcome:?}");
    // Ended by the timeout, not left running: far under the child's own end, however busy.
    assert!(elapsed < GIVE_UP, "{elapsed:?}");
    let pgid: u32 = fs::read_to_string(d.join("pgid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Nothing of the group is left running: not the shell, not the background sleep.
    assert!(!group_has_live_member(pgid), "group {pgid} survived");
    (outcome, pgid)
}

#[test]
fn a_timeout_ends_the_group_even_when_sigint_is_ignored() {
    let (outcome, _) = time_out(r#"trap "" INT; sleep 100 & sleep 100"#);
    assert_eq!(outcome.signal, Some(15), "{outcome:?}");
}

#[test]
fn a_timeout_escalates_to_sigkill() {
    let (outcome, _) = time_out(r#"trap "" INT TERM; sleep 100 & sleep 100"#);
    assert_eq!(outcome.signal, Some(9), "{outcome:?}");
    assert!(outcome.duration_ms >= 700, "{outcome:?}");
}

#[test]
fn a_child_that_exits_takes_its_background_jobs_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The background job holds stdout open; without the group kill the supervisor would wait for
    // it (and its pipe) for 100 seconds.
    let spec = sh(
        d,
        r#"echo $$ > pgid; trap "" INT; sleep 100 & exit 0"#,
        10_000,
        200,
    );
    let outcome = finished(&spec, d);
    assert_eq!(outcome.exit_code, Some(0));
    assert!(outcome.duration_ms < 3_000, "{outcome:?}");
    let pgid: u32 = fs::read_to_string(d.join("pgid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!group_has_live_member(pgid));
}

#[test]
fn huge_output_is_counted_exactly_and_only_its_tail_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = sh(
        d,
        r#"head -c 209715200 /dev/zero; printf '\nfirst\nsecond\nlast'"#,
        30_000,
        200,
    );
    let outcome = finished(&spec, d);
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(
        outcome.stdout,
        StreamSummary {
            bytes: 209_715_200 + 18,
            lines: 4,
            truncated: true
        }
    );
    let kept = fs::read(d.join(files::STDOUT)).unwrap();
    assert_eq!(kept.len(), MAX_BYTES);
    assert!(kept.ends_with(b"\0\nfirst\nsecond\nlast"));
}

#[test]
fn many_lines_keep_the_last_two_thousand() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let outcome = finished(&sh(d, "seq 0 2999; seq 1 5 >&2", 10_000, 200), d);
    assert_eq!(
        outcome.stdout,
        StreamSummary {
            bytes: (0..3000).map(|i: u32| i.to_string().len() as u64 + 1).sum(),
            lines: 3000,
            truncated: true
        }
    );
    let kept = fs::read_to_string(d.join(files::STDOUT)).unwrap();
    let lines: Vec<&str> = kept.lines().collect();
    assert_eq!(lines.len(), MAX_LINES);
    assert_eq!((lines[0], lines[MAX_LINES - 1]), ("1000", "2999"));
    assert_eq!(outcome.stderr.lines, 5);
    assert!(!outcome.stderr.truncated);
}

#[test]
fn a_gate_that_declines_starts_nothing() {
    for answer in [Ok(false), Err("state locked".to_owned())] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let spec = sh(d, "touch started", 10_000, 200);
        let (code, outcome) = run(d, &spec, &Answer(answer));
        assert_eq!(code, 0);
        assert!(outcome.is_none());
        for f in [files::OUTCOME, files::STDOUT, files::STDERR] {
            assert!(!d.join(f).exists(), "{f}");
        }
        assert!(d.join(files::SUPERVISOR).exists());
        assert!(d.join(files::LOG).exists());
        // Give a wrongly started child time to show itself.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!d.join("started").exists());
    }
}

#[test]
fn observe_follows_an_activity_from_launch_to_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    assert_eq!(observe(&d), Observation::NotRegistered);
    let spec = sh(
        &d,
        "while [ ! -e go ]; do sleep 0.01; done; exit 7",
        10_000,
        200,
    );
    write_json(&d.join(files::SPEC), &spec).unwrap();
    let supervisor = {
        let d = d.clone();
        std::thread::spawn(move || supervise_with(&d, &YES, &StopRequest::default(), Reach::Group))
    };
    assert_eq!(observe(&d), Observation::NotRegistered);
    wait_until("running", || {
        matches!(observe(&d), Observation::Running { .. })
    });
    let Observation::Running { pid, pid_start } = observe(&d) else {
        unreachable!()
    };
    assert_eq!(pid, std::process::id());
    assert_eq!(Some(pid_start), pid_start_time(pid));
    fs::write(d.join("go"), "").unwrap();
    assert_eq!(supervisor.join().unwrap(), 0);
    match observe(&d) {
        Observation::Finished(outcome) => assert_eq!(outcome.exit_code, Some(7)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn observe_sees_a_supervisor_that_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let me = std::process::id();
    let gone = [
        // Above the kernel's maximum pid: never running.
        (4_194_305, 1),
        // A running pid with another start time: the pid was reused.
        (me, pid_start_time(me).unwrap() + 1),
    ];
    for (pid, pid_start) in gone {
        let record = SupervisorRecord {
            pid,
            pid_start,
            nonce: "n-1".into(),
        };
        write_json(&d.join(files::SUPERVISOR), &record).unwrap();
        assert_eq!(observe(d), Observation::Gone);
        stop(d).unwrap();
    }
}

#[test]
fn a_stop_request_runs_the_stop_sequence_and_still_writes_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    // `sleep` itself, no shell: the child record is written once it has exec'd, so a SIGINT
    // finds the program that dies of it. (`sh -c` caught a SIGINT that came while it started
    // and lost it as it exec'd `sleep`; on a busy machine that window is wide, and the 200 ms
    // grace then ended in SIGTERM.) The grace and the timeout are far beyond any load: the
    // SIGINT is what must end it, however long the machine takes to run the child's death.
    let spec = spec_for(&d, &["sleep", "100"], 3_600_000, 600_000);
    write_json(&d.join(files::SPEC), &spec).unwrap();
    let flag = Arc::new(StopRequest::default());
    let supervisor = {
        let (d, flag) = (d.clone(), Arc::clone(&flag));
        std::thread::spawn(move || supervise_with(&d, &YES, &flag, Reach::Group))
    };
    // The child's own record, not the supervisor's: a request that comes between the two is a
    // stop before the child started (nothing started, no signal), which is not this test.
    wait_until("the child", || d.join(files::CHILD).exists());
    flag.request();
    assert_eq!(supervisor.join().unwrap(), 0);
    let outcome = read_outcome(&d).unwrap();
    assert!(outcome.stopped && !outcome.timed_out, "{outcome:?}");
    assert_eq!(outcome.signal, Some(2), "{outcome:?}");
}

/// Through the real signal path: `stop()` sends SIGTERM to the pid in `supervisor.json`, which
/// here is the test process itself. `supervise_reaching()` has installed its handler by then (before it
/// wrote the record), so the signal only makes a stop request; the other tests make their own.
#[test]
fn stop_signals_the_supervisor() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    let spec = sh(&d, "sleep 100", 10_000, 200);
    write_json(&d.join(files::SPEC), &spec).unwrap();
    let supervisor = {
        let d = d.clone();
        std::thread::spawn(move || supervise_reaching(&d, None, &YES, Reach::Group))
    };
    wait_until("running", || {
        matches!(observe(&d), Observation::Running { .. })
    });
    stop(&d).unwrap();
    assert_eq!(supervisor.join().unwrap(), 0);
    let outcome = read_outcome(&d).unwrap();
    assert!(outcome.stopped, "{outcome:?}");
    stop(&d).unwrap();
}

#[test]
fn launch_starts_a_detached_supervisor_and_reaps_it() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("fake-iced");
    // The fake supervisor reports its arguments, session, pid, stdin, what its `--ready-fd` is and
    // the signals it blocks and ignores, then waits to be told to exit. The masks are read by the
    // shell itself (builtins): a command it starts could read them while the shell still blocks
    // every signal around its own fork (dash does, until the child has run), which under load
    // showed a full mask that the supervisor never had.
    let script = r#"#!/bin/sh
d="$2"
{ echo "$1 $2 $3"; cut -d' ' -f6 /proc/$$/stat; echo $$; readlink /proc/$$/fd/0; readlink /proc/$$/fd/$4
  while read -r k v; do case "$k" in SigBlk:|SigIgn:) echo "$k $v";; esac; done < /proc/$$/status; } > "$d/report.tmp"
mv "$d/report.tmp" "$d/report"
while [ ! -e "$d/go" ]; do sleep 0.01; done
"#;
    fs::write(&exe, script).unwrap();
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    let act = dir.path().join("runs").join("act");
    let spec = sh(dir.path(), "true", 1_000, 100);

    // Writing the script and executing it races with other tests forking (the write descriptor
    // is briefly inherited until their exec): ETXTBSY, so retry.
    let launched = {
        let give_up = Instant::now() + GIVE_UP;
        loop {
            match launch(&exe, &act, &spec) {
                Ok(launched) => break launched,
                Err(ActivityError::Launch { source, .. })
                    if source.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32)
                        && Instant::now() < give_up =>
                {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("{e}"),
            }
        }
    };
    assert_eq!(mode(&act), 0o700);
    assert_eq!(mode(&act.join(files::SPEC)), 0o600);
    let written: ActivitySpec =
        serde_json::from_slice(&fs::read(act.join(files::SPEC)).unwrap()).unwrap();
    assert_eq!(written.argv, spec.argv);
    assert_eq!(written.gate, spec.gate);

    let pid = launched.pid;
    wait_until("the report", || act.join("report").exists());
    let report = fs::read_to_string(act.join("report")).unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(
        lines[0],
        format!("__supervise {} {READY_FD_OPTION}", act.display())
    );
    assert_eq!(lines[1], pid.to_string(), "a session leader: sid == pid");
    assert_eq!(lines[2], pid.to_string());
    assert_eq!(lines[3], "/dev/null");
    assert!(lines[4].starts_with("pipe:"), "{report}");
    // Nothing blocked, and SIGPIPE (13: bit 12) not ignored as this test's process ignores it.
    let mask = |line: &str, name: &str| {
        let hex = line.strip_prefix(name).expect(name).trim();
        u64::from_str_radix(hex, 16).expect("hex")
    };
    assert_eq!(mask(lines[5], "SigBlk:"), 0, "{report}");
    assert_eq!(mask(lines[6], "SigIgn:") & (1 << 12), 0, "{report}");
    // Unregistered and alive: starting, as the launcher's record of it says (SPEC 21.4).
    assert_eq!(
        observe(&act),
        Observation::Starting {
            pid,
            pid_start: pid_start_time(pid).expect("it runs")
        }
    );
    // The wait for its registration lasts while it lives without registering, and ends with it.
    let began = Instant::now();
    let waiting = std::thread::spawn(move || launched.await_registration(GIVE_UP * 2));
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !waiting.is_finished(),
        "the wait ended before the supervisor did"
    );
    fs::write(act.join("go"), "").unwrap();
    waiting.join().unwrap();
    // Ended by the supervisor's end, not by its bound.
    assert!(began.elapsed() < GIVE_UP, "{:?}", began.elapsed());
    // Reaped by the background thread: not even a zombie is left.
    wait_until("the supervisor to be reaped", || {
        !Path::new(&format!("/proc/{pid}")).exists()
    });
    // Gone without registering: not starting any more, and never will.
    assert_eq!(observe(&act), Observation::NotRegistered);
}

#[test]
fn launch_clears_what_an_earlier_launch_left() {
    let dir = tempfile::tempdir().unwrap();
    let act = dir.path().join("act");
    fs::create_dir(&act).unwrap();
    for f in [
        files::OUTCOME,
        files::SUPERVISOR,
        files::STDOUT,
        files::STDERR,
    ] {
        fs::write(act.join(f), "old").unwrap();
    }
    let spec = sh(dir.path(), "true", 1_000, 100);
    // A program that cannot start: launch fails after preparing the directory.
    let err = launch(&dir.path().join("no-such-iced"), &act, &spec).unwrap_err();
    assert!(matches!(err, ActivityError::Launch { .. }), "{err}");
    assert!(err.to_string().contains("no-such-iced"));
    for f in [
        files::OUTCOME,
        files::SUPERVISOR,
        files::STDOUT,
        files::STDERR,
    ] {
        assert!(!act.join(f).exists(), "{f}");
    }
    assert!(act.join(files::SPEC).exists());
}

/// The registration pipe: the launcher's wait ends as soon as `supervisor.json` is written, before
/// the gate is asked; the child never holds the pipe; a descriptor that is no pipe is not taken.
#[test]
fn the_registration_pipe_ends_at_registration_and_never_reaches_the_child() {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::{AsFd, AsRawFd, IntoRawFd};
    struct EndedFirst(OwnedFd);
    impl Gate for EndedFirst {
        fn register(&self, _: &serde_json::Value, _: &str, _: u32, _: u64) -> Result<bool, String> {
            let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
            // A process another test forks may hold a copy for a moment, until its exec.
            let ready = poll(&mut fds, PollTimeout::from(5_000u16)).map_err(|e| e.to_string())?;
            let hung_up = fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLHUP));
            if ready == 1 && hung_up {
                Ok(true)
            } else {
                Err("the registration pipe is still open when the gate is asked".into())
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let write_fd = write.as_raw_fd();
    // As `__supervise` takes it: by its number.
    let ready = ready_pipe(write.into_raw_fd()).expect("a pipe is taken");
    let spec = sh(
        d,
        &format!("readlink /proc/$$/fd/{write_fd} || echo none"),
        10_000,
        200,
    );
    write_json(&d.join(files::SPEC), &spec).unwrap();
    let code = supervise_reaching(d, Some(ready), &EndedFirst(read), Reach::Group);
    assert_eq!(code, 0, "{:?}", fs::read_to_string(d.join(files::LOG)));
    let outcome = read_outcome(d).expect("the gate let it run");
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(fs::read_to_string(d.join(files::STDOUT)).unwrap(), "none\n");

    // Standard descriptors, closed ones and files are never taken.
    let file = fs::File::open(d.join(files::SPEC)).unwrap();
    for fd in [0, 1, 2, file.as_raw_fd(), 1_000_000] {
        assert!(ready_pipe(fd).is_none(), "{fd}");
    }
}

/// SPEC 24.12: a child confined by its spec writes only beneath the spec's paths and cannot
/// signal its supervisor (here the test process itself: `kill -0` only asks whether it may).
#[test]
fn a_confined_child_writes_only_its_paths_and_cannot_signal_its_supervisor() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let work = d.join("work");
    fs::create_dir(&work).unwrap();
    let mut spec = sh(
        &work,
        r#"echo mine > mine.txt; echo theirs > ../theirs.txt; kill -0 $PPID && echo signalled > mine.txt; exit 0"#,
        10_000,
        200,
    );
    spec.confine = Some(crate::confine::Rules {
        writable: vec![work.clone()],
    });
    let outcome = finished(&spec, d);
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert_eq!(fs::read_to_string(work.join("mine.txt")).unwrap(), "mine\n");
    assert!(!d.join("theirs.txt").exists(), "it wrote outside its paths");
    let err = fs::read_to_string(d.join(files::STDERR)).unwrap();
    assert!(err.contains("Permission denied"), "{err}");
    assert!(err.contains("not permitted"), "{err}");
    // The same child unconfined does both: the test sees a difference.
    spec.confine = None;
    let outcome = finished(&spec, d);
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(d.join("theirs.txt").exists());
    assert_eq!(
        fs::read_to_string(work.join("mine.txt")).unwrap(),
        "signalled\n"
    );
}

/// SPEC 20.8: the files a child was given for its run alone are gone once it has ended, and a
/// link the child put in place of their folder sends the removal nowhere else.
#[test]
fn what_a_child_was_given_for_its_run_is_removed_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let home = d.join("home");
    let elsewhere = d.join("elsewhere");
    for folder in [&home, &elsewhere] {
        fs::create_dir(folder).unwrap();
        fs::write(folder.join("login.json"), "secret\n").unwrap();
    }
    let mut spec = sh(
        d,
        "cat home/login.json >/dev/null && echo kept > home/session.jsonl",
        10_000,
        200,
    );
    spec.discard = vec![home.join("login.json"), home.join("never-there.json")];
    let outcome = finished(&spec, d);
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(!home.join("login.json").exists(), "the copy stayed");
    assert_eq!(
        fs::read_to_string(home.join("session.jsonl")).unwrap(),
        "kept\n"
    );

    // The child swaps its folder for a link to another holding a file of the same name.
    fs::write(home.join("login.json"), "secret\n").unwrap();
    let spec = ActivitySpec {
        discard: vec![home.join("login.json")],
        ..sh(d, "mv home home-moved && ln -s elsewhere home", 10_000, 200)
    };
    let outcome = finished(&spec, d);
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert_eq!(
        fs::read_to_string(elsewhere.join("login.json")).unwrap(),
        "secret\n",
        "the removal followed the link"
    );
    assert!(!d.join("home-moved/login.json").exists(), "the copy stayed");
}

/// A folder an earlier launch of the same step left (its supervisor gone, no outcome) says
/// nothing of the launch that replaces it: before that launch has cleared it, an observer of the
/// new nonce finds it unregistered, not crashed (issue 36: with sixteen callers, the relaunch
/// after one crash was taken for a second, and the lane's crash budget was spent).
#[test]
fn another_launchs_records_are_not_this_launchs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gone = SupervisorRecord {
        pid: std::process::id(),
        pid_start: 1,
        nonce: "n1".into(),
    };
    write_json(&d.join(files::SUPERVISOR), &gone).unwrap();
    assert_eq!(observe(d), Observation::Gone);
    assert_eq!(observe_launch(d, Some("n1")), Observation::Gone);
    assert_eq!(observe_launch(d, Some("n2")), Observation::NotRegistered);
    assert!(registered_as(d, "n1") && !registered_as(d, "n2"));
    let starting = LaunchedRecord {
        pid: std::process::id(),
        pid_start: pid_start_time(std::process::id()).unwrap(),
        nonce: "n2".into(),
    };
    write_json(&d.join(files::LAUNCHED), &starting).unwrap();
    assert!(matches!(
        observe_launch(d, Some("n2")),
        Observation::Starting { .. }
    ));
    assert_eq!(observe_launch(d, Some("n3")), Observation::NotRegistered);
}

/// `child.json` of a child long gone names a pid that is someone else's now (the pid wrapped; in
/// the test suite a supervisor just started, its own group's leader): that process group is
/// never killed for the child's (CI saw a starting supervisor die with no trace, and its launch
/// counted as crashed). The record of the same process, with its own start time, still is.
#[test]
fn orphans_are_killed_only_in_the_childs_own_group() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = other.id();
    let start = pid_start_time(pid).expect("it runs");
    let stale = spec::ChildRecord {
        pid,
        pid_start: start + 1,
    };
    write_json(&d.join(files::CHILD), &stale).unwrap();
    kill_orphans(d);
    // Killed, it would be dead already or have SIGKILL pending: neither.
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    let pending = u64::from_str_radix(&field("ShdPnd:"), 16).unwrap()
        | u64::from_str_radix(&field("SigPnd:"), 16).unwrap();
    assert_eq!(
        pending & (1 << 8),
        0,
        "SIGKILL sent to another process's group"
    );
    assert!(!field("State:").starts_with('Z'), "{status}");
    assert!(other.try_wait().unwrap().is_none());
    let own = spec::ChildRecord {
        pid,
        pid_start: start,
    };
    write_json(&d.join(files::CHILD), &own).unwrap();
    kill_orphans(d);
    let status = other.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
}
