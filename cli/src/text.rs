//! Text that came from a cluster or a file, made safe for where it goes: Markdown table cells,
//! SVG labels (plotters escapes `<`, `&` and quotes itself; characters XML cannot hold at all
//! are removed here), terminal lines. And the number formats every output shares.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Longest user-supplied text shown anywhere (names, messages); longer text is cut with "…".
pub const MAX_SHOWN_CHARS: usize = 256;

/// Drops characters XML 1.0 cannot carry and terminal control characters, turns line breaks
/// and tabs into spaces, and cuts the text to `max` characters.
pub fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    for c in text.chars() {
        if count >= max {
            out.push('…');
            break;
        }
        let c = match c {
            '\n' | '\r' | '\t' => ' ',
            c if c.is_control() => continue,
            '\u{FFFE}' | '\u{FFFF}' => continue,
            c => c,
        };
        out.push(c);
        count = count.saturating_add(1);
    }
    out
}

/// Most characters of a title: far beyond any a report makes of names the API server bounds
/// (a benchmark's 253, a case's 63), only a forged result's is cut.
pub const MAX_TITLE_CHARS: usize = 1024;

/// A title in lines of at most `width` characters, broken at spaces (a word longer than a
/// line is broken inside it); nothing of a title made of real names is left out.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines: Vec<String> = vec![];
    let mut line = String::new();
    for word in clean(text, MAX_TITLE_CHARS)
        .split(' ')
        .filter(|w| !w.is_empty())
    {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = line.chars().count();
            let room = if used == 0 {
                width
            } else {
                width.saturating_sub(used + 1)
            };
            if word.len() <= room {
                if used > 0 {
                    line.push(' ');
                }
                line.extend(word.iter());
                break;
            }
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            let rest = word.split_off(width.min(word.len()));
            lines.push(word.iter().collect());
            word = rest;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// A short label for a chart or a terminal line.
pub fn label(text: &str) -> String {
    clean(text, 48)
}

/// A Markdown table cell: cleaned, with the characters that end a cell (`|`), start HTML
/// (`<`, `>`, `&`), start a link or image (`[`, `]`) or escape them (`\`) neutralised.
pub fn md_cell(text: &str) -> String {
    let mut out = String::new();
    for c in clean(text, MAX_SHOWN_CHARS).chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '`' => out.push_str("\\`"),
            '[' => out.push_str("\\["),
            ']' => out.push_str("\\]"),
            c => out.push(c),
        }
    }
    out
}

/// Inline Markdown text (headings, sentences): the same escaping as a table cell, plus the
/// characters that would start emphasis or a link.
pub fn md_text(text: &str) -> String {
    let mut out = String::new();
    for c in md_cell(text).chars() {
        if matches!(c, '*' | '_' | '#') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A number with `decimals` decimals, "n/a" when it is not finite.
pub fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "n/a".into()
    }
}

/// Decimals that show the smallest positive value of some with three significant digits
/// (0.046 -> 4, 0.13 -> 3), at least `at_least`, at most 4 (or `at_least`); values of 1 or
/// more need none.
pub fn decimals_for(values: impl Iterator<Item = f64>, at_least: usize) -> usize {
    let min = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let needed = if min < 1.0 {
        // min is in (0, 1): its log10 is finite and negative; at most 4 decimals anyway.
        let digits = (-min.log10()).floor().min(4.0);
        usize::try_from(digits as i64)
            .unwrap_or(0)
            .saturating_add(3)
    } else {
        0
    };
    needed.max(at_least).min(4.max(at_least))
}

/// "mean ± ci" ("mean" alone when the interval is unknown: one sample; "n/a" when the mean
/// is not a number).
pub fn interval(mean: f64, ci: f64, decimals: usize) -> String {
    if mean.is_finite() && ci > 0.0 && ci.is_finite() {
        format!("{} ± {}", num(mean, decimals), num(ci, decimals))
    } else {
        num(mean, decimals)
    }
}

