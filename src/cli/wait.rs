//! How `iced build` waits while its run waits on something (SPEC 20.1): until the state file is
//! replaced or an outcome appears in the folder of one of the run's running activities (inotify),
//! until the run's pace lets it launch again, and at most a fallback, for a change no file shows (a
//! supervisor that died) or an event missed. The fallback starts at [`FALLBACK`] and doubles while
//! nothing changes, up to [`FALLBACK_CAP`]: a wait of an hour costs a few steps a minute, not
//! thirty. On a terminal it keeps one live line per running activity: what runs, for how long,
//! and where its output goes.
//!
//! It never decides, records or signals anything: the engine's next step does, and the caller
//! prints what that step says. Without inotify it waits [`FALLBACK`] each time.

use crate::activity::files;
use crate::run::live::{live_activities, LiveActivity};
use crate::run::state::{RunPaths, State};
use crate::run::Ctx;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::HashMap;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The first fallback: the longest wait between two steps when no file said anything changed.
pub const FALLBACK: Duration = Duration::from_secs(2);
/// The longest fallback, reached after a few quiet waits: how late, at most, the driver notices a
/// change no file shows (a supervisor killed with SIGKILL).
pub const FALLBACK_CAP: Duration = Duration::from_secs(16);
/// The shortest: should a step keep seeing a change it does not act on, the driver steps no more
/// often than this rather than spin. Short, since a wait after a step that wrote the state wakes
/// at once on that write, and an agent that answers at once should not wait out more (issue 16).
const MIN_GAP: Duration = Duration::from_millis(25);
/// How often the live lines' times are redrawn.
const TICK: Duration = Duration::from_secs(1);

/// What a change to a run looks like on disk: the state file replaced (written atomically, so
/// renamed into place) and an activity's outcome written the same way. Writes to files that stay
/// in place (the lock's holder, the event log) are not asked for: every step makes them.
const RUN_DIR_EVENTS: AddWatchFlags = AddWatchFlags::IN_MOVED_TO
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_ONLYDIR);
const ACTIVITY_EVENTS: AddWatchFlags = AddWatchFlags::IN_MOVED_TO
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_ONLYDIR);

pub struct Waiter {
    watch: Option<Watch>,
    /// The waits in a row that ended by the fallback, nothing having changed.
    quiet: u32,
    /// The live lines, when stderr is a terminal and nothing asked for JSON.
    live: Option<LiveLines>,
}

impl Waiter {
    /// Watches the run folder from now on, so that a state written between a step and the wait
    /// after it still wakes that wait.
    pub fn new(paths: &RunPaths, root: &Path, terminal: bool) -> Waiter {
        Waiter {
            watch: Watch::new(&paths.dir),
            quiet: 0,
            live: terminal.then(|| LiveLines {
                root: root.to_owned(),
                shown: 0,
            }),
        }
    }

    /// Return once the run may have moved on: its state file was replaced, one of its running
    /// activities wrote its outcome, its pace lets it launch again, or the fallback passed.
    pub fn wait(&mut self, ctx: &Ctx<'_>, run_id: &str) {
        self.wait_at_most(ctx, run_id, FALLBACK_CAP);
    }

