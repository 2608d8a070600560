//! Text from outside (a worker, the API server, a spec) made fit for status and Events.

/// `text` made fit for status and Events: control characters become spaces and it is cut to at
/// most `max` characters (it may come from a worker or the API server).
pub fn clip(text: &str, max: usize) -> String {
    let mut out: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if text.trim().chars().nth(max).is_some() {
        out.push('…');
    }
    out
}
