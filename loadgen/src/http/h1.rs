//! The HTTP/1.1 connection task: owns one connection at a time, writes the pre-serialized
//! request with one write, parses the response from a reused buffer, records, repeats.

use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::connect::{Connector, PeerClosed};
use super::engine::ConnCtx;
use super::recv::RecvBuf;
use super::response::{parse_head, Body};
use super::stats::ErrorClass;
use super::timer::{Deadline, Pacer};

// Enough for any sane response head; bodies stream through it. 16 KiB x 10k connections = 160 MiB.
const RECV_BUF: usize = 16 * 1024;

struct Outcome {
    status: u16,
    close: bool,
    read: u64,
}

pub(crate) async fn run<C: Connector>(connector: C, ctx: ConnCtx) {
    let plan = &*ctx.plan;
    let request: &[u8] = &plan.request;
    let mut buf = RecvBuf::new(RECV_BUF);
    let mut stream: Option<C::Stream> = None;
    let mut pacer = Pacer::new(ctx.clock.end, ctx.schedule);
    let mut timer = Deadline::new();
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
                    ctx.stats.borrow_mut().error(started, ErrorClass::Connect);
                    continue;
                }
                None => {
                    ctx.stats.borrow_mut().error(started, ErrorClass::Timeout);
                    continue;
                }
            }
        }
        let Some(s) = stream.as_mut() else { continue };
        buf.clear();
        match timer
            .run(deadline, exchange(s, &request[sent..], &mut buf, plan.head))
            .await
        {
            Some(Ok(out)) => {
                let now = Instant::now();
                ctx.stats.borrow_mut().response(
                    started,
                    now,
                    out.status,
                    out.read,
                    request.len() as u64,
                );
                if out.close || !plan.keepalive {
                    if let Some(s) = stream.take() {
                        if !s.peer_closed() {
                            timer.run(deadline, await_server_close(s, &mut buf)).await;
                        }
                    }
                }
            }
            Some(Err(class)) => {
                ctx.stats.borrow_mut().error(started, class);
                stream = None;
            }
            None => {
                ctx.stats.borrow_mut().error(started, ErrorClass::Timeout);
                stream = None;
            }
        }
    }
}

/// One request/response on an open connection.
async fn exchange<S>(
    s: &mut S,
    request: &[u8],
    buf: &mut RecvBuf,
    head_request: bool,
) -> Result<Outcome, ErrorClass>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    s.write_all(request).await.map_err(|_| ErrorClass::Write)?;
    s.flush().await.map_err(|_| ErrorClass::Write)?;
    let mut read = 0u64;
    let head = loop {
        if !buf.data().is_empty() {
            if let Some(h) = parse_head(buf.data(), head_request).map_err(|_| ErrorClass::Parse)? {
                break h;
            }
        }
        read += fill(s, buf).await? as u64;
    };
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
        status: head.status,
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