/// A ratio as a percentage ("81%").
pub fn percent(ratio: f64, decimals: usize) -> String {
    if ratio.is_finite() {
        format!("{}%", num(ratio * 100.0, decimals))
    } else {
        "n/a".into()
    }
}

/// A signed percentage ("+4.2%", "-31.0%").
pub fn signed_percent(pct: f64) -> String {
    if pct.is_finite() {
        format!("{pct:+.1}%")
    } else {
        "n/a".into()
    }
}

/// Bytes in the largest binary unit that divides them exactly ("64 KiB", "1500 B").
pub fn bytes(v: u64) -> String {
    for (shift, unit) in [(30u32, "GiB"), (20, "MiB"), (10, "KiB")] {
        let size = 1u64 << shift;
        if v >= size && v.is_multiple_of(size) {
            return format!("{} {unit}", v / size);
        }
    }
    format!("{v} B")
}

/// Rows as a plain-text table: each column as wide as its widest cell, two spaces apart, no
/// trailing blanks, a line per row.
pub fn aligned<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A timestamp as RFC 3339 (UTC, seconds).
pub fn time(t: Option<&Time>) -> String {
    t.map_or_else(
        || "-".into(),
        |t| t.0.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// The seconds between two timestamps, when both are known and in order.
pub fn seconds_between(start: Option<&Time>, end: Option<&Time>) -> Option<f64> {
    let (s, e) = (start?, end?);
    let secs = e.0.duration_since(s.0).as_secs_f64();
    (secs.is_finite() && secs >= 0.0).then_some(secs)
}

/// A length of time for people ("15 s", "4 min 10 s", "2 h 5 min").
pub fn human_seconds(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "n/a".into();
    }
    // Saturating float-to-integer conversion; a stored object may claim any span.
    let s = secs.round() as u64;
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_a_table_or_start_html() {
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
        assert_eq!(md_cell("<script>&\"x\""), "&lt;script&gt;&amp;\"x\"");
        assert_eq!(md_cell("back\\|slash"), "back\\\\\\|slash");
        assert_eq!(
            md_text("*bold* [link](x) # h"),
            "\\*bold\\* \\[link\\](x) \\# h"
        );
    }

    #[test]
    fn control_characters_go_and_long_text_is_cut() {
        assert_eq!(clean("a\u{1}b\u{7f}c\u{FFFF}", 10), "abc");
        let long = "x".repeat(1000);
        let cut = clean(&long, 5);
        assert_eq!(cut, "xxxxx…");
        assert_eq!(label(&long).chars().count(), 49);
    }

    #[test]
    fn numbers_never_print_nan() {
        assert_eq!(num(f64::NAN, 2), "n/a");
        assert_eq!(interval(3209.664, 12.0, 2), "3209.66 ± 12.00");
        assert_eq!(interval(5.0, 0.0, 1), "5.0");
        assert_eq!(interval(f64::NAN, 2.0, 1), "n/a");
        assert_eq!(percent(0.8069, 0), "81%");
        assert_eq!(signed_percent(-31.04), "-31.0%");
        assert_eq!(bytes(65536), "64 KiB");
        assert_eq!(bytes(3 << 30), "3 GiB");
        assert_eq!(bytes(1500), "1500 B");
        assert_eq!(bytes(0), "0 B");
        assert_eq!(decimals_for([0.046, 3.0].into_iter(), 2), 4);
        assert_eq!(decimals_for([0.13, f64::NAN].into_iter(), 2), 3);
        assert_eq!(decimals_for([0.0046].into_iter(), 2), 4);
        assert_eq!(decimals_for([9.9, 0.0, -1.0].into_iter(), 2), 2);
        assert_eq!(decimals_for([1e-300].into_iter(), 0), 4);
        assert_eq!(decimals_for(std::iter::empty(), 1), 1);
        assert_eq!(human_seconds(250.0), "4 min 10 s");
        assert_eq!(human_seconds(f64::INFINITY), "n/a");
        assert!(human_seconds(1e300).starts_with(&format!("{} h", u64::MAX / 3600)));
    }
}
