//! Proves the keep-alive hot path does not allocate per request: a counting global allocator
//! around a run of thousands of requests against an in-test server that itself does not
//! allocate per request; nor when answers are recorded and the answer (status, backend named in
//! X-Netbench-Backend) does not change. (Its own binary, so no other test's allocations are
//! counted; its tests measure one at a time.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use loadgen::http::{run, HttpConfig, HttpOptions};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: delegates every call unchanged to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Every answer, naming its backend.
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nX-Netbench-Backend: web-a\r\nContent-Length: 6\r\n\r\nhello\n";

/// One measurement at a time (the counter is the whole process's).
static MEASURING: Mutex<()> = Mutex::new(());

/// Keep-alive HTTP server: fixed buffer, static response, no allocation per request.
fn start_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let _ = conn.set_nodelay(true);
                let mut buf = [0u8; 8192];
                let mut tail = 0usize; // bytes of a partial "\r\n\r\n" carried over
                loop {
                    let n = match conn.read(&mut buf[tail..]) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n + tail,
                    };
                    let requests = buf[..n].windows(4).filter(|w| w == b"\r\n\r\n").count();
                    tail = 0;
                    if requests == 0 {
                        tail = n.min(3);
                        buf.copy_within(n - tail..n, 0);
                    }
                    for _ in 0..requests {
                        if conn.write_all(RESPONSE).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

#[test]
fn keepalive_hot_path_does_not_allocate_per_request() {
    assert_no_allocation_per_request(false);
}

#[test]
fn recording_an_unchanged_answer_does_not_allocate_per_request() {
    assert_no_allocation_per_request(true);
}

fn assert_no_allocation_per_request(record_answers: bool) {
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let port = start_server();
    // Thousands of requests are needed to tell a per-request allocation from the bounded
    // set-up: a second is plenty on an idle machine, a loaded one may need longer (one run
    // made 263 in a second), so the run is repeated, twice as long each time, until one has
    // them. Each run is judged on its own allocations.
    for secs in [1, 2, 4, 8, 16] {
        let mut opts = HttpOptions::new(format!("http://127.0.0.1:{port}/"));
        opts.connections = 4;
        opts.threads = 1;
        opts.duration = format!("{secs}s");
        opts.record_answers = record_answers;
        let cfg = HttpConfig::from_options(&opts).unwrap();
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let report = run(&cfg, None).unwrap();
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        let requests = report.counters.requests;
        assert_eq!(report.counters.errors.total(), 0, "{:?}", report.counters);
        if record_answers {
            let answers = report.answers.expect("answers recorded");
            assert_eq!(answers.sightings.len(), 1, "{:?}", answers.sightings);
        }
        if requests <= 2_000 {
            eprintln!("{requests} requests in {secs} s: too few to judge, running longer");
            continue;
        }
        // Setup (threads, runtime, connections, histograms, report) is a bounded cost.
        assert!(
            allocations < 1_000,
            "{allocations} allocations for {requests} requests: the hot path allocates"
        );
        return;
    }
    panic!("never more than 2000 requests in a run, even of 16 s");
}
