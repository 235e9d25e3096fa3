//! A run's timeline as one self-contained HTML page (`run show --html`, SPEC 20.6): inline CSS and
//! SVG, no script, no external URL. Every text that came from a file is stripped of terminal
//! escapes and HTML-escaped (`esc`).

use super::run::cost_line;
use crate::run::view::{Bar, BarOutcome, RowKind, Timeline};
use crate::text::for_terminal;
use std::fmt::Write;

const LABEL: i64 = 300;
const CHART: i64 = 720;
const ROW: i64 = 24;
/// The characters of a row's label that fit in `LABEL` pixels.
const LABEL_CHARS: usize = 42;
const TOP: i64 = 30;
/// A bar is at least this wide, however short: most steps of a fast run take under a second.
const MIN_BAR: i64 = 6;

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.2em}h2{font-size:1em;margin-top:1.5em}
svg text{font-size:12px;fill:#222}
.grid{stroke:#ddd}
.lane-label{font-weight:bold}
rect.bar{stroke:#333;stroke-width:0.5}
rect.done{fill:#4caf50}rect.failed{fill:#e53935}rect.waits{fill:#ffb300}
rect.running{fill:#42a5f5}rect.paced{fill:#bdbdbd}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
.legend span{display:inline-block;padding:0 6px;margin-right:6px;border:1px solid #333}
.legend .done{background:#4caf50}.legend .failed{background:#e53935}
.legend .waits{background:#ffb300}.legend .running{background:#42a5f5}
.legend .paced{background:#bdbdbd}
";

/// `s` without terminal escapes, safe inside HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in for_terminal(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn outcome_class(o: BarOutcome) -> &'static str {
    match o {
        BarOutcome::Done => "done",
        BarOutcome::Failed => "failed",
        BarOutcome::Waits => "waits",
        BarOutcome::Running => "running",
        BarOutcome::Paced => "paced",
    }
}

fn row_label(kind: &RowKind, lane: Option<&str>) -> String {
    match kind {
        RowKind::Lane { stage, title } => format!(
            "lane {} ({}){}",
            lane.unwrap_or(""),
            stage.as_str(),
            title
                .as_deref()
                .map(|t| format!(": {t}"))
                .unwrap_or_default()
        ),
        RowKind::Agent { step, attempt } => {
            let what = match step.validator_name() {
                Some("refute") => "refuter".to_owned(),
                Some(name) => format!("validator {name}"),
                None => step.role().to_owned(),
            };
            format!("{what}, attempt {attempt}")
        }
        RowKind::Commands => "definition-of-done commands".into(),
        RowKind::Landing => "landing".into(),
        RowKind::Pace => "waits for the pace".into(),
    }
}

/// Measured in milliseconds when something measured it, else from its recorded times (seconds).
fn duration(bar: &Bar) -> String {
    match (bar.duration_ms, bar.end) {
        (Some(ms), _) if ms < 10_000 => format!("{ms} ms"),
        (Some(ms), _) => format!("{} s", ms / 1000),
        (None, Some(end)) => format!("{} s", end - bar.start),
        (None, None) => "still running".into(),
    }
}

/// What a bar says on hover: step, attempt, model, cost and duration, and how it ended.
fn title(bar: &Bar) -> String {
    let mut t = if bar.step == "pace" {
        format!(
            "wait for the pace ({})",
            bar.why.as_deref().unwrap_or("unknown")
        )
    } else {
        format!("{}, attempt {}", bar.step, bar.attempt)
    };
    if let Some(a) = &bar.agent {
        let _ = write!(
            t,
            ", runner {}, model {}, cost {}",
            a.runner.as_deref().unwrap_or("unknown"),
            a.model.as_deref().unwrap_or("unknown"),
            a.cost_usd
                .map_or_else(|| "unknown".to_owned(), |c| format!("${c}"))
        );
    }
    let _ = write!(
        t,
        ", {}, {}, from {} s",
        duration(bar),
        outcome_class(bar.outcome),
        bar.start
    );
    t
}

/// The page.
pub fn html(t: &Timeline) -> String {
    let span = t.span.max(1);
    let x = |s: i64| LABEL + s * CHART / span;
    let height = TOP + ROW * t.rows.len() as i64 + 10;
    let width = LABEL + CHART + 20;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"timeline\">"
    );
    let mut ticks: Vec<i64> = (0..=4).map(|k| span * k / 4).collect();
    ticks.dedup();
    for s in ticks {
        let _ = writeln!(
            svg,
            "<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{height}\"/><text x=\"{0}\" y=\"{2}\">{s} s</text>",
            x(s),
            TOP - 12,
            TOP - 16
        );
    }
    for (i, row) in t.rows.iter().enumerate() {
        let y = TOP + ROW * i as i64;
        // A lane's label at the left edge, its agents' and steps' indented under it.
        let (class, indent) = if matches!(row.kind, RowKind::Lane { .. } | RowKind::Pace) {
            (" class=\"lane-label\"", 4)
        } else {
            ("", 16)
        };
        // A long lane id is cut to fit beside the chart; hovering it shows the whole label.
        let label = row_label(&row.kind, row.lane.as_deref());
        let shown: String = if label.chars().count() > LABEL_CHARS {
            label.chars().take(LABEL_CHARS - 1).chain(['…']).collect()
        } else {
            label.clone()
        };
        let _ = writeln!(
            svg,
            "<text{class} x=\"{indent}\" y=\"{}\"><title>{}</title>{}</text>",
            y + 16,
            esc(&label),
            esc(&shown)
        );
        for bar in &row.bars {
            let from = x(bar.start);
            let to = x(bar.end.unwrap_or(t.span));
            let _ = writeln!(
                svg,
                "<rect class=\"bar {}\" x=\"{from}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
                outcome_class(bar.outcome),
                y + 4,
                (to - from).max(MIN_BAR),
                ROW - 8,
                esc(&title(bar))
            );
        }
    }
    svg.push_str("</svg>\n");

    let mut page = String::new();
    let heading = format!(
        "{}: {}{} ({})",
        t.run,
        t.unit,
        t.title
            .as_deref()
            .map(|t| format!(" — {t}"))
            .unwrap_or_default(),
        t.status
    );
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{0}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>{0}</h1>\n<p>Times are seconds from the run's start ({1} s in all). Cost: {2}.</p>\n<p class=\"legend\"><span class=\"done\">done</span><span class=\"failed\">failed</span><span class=\"waits\">waits</span><span class=\"running\">running</span><span class=\"paced\">pace</span></p>\n{svg}",
        esc(&heading),
        t.span,
        esc(&cost_line(&t.cost)),
    );
    for lane in &t.findings {
        let _ = writeln!(
            page,
            "<h2>Findings of lane {}</h2>\n<table>\n<tr><th>finding</th><th>fate</th><th>severity</th><th>by</th><th>round</th><th>summary</th></tr>",
            esc(&lane.lane)
        );
        for f in &lane.findings {
            let _ = writeln!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.id),
                esc(&f.status),
                esc(&f.severity),
                esc(&f.by),
                f.round,
                esc(&f.summary)
            );
        }
        page.push_str("</table>\n");
    }
    if t.findings.is_empty() {
        page.push_str("<p>No findings.</p>\n");
    }
    page.push_str("</body>\n</html>\n");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Markup and terminal escapes from a file never reach the page as such.
    #[test]
    fn text_from_files_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\"\u{1b}[31m red\u{1b}]8;;http://x\u{7}"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot; red"
        );
    }
}
