//! What a benchmark prints of its timings: one place for the three that time processes.

use std::time::Duration;

pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub p90: f64,
}

impl Stats {
    /// Median, minimum and 90th percentile (nearest rank), in milliseconds.
    pub fn of(times: &mut [Duration]) -> Stats {
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let n = times.len();
        let rank = |p: f64| ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        let median = if n % 2 == 1 {
            ms(times[n / 2])
        } else {
            (ms(times[n / 2 - 1]) + ms(times[n / 2])) / 2.0
        };
        Stats {
            median,
            min: ms(times[0]),
            p90: ms(times[rank(0.9)]),
        }
    }
}
