//! The HTTP/2 connection task (via the `h2` crate): one stream at a time per connection, so
//! `-c` means the same concurrency as with HTTP/1.1.

use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use protocol::report::answers::BACKEND_HEADER;

use super::answers::{Answer, Backend, ConnRuns};
use super::connect::Connector;
use super::engine::ConnCtx;
use super::stats::ErrorClass;
use super::timer::{Deadline, Pacer};

pub(crate) async fn run<C: Connector>(connector: C, ctx: ConnCtx) {
    let plan = &*ctx.plan;
    let body = Bytes::from(plan.body.clone());
    let mut client: Option<SendRequest<Bytes>> = None;
    let mut pacer = Pacer::new(ctx.clock.end, ctx.schedule);
    let mut timer = Deadline::new();
    let mut runs = ConnRuns::default();
    while let Some((started, now)) = pacer.next().await {
        let deadline = now + plan.timeout;
        if client.is_none() {
            match timer.run(deadline, handshake(&connector)).await {
                Some(Ok(c)) => client = Some(c),
                Some(Err(class)) => {
                    ctx.failed(&mut runs, started, class);
                    continue;
                }
                None => {
                    ctx.failed(&mut runs, started, ErrorClass::Timeout);
                    continue;
                }
            }
        }
        let Some(send) = client.as_mut() else {
            continue;
        };
        match timer
            .run(deadline, exchange(send, plan, ctx.uri(), &body))
            .await
        {
            Some(Ok((answer, read, head_at))) => {
                let now = Instant::now();
                ctx.stats.borrow_mut().response(
                    started,
                    now,
                    answer.status,
                    read,
                    body.len() as u64,
                );
                ctx.answered(&mut runs, answer, head_at.unwrap_or(now));
                if !plan.keepalive {
                    client = None;
                }
            }
            Some(Err(class)) => {
                ctx.failed(&mut runs, started, class);
                client = None;
            }
            None => {
                ctx.failed(&mut runs, started, ErrorClass::Timeout);
                client = None;
            }
        }
    }
    ctx.connection_ended(&mut runs);
}

async fn handshake<C: Connector>(connector: &C) -> Result<SendRequest<Bytes>, ErrorClass> {
    let io = connector.connect().await.map_err(|_| ErrorClass::Connect)?;
    let (send, connection) = h2::client::handshake(io)
        .await
        .map_err(|_| ErrorClass::Connect)?;
    tokio::task::spawn_local(async move {
        // Ends when the last SendRequest is dropped or the peer goes away.
        let _ = connection.await;
    });
    Ok(send)
}

async fn exchange(
    send: &mut SendRequest<Bytes>,
    plan: &super::engine::Plan,
    uri: &str,
    body: &Bytes,
) -> Result<(Answer, u64, Option<Instant>), ErrorClass> {
    let mut ready = send.clone().ready().await.map_err(|_| ErrorClass::Write)?;
    let mut builder = http::Request::builder()
        .method(plan.method.as_str())
        .uri(uri);
    for (name, value) in &plan.h2_headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let request = builder.body(()).map_err(|_| ErrorClass::Write)?;
    let (response, mut stream) = ready
        .send_request(request, body.is_empty())
        .map_err(|_| ErrorClass::Write)?;
    if !body.is_empty() {
        stream
            .send_data(body.clone(), true)
            .map_err(|_| ErrorClass::Write)?;
    }
    let response = response.await.map_err(|_| ErrorClass::Read)?;
    // When the head arrived: a change of answer shows then, however long the body takes.
    let head_at = plan.record_answers.then(Instant::now);
    // Looked up only when answers are recorded.
    let named = plan
        .record_answers
        .then(|| response.headers().get(BACKEND_HEADER))
        .flatten();
    let backend = named.map_or(Backend::NONE, |v| Backend::from_value(v.as_bytes()));
    let answer = Answer {
        status: response.status().as_u16(),
        backend,
    };
    let mut recv = response.into_body();
    let mut read = 0u64;
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.map_err(|_| ErrorClass::Read)?;
        read += chunk.len() as u64;
        let _ = recv.flow_control().release_capacity(chunk.len());
    }
    Ok((answer, read, head_at))
}
