//! The end of an output stream, in bounded memory whatever the child prints: every byte is
//! counted, only the last `MAX_BYTES` are kept, and the last `MAX_LINES` lines of those are what
//! is finally written.

use super::spec::StreamSummary;
use std::io::ErrorKind;
use tokio::io::{AsyncRead, AsyncReadExt};

/// At most this many bytes of a stream are kept.
pub const MAX_BYTES: usize = 50 * 1024;
/// At most this many lines of a stream are kept.
pub const MAX_LINES: usize = 2_000;

/// How much one `read` takes from the pipe.
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, Default)]
pub struct Tail {
    /// The stream's last bytes: between `MAX_BYTES` and `2 * MAX_BYTES` of them once that many
    /// have arrived, so trimming the front is paid for once per `MAX_BYTES` received.
    kept: Vec<u8>,
    bytes: u64,
    newlines: u64,
    ends_with_newline: bool,
}

impl Tail {
    pub fn push(&mut self, chunk: &[u8]) {
        let Some(&last) = chunk.last() else {
            return;
        };
        self.bytes += chunk.len() as u64;
        self.newlines += count_newlines(chunk);
        self.ends_with_newline = last == b'\n';
        if chunk.len() >= MAX_BYTES {
            self.kept.clear();
            self.kept
                .extend_from_slice(&chunk[chunk.len() - MAX_BYTES..]);
            return;
        }
        self.kept.extend_from_slice(chunk);
        if self.kept.len() > 2 * MAX_BYTES {
            self.kept.drain(..self.kept.len() - MAX_BYTES);
        }
    }

    /// The bytes to keep: the last `MAX_BYTES`, cut further to the last `MAX_LINES` lines.
    pub fn text(&self) -> &[u8] {
        let window = &self.kept[self.kept.len().saturating_sub(MAX_BYTES)..];
        // N lines hold N - 1 newlines besides the stream's own final one (which ends the last
        // line rather than starting another), so the cut is just after the N-th from the end.
        let mut seen = 0;
        for (i, &b) in window.iter().enumerate().rev() {
            if b == b'\n' && i + 1 != window.len() {
                seen += 1;
                if seen == MAX_LINES {
                    return &window[i + 1..];
                }
            }
        }
        window
    }

    pub fn summary(&self) -> StreamSummary {
        StreamSummary {
            bytes: self.bytes,
            lines: self.newlines + u64::from(self.bytes > 0 && !self.ends_with_newline),
            truncated: (self.text().len() as u64) < self.bytes,
        }
    }
}

/// The number of `\n` in `bytes`, a word at a time: every byte of the stream passes through
/// here, and a byte-by-byte loop is slow in the unoptimised builds the tests run.
fn count_newlines(bytes: &[u8]) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const NEWLINES: u64 = 0x0a0a_0a0a_0a0a_0a0a;
    // SAFETY: every bit pattern is a valid u64, and `align_to` hands back aligned words only.
    let (head, words, rest) = unsafe { bytes.align_to::<u64>() };
    let mut count = head.iter().filter(|&&b| b == b'\n').count() as u64;
    for &word in words {
        // A byte of `x` is zero exactly where the input held a newline. For each byte,
        // ((b & 0x7f) + 0x7f) | b has its high bit set unless b is zero, with no carry between
        // bytes; the clear high bits are counted.
        let x = word ^ NEWLINES;
        let nonzero = ((x & LOW7) + LOW7) | x;
        count += u64::from((!nonzero & HIGH).count_ones());
    }
    count + rest.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Read `source` (none: nothing to read) to its end into `tail`. Between reads it awaits the
/// pipe; dropping the future leaves in `tail` what arrived so far.
pub async fn drain(source: Option<impl AsyncRead + Unpin>, tail: &mut Tail) {
    let Some(mut source) = source else {
        return;
    };
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        match source.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => tail.push(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail_of(chunks: &[&[u8]]) -> Tail {
        let mut t = Tail::default();
        for c in chunks {
            t.push(c);
        }
        t
    }

    #[test]
    fn newlines_are_counted_in_every_position() {
        for len in 0..40 {
            for start in 0..len {
                let mut bytes: Vec<u8> = (0..len).map(|i| [b'a', 0x8a, 0, 0xff][i % 4]).collect();
                for b in bytes[start..].iter_mut().step_by(3) {
                    *b = b'\n';
                }
                // Every offset, so the unaligned head and tail are exercised as well.
                for offset in 0..bytes.len().min(9) {
                    let part = &bytes[offset..];
                    let expected = part.iter().filter(|&&b| b == b'\n').count() as u64;
                    assert_eq!(count_newlines(part), expected, "{part:?}");
                }
            }
        }
    }

    #[test]
    fn short_output_is_kept_whole_and_counted() {
        let t = tail_of(&[b"one\ntw", b"o\nthree"]);
        assert_eq!(t.text(), b"one\ntwo\nthree");
        assert_eq!(
            t.summary(),
            StreamSummary {
                bytes: 13,
                lines: 3,
                truncated: false
            }
        );
        assert_eq!(tail_of(&[b"a\n"]).summary().lines, 1);
        assert_eq!(tail_of(&[b"\n\n"]).summary().lines, 2);
        assert_eq!(tail_of(&[]).summary(), StreamSummary::default());
    }

    #[test]
    fn keeps_the_last_lines() {
        let text: String = (0..3000).map(|i| format!("{i}\n")).collect();
        let t = tail_of(&[text.as_bytes()]);
        let kept = String::from_utf8(t.text().to_vec()).unwrap();
        assert_eq!(kept.lines().count(), MAX_LINES);
        assert!(kept.starts_with("1000\n") && kept.ends_with("2999\n"));
        let s = t.summary();
        assert_eq!((s.lines, s.truncated), (3000, true));

        // The same with a final line that has no newline: it counts as one of the 2,000.
        let t = tail_of(&[text.as_bytes(), b"last"]);
        let kept = String::from_utf8(t.text().to_vec()).unwrap();
        assert_eq!(kept.lines().count(), MAX_LINES);
        assert!(kept.starts_with("1001\n") && kept.ends_with("2999\nlast"));
        assert_eq!(t.summary().lines, 3001);
    }

    #[test]
    fn exactly_the_limits_is_not_truncated() {
        let text = "x\n".repeat(MAX_LINES);
        let t = tail_of(&[text.as_bytes()]);
        assert_eq!(t.text(), text.as_bytes());
        assert!(!t.summary().truncated);
        let bytes = vec![b'y'; MAX_BYTES];
        let t = tail_of(&[&bytes]);
        assert_eq!(t.text().len(), MAX_BYTES);
        assert!(!t.summary().truncated);
    }

    #[test]
    fn keeps_the_last_bytes_in_bounded_memory() {
        let mut t = Tail::default();
        let chunk: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        for _ in 0..10_000 {
            t.push(&chunk);
            assert!(t.kept.len() <= 2 * MAX_BYTES);
        }
        t.push(b"the end");
        assert_eq!(t.text().len(), MAX_BYTES);
        assert!(t.text().ends_with(b"the end"));
        let s = t.summary();
        assert_eq!(s.bytes, 10_000_000 + 7);
        assert!(s.truncated);

        let mut big = vec![b'a'; 3 * MAX_BYTES];
        big.extend_from_slice(b"!");
        let t = tail_of(&[&big]);
        assert_eq!(t.text().len(), MAX_BYTES);
        assert!(t.text().ends_with(b"a!"));
    }
}
