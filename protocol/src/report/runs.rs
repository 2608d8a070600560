//! What the merges of the stream reports (tcp, udp) and the rr report share: their runs one
//! after another, each stream renumbered to name its run in the whole, and the time all runs
//! span.

/// The runs of every part (a report's runs and streams) one after another, and the parts'
/// streams with them, each renumbered to name its run in the whole (`run_of`: where a stream
/// holds the index of its run). None when a run index overflows u32.
pub(crate) fn concat_runs<'a, R: Clone + 'a, S: Clone + 'a>(
    parts: impl IntoIterator<Item = (&'a [R], &'a [S])>,
    run_of: impl Fn(&mut S) -> &mut u32,
) -> Option<(Vec<R>, Vec<S>)> {
    let mut runs = Vec::new();
    let mut streams = Vec::new();
    for (part_runs, part_streams) in parts {
        let offset = u32::try_from(runs.len()).ok()?;
        runs.extend(part_runs.iter().cloned());
        for s in part_streams {
            let mut s = s.clone();
            let run = run_of(&mut s);
            *run = run.checked_add(offset)?;
            streams.push(s);
        }
    }
    Some((runs, streams))
}

/// The earliest start and the latest end of `spans` (start, end in Unix ms); 0 for none.
pub(crate) fn time_span(spans: impl Iterator<Item = (u64, u64)> + Clone) -> (u64, u64) {
    let started = spans.clone().map(|(start, _)| start).min().unwrap_or(0);
    let ended = spans.map(|(_, end)| end).max().unwrap_or(0);
    (started, ended)
}
