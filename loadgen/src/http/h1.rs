//! The HTTP/1.1 connection task: owns one connection at a time, writes the pre-serialized
//! request with one write, parses the response from a reused buffer, records, repeats.

use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::answers::{Answer, ConnRuns};
use super::connect::{Connector, PeerClosed};
use super::engine::ConnCtx;
use super::recv::RecvBuf;
use super::response::{parse_head, Body, HeadOptions};
use super::stats::ErrorClass;
use super::timer::{Deadline, Pacer};

// Enough for any sane response head; bodies stream through it. 16 KiB x 10k connections = 160 MiB.
const RECV_BUF: usize = 16 * 1024;

struct Outcome {
    answer: Answer,
    /// When the head arrived (only when answers are recorded): a change of answer shows then,
    /// however long the body takes.
    head_at: Option<Instant>,
    close: bool,
    read: u64,
}

pub(crate) async fn run<C: Connector>(connector: C, ctx: ConnCtx) {
    let plan = &*ctx.plan;
    let request: &[u8] = ctx.request();
    let mut buf = RecvBuf::new(RECV_BUF);
    let mut stream: Option<C::Stream> = None;
    let mut pacer = Pacer::new(ctx.clock.end, ctx.schedule);
    let mut timer = Deadline::new();
    let mut runs = ConnRuns::default();
    let opts = HeadOptions {
        head_request: plan.head,
        backend: plan.record_answers,
    };
    while let Some((started, now)) = pacer.next().await {
        let deadline = now + plan.timeout;
        let mut sent = 0;
        if stream.is_none() {
            match timer.run(deadline, connector.connect_send(request)).await {
                Some(Ok((s, n))) => {
                    stream = Some(s);
                    sent = n;
                }
                Some(Err(_)) => {
                    ctx.failed(&mut runs, started, ErrorClass::Connect);
                    continue;
                }
                None => {
                    ctx.failed(&mut runs, started, ErrorClass::Timeout);
                    continue;
                }
            }
        }
        let Some(s) = stream.as_mut() else { continue };
        buf.clear();
        match timer
            .run(deadline, exchange(s, &request[sent..], &mut buf, opts))
            .await
        {
            Some(Ok(out)) => {
                let now = Instant::now();
                ctx.stats.borrow_mut().response(
                    started,
                    now,
                    out.answer.status,
                    out.read,
                    request.len() as u64,
                );
                ctx.answered(&mut runs, out.answer, out.head_at.unwrap_or(now));
                if out.close || !plan.keepalive {
                    if let Some(s) = stream.take() {
                        if !s.peer_closed() {
                            timer.run(deadline, await_server_close(s, &mut buf)).await;
                        }
                    }
                }
            }
            Some(Err(class)) => {
                ctx.failed(&mut runs, started, class);
                stream = None;
            }
            None => {
                ctx.failed(&mut runs, started, ErrorClass::Timeout);
                stream = None;
            }
        }
    }
    ctx.connection_ended(&mut runs);
}

/// One request/response on an open connection.
async fn exchange<S>(
    s: &mut S,
    request: &[u8],
    buf: &mut RecvBuf,
    opts: HeadOptions,
) -> Result<Outcome, ErrorClass>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    s.write_all(request).await.map_err(|_| ErrorClass::Write)?;
    s.flush().await.map_err(|_| ErrorClass::Write)?;
    let mut read = 0u64;
    let head = loop {
        if !buf.data().is_empty() {
            if let Some(h) = parse_head(buf.data(), opts).map_err(|_| ErrorClass::Parse)? {
                break h;
            }
        }
        read += fill(s, buf).await? as u64;
    };
    let head_at = opts.backend.then(Instant::now);
    buf.consume(head.len);
    let mut body = Body::new(head.framing);
    loop {
        let used = body.feed(buf.data()).map_err(|_| ErrorClass::Parse)?;
        buf.consume(used);
        if body == Body::Done {
            break;
        }
        match fill(s, buf).await {
            Ok(n) => read += n as u64,
            Err(ErrorClass::Read) if body == Body::UntilClose => break,
            Err(e) => return Err(e),
        }
    }
    Ok(Outcome {
        answer: Answer {
            status: head.status,
            backend: head.backend,
        },
        head_at,
        close: head.close,
        read,
    })
}