    /// [`Waiter::wait`], returning after `most` at the latest (the end of a host's `--wait`).
    pub fn wait_at_most(&mut self, ctx: &Ctx<'_>, run_id: &str, most: Duration) {
        let began = Instant::now();
        let mut deadline = began + fallback(self.quiet).min(most);
        // A state that cannot be read now is refused by the next step, which says why.
        let state = State::load(&ctx.paths, ctx.verb).ok();
        let live = state
            .as_ref()
            .map(|state| live_activities(ctx, state, run_id))
            .unwrap_or_default();
        let paced_until = state
            .as_ref()
            .and_then(|s| s.runs.get(run_id))
            .and_then(|r| r.next_eligible_at.as_deref())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        if let Some(until) = paced_until {
            // Measured on the loop's clock (pinned in tests), waited on the real one.
            let left = (until.with_timezone(&chrono::Utc) - crate::clock::now())
                .to_std()
                .unwrap_or_default();
            deadline = deadline.min(began + left);
        }
        if let Some(watch) = &mut self.watch {
            watch.follow(&live);
        }
        // An outcome written before its folder was watched left no event: look, now that it is.
        let mut changed = live.iter().any(LiveActivity::finished);
        while !changed {
            if let Some(lines) = &mut self.live {
                lines.show(&live, SystemTime::now());
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let mut timeout = deadline - now;
            if self.live.is_some() && !live.is_empty() {
                timeout = timeout.min(TICK);
            }
            changed = match &mut self.watch {
                Some(watch) => watch.changed_within(timeout),
                None => {
                    std::thread::sleep(timeout);
                    false
                }
            };
        }
        self.quiet = if changed {
            0
        } else {
            self.quiet.saturating_add(1)
        };
        if let Some(short) = MIN_GAP.checked_sub(began.elapsed()) {
            std::thread::sleep(short);
        }
    }

    /// Take the live lines off the terminal, before a line is printed in their place.
    pub fn clear(&mut self) {
        if let Some(lines) = &mut self.live {
            lines.erase();
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The fallback after `quiet` waits in a row that nothing ended: [`FALLBACK`], doubled each time,
/// at most [`FALLBACK_CAP`].
fn fallback(quiet: u32) -> Duration {
    FALLBACK.saturating_mul(1 << quiet.min(8)).min(FALLBACK_CAP)
}

/// The inotify watches: the run folder (for `state.json`) and the folder of each running activity
/// (for `outcome.json`).
struct Watch {
    inotify: Inotify,
    run_dir: WatchDescriptor,
    activities: HashMap<PathBuf, WatchDescriptor>,
}

impl Watch {
    fn new(run_dir: &Path) -> Option<Watch> {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK).ok()?;
        let run_dir = inotify.add_watch(run_dir, RUN_DIR_EVENTS).ok()?;
        Some(Watch {
            inotify,
            run_dir,
            activities: HashMap::new(),
        })
    }

    /// Watch the folders of `live`, and no others.
    fn follow(&mut self, live: &[LiveActivity]) {
        self.activities.retain(|dir, wd| {
            let keep = live.iter().any(|a| &a.dir == dir);
            if !keep {
                // Gone already if its folder was removed; either way it is not watched.
                let _ = self.inotify.rm_watch(*wd);
            }
            keep
        });
        for activity in live {
            if !self.activities.contains_key(&activity.dir) {
                // A folder that is not there (removed since) has nothing to say.
                if let Ok(wd) = self.inotify.add_watch(&activity.dir, ACTIVITY_EVENTS) {
                    self.activities.insert(activity.dir.clone(), wd);
                }
            }
        }
    }

    /// Whether a change came within `timeout`. Other files' events (the lock, the event log, a
    /// temporary file) are read and passed over.
    fn changed_within(&mut self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        while crate::activity::readable_by(self.inotify.as_fd(), until) {
            if self.read_changes() {
                return true;
            }
        }
        false
    }

    /// Read every queued event; true if one is a change to the run.
    fn read_changes(&mut self) -> bool {
        let mut changed = false;
        while let Ok(events) = self.inotify.read_events() {
            for event in events {
                let name = event.name.as_deref().and_then(|n| n.to_str());
                changed |= event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)
                    || (event.wd == self.run_dir && name == Some("state.json"))
                    || (name == Some(files::OUTCOME)
                        && self.activities.values().any(|wd| *wd == event.wd));
            }
        }
        changed
    }
}

/// The live lines on the terminal: how many are shown, so they can be redrawn in place.
struct LiveLines {
    root: PathBuf,
    shown: usize,
}

impl LiveLines {
    fn show(&mut self, live: &[LiveActivity], now: SystemTime) {
        let width = terminal_width().unwrap_or(80);
        let lines: Vec<String> = live
            .iter()
            .map(|a| live_line(a, &self.root, now, width))
            .collect();
        let mut err = std::io::stderr().lock();
        self.erase_on(&mut err);
        for line in &lines {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.shown = lines.len();
    }

    fn erase(&mut self) {
        let mut err = std::io::stderr().lock();
        self.erase_on(&mut err);
        let _ = err.flush();
    }

    /// Up a line and clear it, once per line shown: each is shorter than the terminal is wide, so
    /// none wrapped onto a second row.
    fn erase_on(&mut self, err: &mut impl Write) {
        for _ in 0..self.shown {
            let _ = write!(err, "\x1b[1A\x1b[2K");
        }
        self.shown = 0;
    }
}

/// `  implement 0007-x (attempt 1) 1m05s, output in <folder>/{stdout.txt,stderr.txt}`, with the
/// folder relative to the repository when it is in it, and cut at its start (`...`) as far as
/// needed to fit in `width` columns less one (so the cursor never wraps and the line can be
/// redrawn in place). Escapes and control characters in names are dropped.
fn live_line(activity: &LiveActivity, root: &Path, now: SystemTime, width: usize) -> String {
    let elapsed = activity
        .launched
        .and_then(|t| now.duration_since(t).ok())
        .map_or_else(|| "?".to_owned(), elapsed_text);
    let head = format!(
        "  {} {} (attempt {}) {elapsed}, output in ",
        activity.step, activity.lane, activity.attempt
    );
    let dir = activity.dir.strip_prefix(root).unwrap_or(&activity.dir);
    let path = format!("{}/{{{},{}}}", dir.display(), files::STDOUT, files::STDERR);
    let (head, path) = (
        crate::text::for_terminal(&head).into_owned(),
        crate::text::for_terminal(&path).into_owned(),
    );
    let room = width.saturating_sub(1);
    let (head_len, path_len) = (head.chars().count(), path.chars().count());
    if head_len + path_len <= room {
        return head + &path;
    }
    // The end of the path (the lane, the activity, the files) says most; `...` takes the rest.
    let keep = room.saturating_sub(head_len + 3);
    if keep == 0 {
        return head.chars().take(room).collect();
    }
    let tail: String = path.chars().skip(path_len - keep).collect();
    format!("{head}...{tail}")
}

/// `45s`, `1m05s`, `2h03m`.
fn elapsed_text(elapsed: Duration) -> String {
    let s = elapsed.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The width of the terminal on stderr, if it is one.
fn terminal_width() -> Option<usize> {
    let mut size = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points to one.
    let done = unsafe { nix::libc::ioctl(2, nix::libc::TIOCGWINSZ, &mut size) };
    (done == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quiet waits back off from two seconds to the cap, and stay there.
    #[test]
    fn the_fallback_doubles_while_nothing_changes_up_to_its_cap() {
        let secs: Vec<u64> = (0..6).map(|q| fallback(q).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 16, 16]);
        assert_eq!(fallback(u32::MAX), FALLBACK_CAP);
    }

    fn activity(dir: &str, launched: Option<SystemTime>) -> LiveActivity {
        LiveActivity {
            lane: "0007-session-timeout".into(),
            step: "implement".into(),
            attempt: 2,
            dir: PathBuf::from(dir),
            launched,
            nonce: "n".into(),
        }
    }

    #[test]
    fn a_live_line_says_what_runs_for_how_long_and_where_its_output_goes() {
        let launched = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let now = launched + Duration::from_secs(65);
        let a = activity(
            "/repo/.iced/run/r1/0007-session-timeout/activities/implement-2",
            Some(launched),
        );
        assert_eq!(
            live_line(&a, Path::new("/repo"), now, 200),
            "  implement 0007-session-timeout (attempt 2) 1m05s, output in \
             .iced/run/r1/0007-session-timeout/activities/implement-2/{stdout.txt,stderr.txt}"
        );
        // Outside the repository the folder is named whole; an unknown start is a `?`.
        let b = activity("/elsewhere/implement-2", None);
        assert_eq!(
            live_line(&b, Path::new("/repo"), now, 200),
            "  implement 0007-session-timeout (attempt 2) ?, output in \
             /elsewhere/implement-2/{stdout.txt,stderr.txt}"
        );
    }

    #[test]
    fn a_long_line_loses_the_start_of_its_folder_to_fit() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10);
        let a = activity(
            "/repo/.iced/run/r1/0007-session-timeout/activities/implement-2",
            Some(SystemTime::UNIX_EPOCH),
        );
        let line = live_line(&a, Path::new("/repo"), now, 100);
        assert_eq!(
            line,
            "  implement 0007-session-timeout (attempt 2) 10s, output in \
             .../implement-2/{stdout.txt,stderr.txt}"
        );
        assert_eq!(line.chars().count(), 99);
        // Narrower than the head: the head, cut.
        assert_eq!(live_line(&a, Path::new("/repo"), now, 12), "  implement");
        assert_eq!(live_line(&a, Path::new("/repo"), now, 0), "");
    }

    #[test]
    fn names_cannot_move_the_cursor() {
        let mut a = activity("/repo/x", None);
        a.lane = "lane\x1b[2J\x1b]0;title\x07".into();
        let line = live_line(&a, Path::new("/repo"), SystemTime::now(), 200);
        assert!(!line.contains('\x1b') && !line.contains('\x07'), "{line:?}");
    }

    #[test]
    fn elapsed_times_read_at_a_glance() {
        let text = |s| elapsed_text(Duration::from_secs(s));
        assert_eq!(
            [0, 59, 60, 65, 3599, 3600, 7380].map(text),
            ["0s", "59s", "1m00s", "1m05s", "59m59s", "1h00m", "2h03m"]
        );
    }

    #[test]
    fn a_state_written_after_the_watch_began_is_a_change_and_other_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path();
        let activity_dir = run_dir
            .join("r1")
            .join("lane")
            .join("activities")
            .join("implement-1");
        std::fs::create_dir_all(&activity_dir).unwrap();
        let mut watch = Watch::new(run_dir).expect("inotify");
        let live = [activity(activity_dir.to_str().unwrap(), None)];
        watch.follow(&live);

        // Nothing yet: the wait lasts its timeout.
        let began = Instant::now();
        assert!(!watch.changed_within(Duration::from_millis(50)));
        assert!(
            began.elapsed() >= Duration::from_millis(50),
            "{:?}",
            began.elapsed()
        );

        // The lock and the event log are not changes; a temporary file is not either.
        std::fs::write(run_dir.join("lock"), "holder").unwrap();
        std::fs::write(run_dir.join("events.jsonl"), "{}\n").unwrap();
        std::fs::write(run_dir.join(".state.json.tmp"), "{}").unwrap();
        std::fs::write(activity_dir.join(files::CHILD), "{}").unwrap();
        assert!(!watch.changed_within(Duration::from_millis(50)));

        // The state renamed into place is.
        std::fs::rename(run_dir.join(".state.json.tmp"), run_dir.join("state.json")).unwrap();
        assert!(watch.changed_within(Duration::from_secs(5)));
        assert!(!watch.changed_within(Duration::from_millis(10)));

        // So is an outcome in a watched activity folder, but not once it is no longer watched.
        std::fs::write(activity_dir.join(files::OUTCOME), "{}").unwrap();
        assert!(watch.changed_within(Duration::from_secs(5)));
        watch.follow(&[]);
        std::fs::remove_file(activity_dir.join(files::OUTCOME)).unwrap();
        std::fs::write(activity_dir.join(files::OUTCOME), "{}").unwrap();
        assert!(!watch.changed_within(Duration::from_millis(50)));
    }
}