/// Reads more bytes; end of stream before the response is complete is a read error.
async fn fill<S: AsyncRead + Unpin>(s: &mut S, buf: &mut RecvBuf) -> Result<usize, ErrorClass> {
    let spare = buf.spare().ok_or(ErrorClass::Parse)?;
    match s.read(spare).await {
        Ok(0) | Err(_) => Err(ErrorClass::Read),
        Ok(n) => {
            buf.filled(n);
            Ok(n)
        }
    }
}

/// Waits for the server's FIN before closing, so TIME_WAIT lands on the server side and a long
/// run does not exhaust the client's ephemeral ports.
async fn await_server_close<S: AsyncRead + Unpin>(mut s: S, buf: &mut RecvBuf) {
    loop {
        buf.clear();
        let Some(spare) = buf.spare() else { return };
        match s.read(spare).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Property tests of the response path of a connection: a server's bytes, delivered in any
/// pieces, give an outcome or an error class, never a panic, and the same outcome however they
/// are cut.
#[cfg(test)]
mod props {
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use proptest::collection::vec;
    use proptest::prelude::*;
    use tokio::io::ReadBuf;

    use super::*;
    use crate::http::response::props::response;

    /// A server that answers with `pieces`, one read each, then closes.
    struct Scripted {
        pieces: VecDeque<Vec<u8>>,
    }

    impl Scripted {
        fn new(data: &[u8], cuts: &[usize]) -> Self {
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            bounds.push(data.len());
            bounds.sort_unstable();
            let mut start = 0;
            let mut pieces = VecDeque::new();
            for end in bounds {
                if end > start {
                    pieces.push_back(data[start..end].to_vec());
                }
                start = end;
            }
            Scripted { pieces }
        }
    }

    impl AsyncRead for Scripted {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if let Some(mut piece) = self.pieces.pop_front() {
                let n = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..n]);
                if n < piece.len() {
                    self.pieces.push_front(piece.split_off(n));
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Scripted {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            Poll::Ready(Ok(b.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// (status, close, read) or the error class.
    fn answer(data: &[u8], cuts: &[usize], head: bool) -> Result<(u16, bool, u64), ErrorClass> {
        let opts = HeadOptions {
            head_request: head,
            backend: true,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut server = Scripted::new(data, cuts);
        let mut buf = RecvBuf::new(RECV_BUF);
        rt.block_on(exchange(
            &mut server,
            b"GET / HTTP/1.1\r\n\r\n",
            &mut buf,
            opts,
        ))
        .map(|o| (o.answer.status, o.close, o.read))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_server_bytes_give_an_outcome_or_an_error_class(
            data in vec(any::<u8>(), 0..2048),
            cuts in vec(any::<usize>(), 0..8),
            head in any::<bool>(),
        ) {
            let whole = answer(&data, &[], head);
            if let Ok((status, _, read)) = whole {
                prop_assert!((100..=999).contains(&status));
                prop_assert!(read <= data.len() as u64);
            }
            // Cut anywhere, the same answer (reads count what arrived, not how).
            let cut = answer(&data, &cuts, head);
            prop_assert_eq!(cut.map(|(s, c, _)| (s, c)), whole.map(|(s, c, _)| (s, c)));
        }

        #[test]
        fn well_formed_responses_are_measured_exactly(
            r in response(),
            cuts in vec(any::<usize>(), 0..8),
        ) {
            let (status, _, read) = answer(&r.bytes, &cuts, false).unwrap();
            prop_assert_eq!(status, r.status);
            prop_assert_eq!(read, r.bytes.len() as u64);
        }
    }
}
